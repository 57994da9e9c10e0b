"""``manage.py create_admin_token --team SLUG [--write] [--user EMAIL] [--name NAME]``: a
token for the team's admin API (``/v1/admin/...``). Prints ``{"token": "pgadm_..."}`` as its
last line: the plaintext, shown this once and stored only as a keyed hash."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from audit.token_command import TeamTokenCommand
from teams.models import Team

from ...tokens import admin_token_create


class Command(TeamTokenCommand):
    help = (
        'Create an admin API token for a team, read-only unless --write; prints {"token": '
        '"pgadm_..."} last.'
    )
    noun = "Admin token"
    name_example = "CI"

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--write", action="store_true", help="may change things (default: read only)"
        )
        parser.add_argument(
            "--user", default="", help="the e-mail of the console user it decides approvals as"
        )

    def token_create(self, team: Team, name: str, options: dict[str, Any]) -> tuple[Any, str]:
        person = None
        if options["user"]:
            people = list(
                get_user_model().objects.filter(email__iexact=options["user"].strip())[:2]
            )
            if len(people) != 1:
                raise CommandError(
                    f"no user with the e-mail {options['user']!r}"
                    if not people
                    else f"several users have the e-mail {options['user']!r}; give each their own"
                )
            person = people[0]
        return admin_token_create(team=team, name=name, can_write=options["write"], user=person)

    def said(self, token: Any) -> str:
        return f"({token.scope}) for team {token.team.slug}"
