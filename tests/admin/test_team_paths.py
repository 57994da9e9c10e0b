"""Each team-owned model says once how it reaches its team; the admin's scoping reads it."""

from __future__ import annotations

import pytest
from django.apps import apps

from kernel.admin_scoping import team_path_of
from teams.models import Team

NO_TEAM = {"plans.signingkey"}  # shared by every team


@pytest.mark.parametrize(
    "model",
    [
        model
        for app in ("members", "policies", "plans")
        for model in apps.get_app_config(app).get_models()
    ],
    ids=lambda model: model._meta.label_lower,
)
def test_every_model_declares_how_it_reaches_its_team(model, plan, other_plan):
    team_path = team_path_of(model)
    if model._meta.label_lower in NO_TEAM:
        assert team_path is None
        return
    assert team_path is not None
    lookup = f"{team_path}__in" if team_path else "pk__in"
    team = Team.objects.get(plans=plan)
    scoped = model.objects.filter(**{lookup: [team.pk]})
    everything = model.objects.all()
    # The path is a real lookup that ends at a team, and it separates the two teams' rows.
    assert scoped.count() <= everything.count()
    if team_path:
        assert {row_team for row_team in everything.values_list(team_path, flat=True)} <= set(
            Team.objects.values_list("pk", flat=True)
        )


def test_the_kernel_names_no_app_s_model():
    from kernel import admin_base, admin_scoping

    assert not hasattr(admin_base, "TEAM_PATHS")
    assert not hasattr(admin_scoping, "TEAM_PATHS")
