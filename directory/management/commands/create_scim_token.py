"""``manage.py create_scim_token --team SLUG [--name NAME]``: the bearer token an identity
provider provisions the team's members with (``/scim/v2``). Prints ``{"token": "pgs_..."}``
as its last line: shown this once, stored only as a keyed hash."""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from teams.selectors import team_require

from ...tokens import scim_token_create


class Command(AuditedCommand):
    help = 'Create a SCIM token for a team; prints {"token": "pgs_..."} last.'

    def add_arguments(self, parser) -> None:
        parser.add_argument("--team", required=True, help="the team's slug or name")
        parser.add_argument("--name", default="", help="what it is for, e.g. 'Okta'")

    def handle(self, *args, team: str, name: str, **options) -> None:
        try:
            team_obj = team_require(team)
            token, plaintext = scim_token_create(team=team_obj, name=name)
        except DomainError as exc:
            raise CommandError(
                "; ".join(error.detail for error in exc.errors) or exc.detail
            ) from exc
        self.stderr.write(
            f"SCIM token {token.prefix} for team {team_obj.slug}: shown once, keep it now. "
            f"The SCIM base URL is <this server>/scim/v2."
        )
        self.stdout.write(json.dumps({"token": plaintext}))
