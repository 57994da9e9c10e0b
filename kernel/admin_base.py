"""The base of the apps' model admins, and read-only audit models.

The pieces live by concern: team scoping in ``admin_scoping``, actions (object actions,
confirmation, redirects, one-time form tokens) in ``admin_actions``, links, columns,
filters and widgets in ``admin_widgets``, JSON for people in ``json_format``.

This module imports no model at import time: ``controlplane.admin`` (the admin site) is
loaded while the app registry is still being populated.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from kernel.admin_actions import ObjectActionsMixin
from kernel.admin_scoping import (
    scope_to_teams,
    sees_several_teams,
    team_path_of,
    user_team_ids,
)


class ReadOnlyPermissions:
    """Nobody adds, changes or deletes these rows in the admin, superusers included: audit
    records, published versions and credentials change only through their services."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class PlangateModelAdmin(ObjectActionsMixin, admin.ModelAdmin):
    """Team-scoped querysets and choices (each model says how it reaches its team, see
    ``team_path_of``); disallowed actions answer 403; ``object_actions`` are offered on an
    object's page (see ``ObjectActionsMixin``)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope_to_teams(super().get_queryset(request), request)

    def _scoped_choices(self, db_field, request: HttpRequest, kwargs: dict) -> None:
        related = db_field.remote_field.model
        if team_path_of(related) is None or "queryset" in kwargs:
            return
        queryset = self.get_field_queryset(kwargs.get("using"), db_field, request)
        if queryset is None:
            queryset = related._default_manager.all()
        kwargs["queryset"] = scope_to_teams(queryset, request)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        self._scoped_choices(db_field, request, kwargs)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        self._scoped_choices(db_field, request, kwargs)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        # A form's initial data takes any value; Django's own comes from the query string.
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        if team_path_of(self.model) == "team":
            only_team = self._only_team_id(request)
            if only_team is not None:
                initial.setdefault("team", only_team)
        return initial

    def _only_team_id(self, request: HttpRequest) -> int | None:
        """The team a new row goes to when the user manages exactly one: their only team,
        or, for a superuser, the installation's only team."""
        team_ids = user_team_ids(request)
        if team_ids is None:
            teams = self.model._meta.get_field("team").related_model._default_manager
            team_ids = list(teams.values_list("pk", flat=True)[:2])
        return team_ids[0] if len(team_ids) == 1 else None

    def get_list_display(self, request: HttpRequest):
        columns = list(super().get_list_display(request))
        if "team" in columns and not sees_several_teams(request):
            columns.remove("team")
        return columns

    def has_model_permission(self, request: HttpRequest, action: str) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")
