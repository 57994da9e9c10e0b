"""What the policy commands read: a JSON file, a team's policy, a member. Their failures are
exit status 2 (``CommandError``), apart from an answer's own 0 or 1."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError

from kernel.problems import DomainError
from members.models import Member
from policies.models import Policy
from teams.models import Team
from teams.selectors import team_require

#: a command's own exit status for input it cannot use (a missing file, bad JSON...)
USAGE_ERROR = 2


def read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc}", returncode=USAGE_ERROR) from exc
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{path} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            returncode=USAGE_ERROR,
        ) from exc


def parse_json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{what} is not JSON: {exc.msg} (column {exc.colno})", returncode=USAGE_ERROR
        ) from exc


def team_named(reference: str) -> Team:
    """The team ``--team`` names by its slug or its name (teams.selectors)."""
    try:
        return team_require(reference)
    except DomainError as exc:
        raise CommandError(exc.detail, returncode=USAGE_ERROR) from exc


def policy_named(team: Team, slug: str) -> Policy | None:
    return Policy.objects.filter(team=team, slug=slug).first()


def member_named(team: Team, email: str) -> Member:
    member = Member.objects.for_email(team.pk, email).select_related("role").first()
    if member is None:
        raise CommandError(f"{email} is not a member of team {team.slug}", returncode=USAGE_ERROR)
    return member


def refused(exc: DomainError) -> CommandError:
    """A service's refusal, with each path it names."""
    details = "; ".join(f"{error.path}: {error.detail}" for error in exc.errors)
    return CommandError(f"{exc.code}: {exc.detail} {details}".strip(), returncode=USAGE_ERROR)
