"""A real Celery worker with beat seals records within seconds of their being written."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from audit.verification import chain_verify
from tests.integration.processes import (
    IS_POSTGRES,
    IS_REDIS,
    NEEDS_POSTGRES,
    NEEDS_REDIS,
    forget_queue,
    process_env,
    start_beat_worker,
    stop,
    tail,
    unique_queue,
    wait_for,
)

from .helpers import append, sealed_seqs


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_beat_and_a_real_worker_seal_new_records_on_schedule(tmp_path, team, other_team):
    append(team, 4)
    append(other_team, 2)
    queue = unique_queue()
    env = process_env(
        AUDIT_SEAL_SECONDS="1",
        KEY_ROTATION_CHECK_SECONDS="3600",
        PLAN_EXPIRY_SWEEP_SECONDS="3600",
        CELERY_TASK_DEFAULT_QUEUE=queue,
    )
    worker, log = start_beat_worker(queue, env=env, directory=tmp_path)

    def all_sealed() -> bool:
        return worker.poll() is not None or not AuditRecord.objects.unsealed().exists()

    try:
        assert wait_for(all_sealed, timeout=120, interval=0.5), f"not sealed:\n{tail(log)}"
        assert worker.poll() is None, f"the worker exited:\n{tail(log)}"
        # Records written while it runs are sealed by a later tick, after the first ones.
        first_count = AuditRecord.objects.filter(team=team).count()
        append(team, 3)
        assert wait_for(all_sealed, timeout=120, interval=0.5), f"not sealed:\n{tail(log)}"
    finally:
        stop(worker)
        forget_queue(queue)

    total = AuditRecord.objects.filter(team=team).count()
    assert total == first_count + 3
    assert sealed_seqs(team) == list(range(1, total + 1))
    assert chain_verify(team=team).intact and chain_verify(team=other_team).intact
    assert "audit.tasks.seal_audit_records" in log.read_text(errors="replace")
