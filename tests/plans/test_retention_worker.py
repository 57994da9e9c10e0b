"""A real Celery worker with beat applies retention on schedule: old decisions and refused
attempts go after the export receiver the setting names has written them, and the trail
records the run as the task's, with a chain that still verifies."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from audit.retention import RETENTION_OBJECT
from audit.verification import chain_verify
from plans.models import Plan, PlanEvent
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

from .retention_export import exported
from .test_retention import declare_with_events, refusal


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_beat_and_a_real_worker_remove_old_decisions_after_exporting_them(tmp_path, agent, team):
    plan_id = declare_with_events(agent, 500, 420, 1)
    old_refusal = refusal(team, 401)
    export_file = tmp_path / "export.jsonl"
    queue = unique_queue()
    env = process_env(
        AUDIT_SEAL_SECONDS="1",
        RETENTION_SECONDS="1",
        KEY_ROTATION_CHECK_SECONDS="3600",
        PLAN_EXPIRY_SWEEP_SECONDS="3600",
        PLANGATE_RETENTION_EXPORT="tests.plans.retention_export.write_rows",
        RETENTION_EXPORT_FILE=str(export_file),
        CELERY_TASK_DEFAULT_QUEUE=queue,
    )
    worker, log = start_beat_worker(queue, env=env, directory=tmp_path)

    def applied() -> bool:
        return worker.poll() is not None or (
            AuditRecord.objects.filter(team=team, redacted_at__isnull=False).count() == 3
            and AuditRecord.objects.filter(
                team=team, details__object=RETENTION_OBJECT, seq__isnull=False
            ).exists()
            and not AuditRecord.objects.unsealed().exists()
        )

    try:
        assert wait_for(applied, timeout=120, interval=0.5), f"not applied:\n{tail(log)}"
        assert worker.poll() is None, f"the worker exited:\n{tail(log)}"
    finally:
        stop(worker)
        forget_queue(queue)

    assert PlanEvent.objects.filter(plan_id=plan_id).count() == 1
    assert Plan.objects.get(pk=plan_id).decisions_removed_before is not None
    assert AuditRecord.objects.get(pk=old_refusal.pk).redacted_at is not None
    lines = exported(str(export_file))
    assert len([line for line in lines if line["model"] == "PlanEvent"]) == 2
    assert len([line for line in lines if line["model"] == "AuditRecord"]) == 3
    assert all(line["whole_when_exported"] for line in lines)
    runs = AuditRecord.objects.filter(team=team, details__object=RETENTION_OBJECT)
    assert sum(run.details["redacted"] for run in runs) == 3
    assert {run.actor for run in runs} == {"celery plans.retention.apply_retention"}
    report = chain_verify(team=team)
    assert report.intact, report.broken
    assert "plans.retention.apply_retention" in log.read_text(errors="replace")
