"""Signing-key changes in the activity log.

The keys sign every team's tokens, so a change to them is a change to every team: each
team's log gets its own record of it (written in one insert, in the transaction of the
change), and an auditor of one team reads the whole story of the keys that signed that
team's tokens without a log of its own to look in. A database with no team yet records
nothing: there is no log to write in, and no team's token was signed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from audit.changes import Changes, changes_append_to_teams
from teams.models import Team

from .results import KeyChange, State


def key_changes(changes: Iterable[KeyChange], removed: Iterable[str] = ()) -> Changes:
    """``{kid: [state before, state after]}``: null before for a created key, null after
    for a retired key that was deleted."""
    by_kid: Changes = {}
    for change in changes:
        earlier = by_kid.get(change.kid)
        by_kid[change.kid] = [earlier[0] if earlier else change.before, change.after]
    for kid in removed:
        by_kid[kid] = [State.RETIRED, None]
    return by_kid


def signing_keys_change_record(
    *, action: str, kid: str = "", changes: Changes, extra: dict[str, Any] | None = None
) -> None:
    """Record a change of the signing keys in every team's log; nothing when nothing
    changed. ``kid`` is the key the change is about (the one revoked, the one that signs
    now), if one is."""
    if not changes and not extra:
        return
    changes_append_to_teams(
        Team.objects.order_by("pk").values_list("pk", flat=True),
        object_type="signing_key",
        object_id=kid or None,
        name=kid or "signing keys",
        action=action,
        changes=changes,
        extra=extra,
    )
