import json
from pathlib import Path

from django.core.management.base import CommandError
from django.db import transaction

from audit.doors import AuditedCommand
from kernel.problems import DomainError
from members.services import DEFAULT_TEAM_SLUG, team_get_or_create
from policies.references import policy_reference_warnings
from policies.services import policy_set
from teams.selectors import team_by_reference


class Command(AuditedCommand):
    help = "Create a policy or publish its next version from a JSON file."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--file", required=True, type=Path, help="policy document (JSON)")
        parser.add_argument(
            "--team",
            default=DEFAULT_TEAM_SLUG,
            help="the team's slug or name; a new slug makes the team",
        )
        parser.add_argument("--comment", default="")
        parser.add_argument(
            "--strict",
            action="store_true",
            help="refuse (publish nothing, exit 1) when the document names a role or group "
            "the team does not have; without it these are warnings on stderr",
        )
        parser.add_argument(
            "--shadow",
            action="store_true",
            help="publish in shadow: decided under beside the active version and recorded "
            "where it answers otherwise, never enforced; the active version stays",
        )

    def handle(
        self,
        *args,
        slug: str,
        file: Path,
        team: str,
        comment: str,
        strict: bool,
        shadow: bool = False,
        **options,
    ) -> None:
        try:
            document = json.loads(file.read_text())
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise CommandError(f"{file} is not JSON: {exc}") from exc
        try:
            # One transaction: a refused document leaves no new team or policy behind.
            with transaction.atomic():
                team_row = team_by_reference(team) or team_get_or_create(slug=team)
                version = policy_set(
                    team=team_row,
                    slug=slug,
                    document=document,
                    comment=comment,
                    created_by="set_policy",
                    shadow=shadow,
                )
                warnings = policy_reference_warnings(team=team_row, document=version.document)
                for warning in warnings:
                    self.stderr.write(f"warning: {warning}")
                if strict and warnings:
                    # Raised inside the transaction: the version is not published.
                    raise CommandError(
                        f"--strict: {len(warnings)} name(s) the team does not have; "
                        "nothing was published."
                    )
        except DomainError as exc:
            details = "; ".join(f"{error.path}: {error.detail}" for error in exc.errors)
            raise CommandError(f"{exc.detail} {details}") from exc
        answer: dict[str, object] = {
            "policy": slug,
            "version": version.number,
            "hash": version.hash,
        }
        if shadow:
            answer["shadow"] = True
        self.stdout.write(json.dumps(answer))
