from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG, member_disable
from teams.selectors import team_require


class Command(AuditedCommand):
    help = "Disable a member: no new plan or refresh is signed for them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("email")
        parser.add_argument("--team", default=DEFAULT_TEAM_SLUG, help="the team's slug or name")

    def handle(self, *args, email: str, team: str, **options) -> None:
        try:
            team_obj = team_require(team)
            member = member_disable(team=team_obj, email=email)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"member {member.email} in team {team_obj.slug} is disabled")
