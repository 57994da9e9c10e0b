import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG
from policies.management.commands._input import (
    USAGE_ERROR,
    member_named,
    parse_json,
    policy_named,
    read_json,
    refused,
    team_named,
)
from policies.models import PolicyVersion
from policies.selectors import policy_active_version
from rehearsal.simulator import simulate_call, simulate_plan

#: the exit status when the plan (or the call) would not be allowed
REFUSED = 1


class Command(BaseCommand):
    help = (
        "Test a policy version against a plan for a member (what issuance would answer) and "
        "optionally one call under that plan (what the agent's guard would answer), as JSON. "
        "Writes nothing. Exit 0 when allowed, 1 when refused or blocked, 2 for input that "
        "cannot be used."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        # --version names the policy version here, not Django's own version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="the policy's slug")
        parser.add_argument("--team", default=DEFAULT_TEAM_SLUG, help="the team's slug or name")
        parser.add_argument(
            "--version", type=int, help="the version number; default: the active one"
        )
        parser.add_argument("--member", required=True, help="the member's e-mail")
        parser.add_argument("--plan", required=True, type=Path, help="plan document (JSON)")
        parser.add_argument(
            "--call",
            nargs=2,
            metavar=("TOOL", "ARGS_JSON"),
            help="a call under the plan: its tool and its arguments as a JSON object",
        )

    def handle(
        self,
        *args,
        slug: str,
        team: str,
        version: int | None,
        member: str,
        plan: Path,
        call: list[str] | None,
        **options,
    ) -> None:
        document = read_json(plan)
        call_args = parse_json(call[1], "ARGS_JSON") if call else None
        the_team = team_named(team)
        policy = policy_named(the_team, slug)
        if policy is None:
            raise CommandError(f"no policy {slug!r} in team {team}", returncode=USAGE_ERROR)
        chosen: PolicyVersion | None = (
            policy_active_version(policy=policy)
            if version is None
            else policy.versions.select_related("policy").filter(number=version).first()
        )
        if chosen is None:
            raise CommandError(
                f"policy {slug} has no version {version or '(none published)'}",
                returncode=USAGE_ERROR,
            )
        the_member = member_named(the_team, member)
        answer: dict[str, Any]
        try:
            if call is None:
                simulated = simulate_plan(version=chosen, member=the_member, document=document)
                answer, allowed = {"plan": simulated.as_json()}, simulated.allowed
            else:
                result = simulate_call(
                    version=chosen,
                    member=the_member,
                    document=document,
                    tool=call[0],
                    args=call_args,
                )
                answer, allowed = result.as_json(), result.allowed
        except DomainError as exc:
            raise refused(exc) from exc
        self.stdout.write(json.dumps(answer, indent=2))
        if not allowed:
            raise CommandError("not allowed", returncode=REFUSED)
