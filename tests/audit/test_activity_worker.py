"""A task a real Celery worker runs records its changes as ``celery <task name>``."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from controlplane.celery import app
from members.services import team_get_or_create
from plans.keys import signing_keys_bootstrap
from tests.integration.processes import (
    IS_POSTGRES,
    IS_REDIS,
    NEEDS_POSTGRES,
    NEEDS_REDIS,
    forget_queue,
    process_env,
    start,
    stop,
    tail,
    unique_queue,
    wait_for,
    worker_args,
)
from tests.plans.keys_helpers import age_keys

DAY = 86400


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_a_rotation_run_by_a_real_worker_is_recorded_as_the_task(tmp_path):
    team = team_get_or_create(slug="acme", name="Acme")
    signing_keys_bootstrap()
    age_keys(2 * DAY)
    queue = unique_queue()
    log = tmp_path / "worker.log"
    worker = start(worker_args(queue), env=process_env(CELERY_TASK_DEFAULT_QUEUE=queue), log=log)

    def rotation_records() -> list[AuditRecord]:
        return list(
            AuditRecord.objects.filter(
                team=team, kind=AuditRecord.Kind.CHANGE, details__action="rotated"
            )
        )

    try:
        app.send_task("plans.tasks.rotate_signing_keys", queue=queue)
        recorded = wait_for(lambda: bool(rotation_records()), timeout=60, interval=0.5)
        assert recorded, f"no rotation recorded:\n{tail(log)}"
    finally:
        stop(worker)
        forget_queue(queue)

    (record,) = rotation_records()
    assert record.actor == "celery plans.tasks.rotate_signing_keys"
    assert record.details["object"] == "signing_key"
