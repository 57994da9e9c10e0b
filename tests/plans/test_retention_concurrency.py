"""Two retention runs at once, on PostgreSQL: they share the work (FOR UPDATE SKIP LOCKED),
every row is exported once and removed once, and the trail counts each emptied record once."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from audit.models import AuditRecord
from audit.retention import RETENTION_OBJECT, retention_export
from audit.services import records_seal
from audit.verification import chain_verify
from plans.models import PlanEvent
from plans.retention import retention_apply
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES

from .retention_export import exported, write_rows
from .test_retention import declare_with_events, refusal

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]

RUNS = 2


def test_two_runs_at_once_export_and_remove_each_row_once(agent, team, tmp_path, monkeypatch):
    export_file = tmp_path / "export.jsonl"
    monkeypatch.setenv("RETENTION_EXPORT_FILE", str(export_file))
    for _ in range(3):
        declare_with_events(agent, *([500] * 20), 3)
    old_refusals = [refusal(team, 401 + n) for n in range(10)]
    records_seal()
    old_decision_records = AuditRecord.objects.filter(
        team=team, kind=AuditRecord.Kind.DECISION
    ).count()
    start = threading.Barrier(RUNS)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            start.wait(timeout=30)
            retention_apply(batch_size=3)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    retention_export.connect(write_rows, dispatch_uid="test-export-concurrent")
    try:
        threads = [threading.Thread(target=run, daemon=True) for _ in range(RUNS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        retention_export.disconnect(dispatch_uid="test-export-concurrent")

    assert errors == []
    lines = exported(str(export_file))
    keys = [(line["model"], line["id"]) for line in lines]
    assert len(keys) == len(set(keys)), "a row was exported twice"
    assert all(line["whole_when_exported"] for line in lines)
    assert len([k for k in keys if k[0] == "PlanEvent"]) == 60
    assert PlanEvent.objects.count() == 3  # the recent one of each plan
    emptied = AuditRecord.objects.filter(team=team, redacted_at__isnull=False).count()
    assert emptied == 60 + len(old_refusals) == len([k for k in keys if k[0] == "AuditRecord"])
    assert old_decision_records == 63
    declared = sum(
        details["redacted"]
        for details in AuditRecord.objects.filter(
            team=team, details__object=RETENTION_OBJECT
        ).values_list("details", flat=True)
    )
    assert declared == emptied
    records_seal()
    report = chain_verify(team=team)
    assert report.intact, report.broken
