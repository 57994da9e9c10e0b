from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from members.models import Team
from members.services import DEFAULT_TEAM_SLUG, member_disable


class Command(AuditedCommand):
    help = "Disable a member: no new plan or refresh is signed for them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("email")
        parser.add_argument("--team", default=DEFAULT_TEAM_SLUG)

    def handle(self, *args, email: str, team: str, **options) -> None:
        team_obj = Team.objects.filter(slug=team).first()
        if team_obj is None:
            raise CommandError(f"no team {team!r}")
        try:
            member = member_disable(team=team_obj, email=email)
        except DomainError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"member {member.email} in team {team} is disabled")
