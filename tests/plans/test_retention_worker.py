"""A real Celery worker with beat applies retention on schedule: old decisions and refused
attempts go after the export receiver the setting names has written them, and the trail
records the run as the task's, with a chain that still verifies."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from audit.retention import RETENTION_OBJECT
from audit.verification import chain_verify
from plans.models import Plan, PlanEvent
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for

from .retention_export import exported
from .test_retention import declare_with_events, refusal

pytestmark = [pytest.mark.slow, *REAL_WORKER_MARKS]


def test_beat_and_a_real_worker_remove_old_decisions_after_exporting_them(tmp_path, agent, team):
    plan_id = declare_with_events(agent, 500, 420, 1)
    old_refusal = refusal(team, 401)
    export_file = tmp_path / "export.jsonl"
    with running_worker(
        tmp_path,
        beat=True,
        AUDIT_SEAL_SECONDS="1",
        RETENTION_SECONDS="1",
        PLANGATE_RETENTION_EXPORT="tests.plans.retention_export.write_rows",
        RETENTION_EXPORT_FILE=str(export_file),
    ) as worker:

        def applied() -> bool:
            return worker.exited() or (
                AuditRecord.objects.filter(team=team, redacted_at__isnull=False).count() == 3
                and AuditRecord.objects.filter(
                    team=team, details__object=RETENTION_OBJECT, seq__isnull=False
                ).exists()
                and not AuditRecord.objects.unsealed().exists()
            )

        assert wait_for(applied, timeout=120, interval=0.5), f"not applied:\n{worker.tail()}"
        assert not worker.exited(), f"the worker exited:\n{worker.tail()}"

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
    assert "plans.retention.apply_retention" in worker.output()
