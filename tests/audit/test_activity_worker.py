"""A task a real Celery worker runs records its changes as ``celery <task name>``."""

from __future__ import annotations

from audit.models import AuditRecord
from controlplane.celery import app
from members.services import team_get_or_create
from plans.keys import signing_keys_bootstrap
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for
from tests.plans.keys_helpers import age_keys

DAY = 86400

pytestmark = [*REAL_WORKER_MARKS]


def test_a_rotation_run_by_a_real_worker_is_recorded_as_the_task(tmp_path):
    team = team_get_or_create(slug="acme", name="Acme")
    signing_keys_bootstrap()
    age_keys(2 * DAY)

    def rotation_records() -> list[AuditRecord]:
        return list(
            AuditRecord.objects.filter(
                team=team, kind=AuditRecord.Kind.CHANGE, details__action="rotated"
            )
        )

    with running_worker(tmp_path) as worker:
        app.send_task("plans.tasks.rotate_signing_keys", queue=worker.queue)
        recorded = wait_for(lambda: bool(rotation_records()), timeout=60, interval=0.5)
        assert recorded, f"no rotation recorded:\n{worker.tail()}"

    (record,) = rotation_records()
    assert record.actor == "celery plans.tasks.rotate_signing_keys"
    assert record.details["object"] == "signing_key"
