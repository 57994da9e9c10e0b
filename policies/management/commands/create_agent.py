import json

from django.core.management.base import CommandError
from django.db import transaction

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG, agent_create, api_key_create
from policies.models import Policy
from teams.selectors import team_require


class Command(AuditedCommand):
    help = 'Create an agent bound to a policy; prints {"agent": id, "apiKey": "pg_..."} last.'

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--policy", required=True, help="policy slug")
        parser.add_argument("--team", default=DEFAULT_TEAM_SLUG, help="the team's slug or name")

    def handle(self, *args, name: str, policy: str, team: str, **options) -> None:
        try:
            team_obj = team_require(team)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        policy_obj = Policy.objects.filter(team=team_obj, slug=policy).first()
        if policy_obj is None:
            raise CommandError(
                f"no policy {policy!r} in team {team_obj.slug!r}; run set_policy first"
            )
        try:
            with transaction.atomic():
                agent = agent_create(team=team_obj, name=name, policy=policy_obj)
                _, plaintext = api_key_create(agent=agent, name="created by create_agent")
        except DomainError as exc:
            raise CommandError(
                "; ".join(error.detail for error in exc.errors) or exc.detail
            ) from exc
        self.stdout.write(json.dumps({"agent": agent.id, "apiKey": plaintext}))
