"""``manage.py create_admin_token --team SLUG [--write] [--user EMAIL] [--name NAME]``: a
token for the team's admin API (``/v1/admin/...``). Prints ``{"token": "pgadm_..."}`` as its
last line: the plaintext, shown this once and stored only as a keyed hash."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from teams.selectors import team_require

from ...tokens import admin_token_create


class Command(AuditedCommand):
    help = (
        'Create an admin API token for a team, read-only unless --write; prints {"token": '
        '"pgadm_..."} last.'
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--team", required=True, help="the team's slug or name")
        parser.add_argument(
            "--write", action="store_true", help="may change things (default: read only)"
        )
        parser.add_argument(
            "--user",
            default="",
            help="the e-mail of the console user the token decides approvals as",
        )
        parser.add_argument("--name", default="", help="what the token is for, e.g. 'CI'")

    def handle(self, *args, team: str, write: bool, user: str, name: str, **options) -> None:
        person = None
        if user:
            people = list(get_user_model().objects.filter(email__iexact=user.strip())[:2])
            if len(people) != 1:
                raise CommandError(
                    f"no user with the e-mail {user!r}"
                    if not people
                    else f"several users have the e-mail {user!r}; give each their own"
                )
            person = people[0]
        try:
            team_obj = team_require(team)
            token, plaintext = admin_token_create(
                team=team_obj, name=name, can_write=write, user=person
            )
        except DomainError as exc:
            raise CommandError(
                "; ".join(error.detail for error in exc.errors) or exc.detail
            ) from exc
        self.stderr.write(
            f"Admin token {token.prefix} ({token.scope}) for team {team_obj.slug}: shown once,"
            " keep it now."
        )
        self.stdout.write(json.dumps({"token": plaintext}))
