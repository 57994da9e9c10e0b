"""Shared reads of the audit trail."""

from __future__ import annotations

from teams.models import Team

from .models import AuditRecord


def records_after(*, team: Team, after: int, limit: int) -> list[AuditRecord]:
    """``team``'s sealed records with ``seq`` above ``after``, in ``seq`` order, at most
    ``limit`` (one range scan of the unique (team, seq) index)."""
    return list(
        AuditRecord.objects.sealed().filter(team=team, seq__gt=after).order_by("seq")[:limit]
    )
