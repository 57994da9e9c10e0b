"""``manage.py create_audit_token --team SLUG_OR_NAME [--name NAME]``: a read-only token for the
team's audit records API. Prints ``{"token": "pga_..."}`` as its last line: the plaintext,
shown this once and stored only as a keyed hash."""

from __future__ import annotations

from typing import Any

from audit.token_command import TeamTokenCommand
from audit.tokens import audit_token_create
from teams.models import Team


class Command(TeamTokenCommand):
    help = 'Create a read-only audit token for a team; prints {"token": "pga_..."} last.'
    noun = "Audit token"

    def token_create(self, team: Team, name: str, options: dict[str, Any]) -> tuple[Any, str]:
        return audit_token_create(team=team, name=name)
