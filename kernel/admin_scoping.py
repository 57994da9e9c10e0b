"""Team scoping for the admin: a staff user who is not a superuser sees, chooses and acts
on the rows of the teams they belong to (``Team.staff``) and nothing else; a superuser sees
all. Each model says how its rows reach their team (``team_path``), so this module knows
no app.

It imports no model at import time: the admin site is loaded while the app registry is
still being populated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.db.models import QuerySet
from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def team_path_of(model: type) -> str | None:
    """How rows of ``model`` reach their team, as the model declares it (``team_path``,
    "" for the team itself), or None when they are no team's data (signing keys, users)."""
    return getattr(model, "team_path", None)


_TEAM_IDS_ATTRIBUTE = "_plangate_team_ids"


def user_team_ids(request: HttpRequest) -> list[int] | None:
    """The ids of the teams the user manages, or None for a superuser (every team)."""
    # The admin lets in signed-in staff only, so this is never the AnonymousUser.
    user = cast("User", request.user)
    if user.is_superuser:
        return None
    cached = getattr(request, _TEAM_IDS_ATTRIBUTE, None)
    if cached is None:
        cached = list(user.plangate_teams.values_list("pk", flat=True))
        setattr(request, _TEAM_IDS_ATTRIBUTE, cached)
    return cached


def sees_several_teams(request: HttpRequest) -> bool:
    """Whether a "team" column helps this user: superusers and staff of several teams."""
    team_ids = user_team_ids(request)
    return team_ids is None or len(team_ids) > 1


def scope_to_teams(queryset: QuerySet, request: HttpRequest):
    """``queryset`` restricted to the user's teams; unchanged for a superuser and for rows
    that are no team's data."""
    team_path = team_path_of(queryset.model)
    if team_path is None:
        return queryset
    team_ids = user_team_ids(request)
    if team_ids is None:
        return queryset
    lookup = f"{team_path}__in" if team_path else "pk__in"
    return queryset.filter(**{lookup: team_ids})
