"""Change records: what an admin or an operator changed, in the team's activity log.

Every write that changes a team's data appends one ``change`` record in the same
transaction, whose ``details`` say what changed in one shape for every object::

    {"object": "member", "id": 7, "name": "alice@acme.dev", "action": "updated",
     "changes": {"role": ["engineer", "sre"], "groups": [["platform"], ["oncall"]]}}

``changes`` maps each field that changed to ``[old, new]`` (old is null for a new object,
new is null for a deleted one), in values a person reads (names, not primary keys). A write
that changes nothing appends nothing. Secrets never appear: an API key is named by its
visible prefix, a password only as changed. The actor comes from the door
(``audit.actors.acting_as``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from django.db.models import Model, QuerySet

from teams.models import Team

from .models import AuditRecord
from .services import record_build, records_append

Changes = dict[str, list[Any]]


def readable(value: Any) -> Any:
    """``value`` as JSON a person reads: a row by its name, a moment in ISO 8601, a set of
    rows as their sorted names."""
    if isinstance(value, Model):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, QuerySet | list | tuple | set | frozenset):
        return sorted((readable(item) for item in value), key=str)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def field_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> Changes:
    """``{field: [old, new]}`` for each field of ``after`` whose value differs from
    ``before``'s (a field missing from ``before`` was empty: a new object)."""
    changes: Changes = {}
    for field, new in after.items():
        old = readable(before.get(field))
        new = readable(new)
        if old != new:
            changes[field] = [old, new]
    return changes


def created_changes(after: Mapping[str, Any]) -> Changes:
    """A new object's changes: each field that holds something, from null."""
    return field_changes(
        {}, {field: value for field, value in after.items() if value not in (None, "", [])}
    )


def change_build(
    *,
    team: Team | int,
    object_type: str,
    object_id: object,
    name: str,
    action: str,
    changes: Changes | None = None,
    extra: Mapping[str, Any] | None = None,
    user: str = "",
    agent_id: str | None = None,
    agent_name: str = "",
    policy: str = "",
    policy_version: int | None = None,
) -> AuditRecord:
    """An unsaved change record (see the module's docstring for ``details``).

    ``user``, ``agent_id``, ``agent_name``, ``policy`` and ``policy_version`` fill the record's own
    columns when the change is about a member, an agent or a policy, so the activity log
    filters like the other records do."""
    details: dict[str, Any] = {
        "object": object_type,
        "id": readable(object_id),
        "name": name,
        "action": action,
    }
    if changes:
        details["changes"] = changes
    details.update(extra or {})
    return record_build(
        team=team,
        kind=AuditRecord.Kind.CHANGE,
        user=user,
        agent_id=agent_id,
        agent_name=agent_name,
        policy=policy,
        policy_version=policy_version,
        details=details,
    )


def change_append(**fields: Any) -> AuditRecord:
    """Build (``change_build``'s arguments) and save one change record."""
    record = change_build(**fields)
    record.save(force_insert=True)
    return record


def changes_append_to_teams(team_ids: Iterable[int], **fields: Any) -> list[AuditRecord]:
    """The same change recorded in each of ``team_ids``' logs, in one insert: for what
    every team shares (the signing keys), or an object that left one team for another."""
    return records_append(change_build(team=team_id, **fields) for team_id in team_ids)
