import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG
from policies.management.commands._input import policy_named, read_json, refused, team_named
from rehearsal.impact import DEFAULT_LISTED, impact_report

#: the exit status with --fail-on-impact when some live plan would be refused
IMPACT_FOUND = 1


class Command(BaseCommand):
    help = (
        "Show what publishing a policy document would refuse among the team's live plans, "
        "as JSON, without publishing it. Exit 0; with --fail-on-impact, 1 when a plan would "
        "be refused; 2 for input that cannot be used (a bad file, document, team)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the policy's slug")
        parser.add_argument("--file", required=True, type=Path, help="policy document (JSON)")
        parser.add_argument("--team", default=DEFAULT_TEAM_SLUG, help="the team's slug or name")
        parser.add_argument(
            "--limit",
            type=int,
            default=DEFAULT_LISTED,
            help=f"list at most this many affected plans (all are counted); "
            f"default {DEFAULT_LISTED}",
        )
        parser.add_argument(
            "--fail-on-impact",
            action="store_true",
            help=f"exit {IMPACT_FOUND} when a live plan would be refused (for CI)",
        )

    def handle(
        self,
        *args,
        slug: str,
        file: Path,
        team: str,
        limit: int,
        fail_on_impact: bool,
        **options,
    ) -> None:
        if limit < 0:
            raise CommandError("--limit must be 0 or more", returncode=2)
        document = read_json(file)
        the_team = team_named(team)
        policy = policy_named(the_team, slug)
        try:
            answer = impact_report(policy=policy, slug=slug, document=document, limit=limit)
        except DomainError as exc:
            raise refused(exc) from exc
        self.stdout.write(json.dumps({"team": the_team.slug, **answer}, indent=2))
        if fail_on_impact and answer["plansAffected"]:
            raise CommandError(
                f"{answer['plansAffected']} live plan(s) would be refused at their next refresh",
                returncode=IMPACT_FOUND,
            )
