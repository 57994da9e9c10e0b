"""Admin tokens: a team's bearer credentials for the admin API, read-only or read-write,
created in the console (superusers) or by ``manage.py create_admin_token``, shown once,
stored as a keyed hash (``kernel.credentials``), revocable. Creating and revoking one is
recorded in the team's activity log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from audit.tokens import team_token_create, team_token_find, team_token_revoke
from kernel.credentials import credential_touch
from kernel.problems import Code, DomainError
from teams.models import Team

from .models import AdminToken

OBJECT_TYPE = "admin token"


def admin_token_create(
    *,
    team: Team,
    name: str = "",
    can_write: bool = False,
    user: Any = None,
    created_by: str | None = None,
) -> tuple[AdminToken, str]:
    """An admin API token for ``team`` (``audit.tokens.team_token_create``); ``user``: the
    console user it decides approvals as."""
    return team_token_create(
        AdminToken,
        team=team,
        object_type=OBJECT_TYPE,
        name=name,
        created_by=created_by,
        shown={
            "scope": "write" if can_write else "read",
            "user": user.get_username() if user is not None else "",
        },
        can_write=can_write,
        user=user,
    )


def admin_token_revoke(*, token: AdminToken) -> bool:
    return team_token_revoke(token, object_type=OBJECT_TYPE)


def admin_token_authenticate(plaintext: str) -> AdminToken:
    """The usable token for ``plaintext``, or DomainError ``invalid_admin_token``."""
    token = team_token_find(AdminToken, plaintext, "user")
    if token is None:
        raise DomainError(
            Code.INVALID_ADMIN_TOKEN, "The admin token is missing, unknown or revoked."
        )
    return token


def admin_token_touch(*, token: AdminToken, now: datetime | None = None) -> None:
    credential_touch(token, now=now)


def admin_token_actor(token: AdminToken) -> str:
    """How the activity log names a change made through the admin API."""
    return f"admin token {token.prefix}" + (f" ({token.name})" if token.name else "")
