"""Appending to the audit trail. Every door's write calls ``record_append`` (or
``records_append`` for many) inside its own transaction, so a record exists exactly when
what it describes does; a refusal, which writes nothing else, is appended on its own."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from members.models import Team

from .actors import current_actor
from .models import AuditRecord, UnattributedRefusal


def record_build(
    *,
    team: Team | int,
    kind: AuditRecord.Kind,
    at: datetime | None = None,
    actor: str | None = None,
    agent_id: int | None = None,
    agent_name: str = "",
    user: str = "",
    plan_id: str = "",
    plan_hash: str = "",
    policy: str = "",
    policy_version: int | None = None,
    code: str = "",
    rule: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> AuditRecord:
    """An unsaved record; ``actor`` defaults to the door's (audit.actors.acting_as)."""
    team_id = team if isinstance(team, int) else team.pk
    return AuditRecord(
        team_id=team_id,
        kind=kind,
        at=at or timezone.now(),
        actor=current_actor() if actor is None else actor,
        agent_id=agent_id,
        agent_name=agent_name,
        user=user,
        plan_id=plan_id,
        plan_hash=plan_hash,
        policy=policy,
        policy_version=policy_version,
        code=str(code),
        rule=rule,
        details=details or {},
    )


def record_append(**fields: Any) -> AuditRecord:
    record = record_build(**fields)
    record.save(force_insert=True)
    return record


def records_append(records: Iterable[AuditRecord]) -> list[AuditRecord]:
    return AuditRecord.objects.bulk_create(list(records))


def unattributed_refusal_count(*, code: str, day: date | None = None) -> None:
    """Count one refusal that names no agent (UnattributedRefusal), for ``day`` (today, UTC).

    One statement that inserts the day's first or adds one, as kernel.ratelimit counts its
    hits: atomic on SQLite and PostgreSQL, with no read-then-write race between workers.
    """
    day = day or timezone.now().date()
    # Only the model's own table name is formatted in; the values are parameters.
    table = connection.ops.quote_name(UnattributedRefusal._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (day, code, count) VALUES (%s, %s, 1) "  # noqa: S608
            f"ON CONFLICT (day, code) DO UPDATE SET count = {table}.count + 1",
            [connection.ops.adapt_datefield_value(day), str(code)],
        )
