import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG
from policies.management.commands._input import policy_named, read_json, refused, team_named
from policies.services import policy_document_validate
from rehearsal.impact import DEFAULT_LISTED, PolicyImpact, policy_impact

#: the exit status with --fail-on-impact when some live plan would be refused
IMPACT_FOUND = 1


def impact_json(impact: PolicyImpact) -> dict[str, Any]:
    """The preview's JSON, each step's ``index`` (from 0, as the ``steps[0]`` paths) beside
    its ``number`` (from 1, as the preview page and every surface a person reads count it,
    docs/decisions/0058), refused steps and warned ones alike."""
    answer = impact.as_json()
    answer["plans"] = [
        {
            **plan.as_json(),
            "steps": [
                {"index": step.index, "number": step.number, **step.as_json()}
                for step in plan.steps
            ],
        }
        for plan in impact.plans
    ]
    answer["warned"] = [
        {
            **plan.as_json(),
            "warnings": [
                {"index": warning.index, "number": warning.number, **warning.as_json()}
                for warning in plan.warnings
            ],
        }
        for plan in impact.warned
    ]
    return answer


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
            if policy is None:
                # A policy not created yet: no agent points at it, so no plan reads it.
                policy_document_validate(document)
                answer: dict[str, Any] = {
                    "policy": slug,
                    "currentVersion": None,
                    "plansChecked": 0,
                    "plansAffected": 0,
                    "plans": [],
                }
            else:
                answer = impact_json(policy_impact(policy=policy, document=document, limit=limit))
        except DomainError as exc:
            raise refused(exc) from exc
        self.stdout.write(json.dumps({"team": the_team.slug, **answer}, indent=2))
        if fail_on_impact and answer["plansAffected"]:
            raise CommandError(
                f"{answer['plansAffected']} live plan(s) would be refused at their next refresh",
                returncode=IMPACT_FOUND,
            )
