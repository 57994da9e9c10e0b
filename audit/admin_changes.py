"""Change records for the admin pages that save a model themselves (teams, roles, groups,
Django's users and permission groups).

Most writes record their change in their service (``members.services``,
``policies.services``, ``plans.keys``), so the admin pages that save through a service
(``kernel.admin_forms.ServiceSavedAdmin``) and the actions that call one record nothing
here. The pages that save a model with Django's own ``save_model`` use
``RecordedChangesAdmin``: it records what the admin's history records (its
``log_addition``, ``log_change`` and ``log_deletions`` hooks), with the values before and
after from the form.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from kernel.admin_forms import ServiceSavedAdmin
from kernel.admin_scoping import team_path_of

from .changes import Changes, changes_append_to_teams, readable

_FORM_CHANGES_ATTRIBUTE = "_plangate_recorded_form_changes"
HIDDEN = "(hidden)"


def team_id_of(obj: Model) -> int | None:
    """The id of the team ``obj`` belongs to, by its model's ``team_path``; None for rows
    that are no team's data."""
    path = team_path_of(type(obj))
    if path is None:
        return None
    if path == "":
        return obj.pk
    *hops, last = path.split("__")
    target: Any = obj
    for hop in hops:
        target = getattr(target, hop)
    return getattr(target, f"{last}_id")


def _field_value(field: forms.Field, value: Any) -> Any:
    """A form value as a person reads it; a choice's initial value is a primary key."""
    if not isinstance(field, forms.ModelChoiceField) or value is None:
        return readable(value)
    # A choice field's rows, looked up beyond the choices this admin may pick from.
    manager = cast(QuerySet, field.queryset).model._default_manager
    if isinstance(field, forms.ModelMultipleChoiceField):
        rows = [item for item in value if isinstance(item, Model)]
        keys = [item for item in value if not isinstance(item, Model)]
        return readable(rows + list(manager.filter(pk__in=keys)) if keys else rows)
    if isinstance(value, Model):
        return readable(value)
    return readable(manager.filter(pk=value).first() or value)


def form_changes(form: forms.BaseForm, *, add: bool) -> Changes:
    """``{field: [old, new]}`` for each field the form changed; passwords only as changed."""
    changes: Changes = {}
    for name in form.changed_data:
        field = form.fields[name]
        if "password" in name:
            changes[name] = [None if add else HIDDEN, HIDDEN]
            continue
        old = None if add else _field_value(field, form.initial.get(name))
        new = _field_value(field, form.cleaned_data.get(name))
        if old != new:
            changes[name] = [old, new]
    return changes


def _message_text(message: Any) -> str:
    """The admin history's change message, in words (it may be its JSON list form)."""
    if isinstance(message, list):
        message = json.dumps(message)  # as LogEntry stores it
    return str(LogEntry(change_message=message).get_change_message())


class RecordedChangesAdmin(admin.ModelAdmin):
    """Records each addition, change and deletion the admin logs, in the log of the team
    the object belongs to (``recorded_team_ids``). Listed before the admin's base class,
    so its hooks run first."""

    def recorded_team_ids(self, obj: Model) -> list[int]:
        """The teams whose logs record a change of ``obj``: its own team by default."""
        team_id = team_id_of(obj)
        return [] if team_id is None else [team_id]

    def _stashed_changes(self, request: HttpRequest) -> dict[tuple[str, object], Changes]:
        stash = getattr(request, _FORM_CHANGES_ATTRIBUTE, None)
        if stash is None:
            stash = {}
            setattr(request, _FORM_CHANGES_ATTRIBUTE, stash)
        return stash

    def construct_change_message(self, request, form, formsets, add=False):
        # Called after the save and right before log_addition/log_change: the form still
        # knows the values before (its initial data) and after. A form that edits no row
        # (a password form) is described by its message alone.
        instance = getattr(form, "instance", None)
        if isinstance(instance, Model):
            key = (instance._meta.label, instance.pk)
            self._stashed_changes(request)[key] = form_changes(form, add=add)
        return super().construct_change_message(request, form, formsets, add)

    def _record(self, request: HttpRequest, obj: Model, action: str, message: Any) -> None:
        if isinstance(self, ServiceSavedAdmin):
            return  # its service recorded the change
        changes = self._stashed_changes(request).pop((obj._meta.label, obj.pk), None)
        if action == "updated" and not changes and not message:
            return  # saved unchanged
        team_ids = self.recorded_team_ids(obj)
        if not team_ids:
            return
        changes_append_to_teams(
            team_ids,
            object_type=obj._meta.model_name or "",
            object_id=obj.pk,
            name=str(obj),
            action=action,
            changes=changes,
            extra={"message": _message_text(message)} if message else None,
        )

    def log_addition(self, request, obj, message):
        entry = super().log_addition(request, obj, message)
        self._record(request, obj, "created", message)
        return entry

    def log_change(self, request, obj, message):
        entry = super().log_change(request, obj, message)
        self._record(request, obj, "updated", message)
        return entry

    def log_deletions(self, request, queryset):
        objects = list(queryset)
        entries = super().log_deletions(request, objects)
        for obj in objects:
            # A deleted team takes its log with it: there is no log left to write in.
            if team_path_of(type(obj)) != "":
                self._record(request, obj, "deleted", "")
        return entries
