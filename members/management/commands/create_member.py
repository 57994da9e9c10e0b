from django.core.management.base import CommandError

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG, member_upsert, team_get_or_create
from teams.selectors import team_by_reference


class Command(AuditedCommand):
    help = "Create a member (and the team, role and groups if missing) or update an existing one."

    def add_arguments(self, parser) -> None:
        parser.add_argument("email")
        parser.add_argument(
            "--team",
            default=DEFAULT_TEAM_SLUG,
            help="the team's slug or name; a new slug makes the team",
        )
        parser.add_argument("--name")
        parser.add_argument("--role", help="role name; an empty string clears the role")
        parser.add_argument(
            "--group", action="append", dest="groups", help="group name; repeat for several"
        )

    def handle(self, *args, email: str, team: str, name, role, groups, **options) -> None:
        try:
            team_obj = team_by_reference(team) or team_get_or_create(slug=team)
            member = member_upsert(
                team=team_obj,
                email=email,
                name=name,
                role=role,
                groups=groups,
                is_active=True,
            )
        except DomainError as exc:
            raise CommandError(
                "; ".join(error.detail for error in exc.errors) or exc.detail
            ) from exc
        role_name = member.role.name if member.role else "-"
        self.stdout.write(
            f"member {member.email} in team {team_obj.slug}: role {role_name}, "
            f"groups {', '.join(member.group_names()) or '-'}"
        )
