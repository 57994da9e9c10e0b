"""Reading the activity log in the activity tests."""

from __future__ import annotations

from audit.models import AuditRecord
from teams.models import Team


def changes(team: Team) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.CHANGE).order_by("id"))


def change_count(team: Team) -> int:
    return AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.CHANGE).count()


def about(team: Team, object_type: str) -> list[AuditRecord]:
    return [record for record in changes(team) if record.details["object"] == object_type]
