"""Shared reads of teams that the doors (management commands) need."""

from __future__ import annotations

from guard.errors import FieldError
from kernel.problems import Code, DomainError

from .models import Team

#: how many teams sharing a name a refusal lists
_NAMED_SHOWN = 5


def team_by_reference(reference: str) -> Team | None:
    """The team a person named by its slug or its name: the team with this slug, else the
    one team whose name this is (ignoring case and surrounding spaces), else None.

    A slug is unique and wins; a name is not, and a name several teams share is refused
    (DomainError ``invalid_request`` listing their slugs) rather than guessed.
    """
    team = Team.objects.filter(slug=reference).first()
    if team is not None:
        return team
    named = list(
        Team.objects.filter(name__iexact=reference.strip()).order_by("slug")[: _NAMED_SHOWN + 1]
    )
    if len(named) > 1:
        slugs = ", ".join(team.slug for team in named[:_NAMED_SHOWN])
        more = ", ..." if len(named) > _NAMED_SHOWN else ""
        message = f"several teams are named {reference!r} ({slugs}{more}); give the team's slug"
        raise DomainError(Code.INVALID_REQUEST, message, errors=[FieldError("team", message)])
    return named[0] if named else None


def team_require(reference: str) -> Team:
    """``team_by_reference``, or DomainError ``not_found`` when no team has this slug or
    name."""
    team = team_by_reference(reference)
    if team is None:
        message = f"no team {reference!r}: no team has this slug or name"
        raise DomainError(Code.NOT_FOUND, message, errors=[FieldError("team", message)])
    return team
