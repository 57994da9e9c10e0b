"""Appending to the audit trail. Every door's write calls ``record_append`` (or
``records_append`` for many) inside its own transaction, so a record exists exactly when
what it describes does; a refusal, which writes nothing else, is appended on its own."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.utils import timezone

from members.models import Team

from .actors import current_actor
from .models import AuditRecord


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
