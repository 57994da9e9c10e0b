"""The sealing task that beat runs every AUDIT_SEAL_SECONDS."""

from __future__ import annotations

from django.conf import settings

from audit.models import AuditRecord
from audit.tasks import seal_audit_records
from audit.verification import chain_verify

from .helpers import append, sealed_seqs


def test_the_task_seals_every_teams_new_records_and_a_second_run_seals_none(team, other_team):
    append(team, 3)
    append(other_team, 2)
    total = AuditRecord.objects.count()
    assert seal_audit_records.apply().get() == total
    assert seal_audit_records.apply().get() == 0
    assert sealed_seqs(team) == list(range(1, AuditRecord.objects.filter(team=team).count() + 1))
    assert chain_verify(team=team).intact and chain_verify(team=other_team).intact


def test_beat_runs_it_every_few_seconds_and_a_late_run_expires():
    entry = settings.CELERY_BEAT_SCHEDULE["seal-audit-records"]
    assert entry["task"] == seal_audit_records.name
    assert entry["schedule"] == settings.AUDIT_SEAL_SECONDS == 2
    assert entry["options"]["expires"] == entry["schedule"]
