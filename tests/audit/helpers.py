"""Building audit records for the audit tests, and tampering with them as a database
administrator would: straight SQL, no model code."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_append, records_seal
from plans.retention import retention_apply
from teams.models import Team


def append(team: Team, count: int = 1, **fields: Any) -> list[AuditRecord]:
    """``count`` decision records of ``team``, as the guard's intake would append them."""
    defaults: dict[str, Any] = {
        "kind": AuditRecord.Kind.DECISION,
        "actor": "agent:7",
        "agent_id": "01JAGENT000000000000000007",
        "agent_name": "summariser",
        "user": "alice@acme.dev",
        "plan_id": "01JABCDEFGHJKMNPQRSTVWXYZ0",
        "plan_hash": "ab" * 32,
        "policy": "default",
        "policy_version": 3,
        "code": "allowed",
        "rule": {"index": 0, "description": "read issues"},
    }
    return [
        record_append(team=team, **{**defaults, "details": {"n": number}, **fields})
        for number in range(count)
    ]


def emptied_by_retention(team: Team) -> tuple[AuditRecord, AuditRecord]:
    """Two sealed refused attempts of ``team``, and a run of the real retention service: the
    one older than the team's retention period as retention left it (emptied), and the
    recent one (untouched). The run's own record is sealed too."""
    now = timezone.now()
    (old,) = append(
        team,
        kind=AuditRecord.Kind.PLAN_REFUSED,
        code="policy_denied",
        at=now - timedelta(days=team.retention_days + 1),
    )
    (recent,) = append(
        team, kind=AuditRecord.Kind.PLAN_REFUSED, code="policy_denied", at=now - timedelta(days=1)
    )
    records_seal()
    retention_apply(now=now)
    records_seal()
    old.refresh_from_db()
    recent.refresh_from_db()
    return old, recent


def sealed_seqs(team: Team) -> list[int]:
    return list(
        AuditRecord.objects.filter(team=team, seq__isnull=False)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


def sql(statement: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def record_id_at(team: Team, seq: int) -> int:
    return AuditRecord.objects.get(team=team, seq=seq).pk
