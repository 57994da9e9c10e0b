"""``manage.py create_scim_token --team SLUG [--name NAME]``: the bearer token an identity
provider provisions the team's members with (``/scim/v2``). Prints ``{"token": "pgs_..."}``
as its last line: shown this once, stored only as a keyed hash."""

from __future__ import annotations

from typing import Any

from audit.token_command import TeamTokenCommand
from teams.models import Team

from ...tokens import scim_token_create


class Command(TeamTokenCommand):
    help = 'Create a SCIM token for a team; prints {"token": "pgs_..."} last.'
    noun = "SCIM token"
    name_example = "Okta"

    def token_create(self, team: Team, name: str, options: dict[str, Any]) -> tuple[Any, str]:
        return scim_token_create(team=team, name=name)

    def said(self, token: Any) -> str:
        return f"for team {token.team.slug} (SCIM base URL: <this server>/scim/v2)"
