"""SCIM tokens: an identity provider's bearer credential for one team's ``/scim/v2``,
created by a superuser (console or ``manage.py create_scim_token``), shown once, stored as
a keyed hash (``kernel.credentials``), revocable; creating and revoking one is recorded in
the team's activity log."""

from __future__ import annotations

from audit.tokens import team_token_create, team_token_find, team_token_revoke
from kernel.credentials import credential_touch
from teams.models import Team

from .models import ScimToken

OBJECT_TYPE = "SCIM token"


def scim_token_create(*, team: Team, name: str = "") -> tuple[ScimToken, str]:
    return team_token_create(ScimToken, team=team, object_type=OBJECT_TYPE, name=name)


def scim_token_revoke(*, token: ScimToken) -> bool:
    return team_token_revoke(token, object_type=OBJECT_TYPE)


def scim_token_authenticate(plaintext: str) -> ScimToken | None:
    return team_token_find(ScimToken, plaintext)


def scim_token_touch(*, token: ScimToken) -> None:
    credential_touch(token)


def scim_actor(token: ScimToken) -> str:
    """How the activity log names a change the identity provider made."""
    return f"SCIM token {token.prefix}" + (f" ({token.name})" if token.name else "")
