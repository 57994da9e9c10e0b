"""``manage.py create_audit_token --team SLUG_OR_NAME [--name NAME]``: a read-only token for the
team's audit records API. Prints ``{"token": "pga_..."}`` as its last line: the plaintext,
shown this once and stored only as a keyed hash."""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from audit.tokens import audit_token_create
from kernel.problems import DomainError
from teams.selectors import team_require


class Command(AuditedCommand):
    help = 'Create a read-only audit token for a team; prints {"token": "pga_..."} last.'

    def add_arguments(self, parser) -> None:
        parser.add_argument("--team", required=True, help="the team's slug or name")
        parser.add_argument("--name", default="", help="what the token is for, e.g. 'SIEM'")

    def handle(self, *args, team: str, name: str, **options) -> None:
        try:
            team_obj = team_require(team)
            token, plaintext = audit_token_create(team=team_obj, name=name)
        except DomainError as exc:
            raise CommandError(
                "; ".join(error.detail for error in exc.errors) or exc.detail
            ) from exc
        self.stderr.write(
            f"Audit token {token.prefix} for team {team_obj.slug}: shown once, keep it now."
        )
        self.stdout.write(json.dumps({"token": plaintext}))
