"""The one shape of ``manage.py create_<kind>_token --team SLUG [--name NAME] ...``: a team
token created, said on stderr, and printed as ``{"token": "..."}`` on the last line of
stdout (the plaintext, shown this once). audit, adminapi and directory each subclass it."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from kernel.problems import DomainError
from teams.models import Team
from teams.selectors import team_require

from .doors import AuditedCommand


class TeamTokenCommand(AuditedCommand):
    #: what the token is called in the sentence on stderr
    noun = "token"
    #: what ``--name`` suggests
    name_example = "SIEM"

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--team", required=True, help="the team's slug or name")
        parser.add_argument(
            "--name", default="", help=f"what the token is for, e.g. '{self.name_example}'"
        )

    def token_create(self, team: Team, name: str, options: dict[str, Any]) -> tuple[Any, str]:
        raise NotImplementedError

    def said(self, token: Any) -> str:
        """What stderr says of the new token after its prefix."""
        return f"for team {token.team.slug}"

    def handle(self, *args: Any, team: str, name: str, **options: Any) -> None:
        try:
            token, plaintext = self.token_create(team_require(team), name, options)
        except DomainError as exc:
            raise CommandError(
                "; ".join(error.detail for error in exc.errors) or exc.detail
            ) from exc
        self.stderr.write(
            f"{self.noun} {token.prefix} {self.said(token)}: shown once, keep it now."
        )
        self.stdout.write(json.dumps({"token": plaintext}))
