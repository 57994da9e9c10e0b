"""Building blocks shared by the apps' admin modules.

* Team scoping: a staff user who is not a superuser sees, chooses and acts on the rows of
  the teams they belong to (``Team.staff``) and nothing else; a superuser sees all.
* Read-only audit models: nobody adds, changes or deletes them, superusers included.
* Actions: one that is not allowed for the user answers 403 when posted (not a silent
  "no action selected"); destructive ones ask for confirmation; every one logs a history
  entry per object it changes.

This module imports no model at import time: ``controlplane.admin`` (the admin site) is
loaded while the app registry is still being populated.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme


def team_path_of(model: type) -> str | None:
    """How rows of ``model`` reach their team, as the model declares it (``team_path``,
    "" for the team itself), or None when they are no team's data (signing keys, users)."""
    return getattr(model, "team_path", None)


_TEAM_IDS_ATTRIBUTE = "_plangate_team_ids"


def user_team_ids(request: HttpRequest) -> list[int] | None:
    """The ids of the teams the user manages, or None for a superuser (every team)."""
    user = request.user
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


def admin_link(obj: Any, text: object | None = None) -> str:
    """A link to ``obj``'s admin page (escaped), or its text when it has none."""
    if obj is None:
        return "—"
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(obj.pk)])
    return format_html('<a href="{}">{}</a>', url, obj if text is None else text)


def admin_links(objects: Iterable[Any], empty: str = "—") -> str:
    links = format_html_join(", ", "{}", ((admin_link(obj),) for obj in objects))
    return links or empty


class ReadOnlyPermissions:
    """Nobody adds, changes or deletes these rows in the admin, superusers included: audit
    records, published versions and credentials change only through their services."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class PlangateModelAdmin(admin.ModelAdmin):
    """Team-scoped querysets and choices (each model says how it reaches its team, see
    ``team_path_of``); disallowed actions answer 403."""

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
        initial = super().get_changeform_initial_data(request)
        team_ids = user_team_ids(request)
        if team_path_of(self.model) == "team" and team_ids is not None and len(team_ids) == 1:
            initial.setdefault("team", team_ids[0])
        return initial

    def get_list_display(self, request: HttpRequest):
        columns = list(super().get_list_display(request))
        if "team" in columns and not sees_several_teams(request):
            columns.remove("team")
        return columns

    def has_model_permission(self, request: HttpRequest, action: str) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.{action}_{opts.model_name}")

    def changelist_view(self, request: HttpRequest, extra_context=None):
        if request.method == "POST":
            chosen = [name for name in request.POST.getlist("action") if name]
            allowed = self.get_actions(request)
            if any(name not in allowed for name in chosen):
                raise PermissionDenied
        return super().changelist_view(request, extra_context)

    # --- actions on one object, reached from its page -------------------------------------

    change_form_template = "admin/plangate/change_form.html"

    #: actions also offered on an object's page, as ``<id>/<action>/``: name -> button label.
    #: The page asks for confirmation, then posts to the change list like any action.
    object_actions: dict[str, str] = {}

    def object_action_available(self, obj: Any, action_name: str) -> bool:
        """Whether the action makes sense for ``obj`` now (say, not revoking a revoked key)."""
        return True

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        extra = [
            path(
                f"<path:object_id>/{name.replace('_', '-')}/",
                self.admin_site.admin_view(self._object_action_view),
                {"action_name": name},
                name=f"{info[0]}_{info[1]}_{name}",
            )
            for name in self.object_actions
        ]
        return extra + super().get_urls()

    def _object_action_view(self, request: HttpRequest, object_id: str, action_name: str):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404(f"No {self.opts.verbose_name} with id {object_id!r}.")
        action = self.get_actions(request).get(action_name)
        if action is None or request.method != "GET":
            # The confirmation page posts to the change list, like every action.
            raise PermissionDenied
        queryset = self.get_queryset(request).filter(pk=obj.pk)
        request.plangate_next = request.GET.get("next") or self._change_url(obj)
        return action[0](self, request, queryset)

    def _change_url(self, obj: Any) -> str:
        info = self.opts.app_label, self.opts.model_name
        return reverse(f"admin:{info[0]}_{info[1]}_change", args=[quote(obj.pk)])

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        links = []
        if obj is not None:
            allowed = self.get_actions(request)
            info = self.opts.app_label, self.opts.model_name
            links = [
                (reverse(f"admin:{info[0]}_{info[1]}_{name}", args=[quote(obj.pk)]), label)
                for name, label in self.object_actions.items()
                if name in allowed and self.object_action_available(obj, name)
            ]
        context["object_action_links"] = links
        return super().render_change_form(request, context, add, change, form_url, obj)


def confirm_action(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    action: str,
    title: str,
    question: str,
    button: str,
    warning: str = "",
) -> TemplateResponse | None:
    """None once the user confirmed, else the page asking them to.

    The page posts back to the change list with ``post=yes``, like Django's own "delete
    selected", so the action runs once through the usual permission checks.
    """
    if request.method == "POST" and request.POST.get("post") == "yes":
        return None
    opts = model_admin.model._meta
    # Reached from an object's page: go back there afterwards.
    next_url = getattr(request, "plangate_next", "") or request.POST.get("next", "")
    context = {
        **model_admin.admin_site.each_context(request),
        "title": title,
        "question": question,
        "warning": warning,
        "button": button,
        "objects": list(queryset),
        "opts": opts,
        "action": action,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        "next_url": next_url,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/plangate/confirm_action.html", context)


def redirect_after_action(request: HttpRequest) -> HttpResponse | None:
    """Back to the page the action was started from, when it is one of ours."""
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return HttpResponseRedirect(next_url)
    return None


class OneTimeFormToken:
    """A single-use token in the session, so a re-posted form (a reload of its result
    page, a double click) does not run twice. The token is random and secret-free."""

    def __init__(self, purpose: str, keep: int = 20) -> None:
        self.session_key = f"plangate.once.{purpose}"
        self.keep = keep

    def issue(self, request: HttpRequest) -> str:
        token = secrets.token_urlsafe(16)
        tokens = [*request.session.get(self.session_key, []), token][-self.keep :]
        request.session[self.session_key] = tokens
        return token

    def consume(self, request: HttpRequest, token: str | None) -> bool:
        tokens = list(request.session.get(self.session_key, []))
        if not token or token not in tokens:
            return False
        tokens.remove(token)
        request.session[self.session_key] = tokens
        return True


class MonospaceJSONTextarea(forms.Textarea):
    def __init__(self, attrs: dict | None = None) -> None:
        defaults = {
            "rows": 24,
            "cols": 100,
            "class": "vLargeTextField plangate-json",
            "spellcheck": "false",
            "autocomplete": "off",
            "wrap": "off",
        }
        super().__init__({**defaults, **(attrs or {})})


class TextInputFilter(admin.SimpleListFilter):
    """A list filter typed into a box instead of picked from a list that could hold
    thousands of choices (every member of a big team)."""

    template = "admin/plangate/input_filter.html"
    placeholder = ""

    def lookups(self, request, model_admin):
        # SimpleListFilter shows only when it has lookups; the box needs none.
        return [("", "")]

    def choices(self, changelist):
        yield {
            "parameter_name": self.parameter_name,
            "value": self.value() or "",
            "placeholder": self.placeholder,
            "hidden": [
                (name, value)
                for name, value in changelist.params.items()
                if name != self.parameter_name
            ],
            "clear_url": changelist.get_query_string(remove=[self.parameter_name]),
        }


def datetime_column(field_name: str, description: str):
    """A list column showing a date-time as ``2026-11-30 09:13`` (UTC), full value on hover:
    Django's default ("Nov. 30, 2026, 9:13 a.m.") makes wide tables wider."""

    @admin.display(description=description, ordering=field_name)
    def column(self, obj) -> str:
        value = getattr(obj, field_name)
        if value is None:
            return "—"
        local = timezone.localtime(value)
        return format_html(
            '<span title="{}" class="plangate-nowrap">{}</span>',
            local.isoformat(),
            local.strftime("%Y-%m-%d %H:%M"),
        )

    return column


def readable_json(value: object, *, width: int = 88, indent: int = 2) -> str:
    """JSON for people: a value that fits on its line stays on one line, longer ones are
    broken one member per line. ``{"tools": ["github_*"]}`` stays whole instead of taking
    three lines. Still valid JSON, key order kept."""

    def render(item: object, level: int, used: int) -> str:
        compact = json.dumps(item, ensure_ascii=False, separators=(", ", ": "))
        if (
            not isinstance(item, dict | list)
            or not item
            or level * indent + used + len(compact) <= width
        ):
            return compact
        inner = " " * ((level + 1) * indent)
        if isinstance(item, dict):
            members = []
            for key, member in item.items():
                label = json.dumps(str(key), ensure_ascii=False) + ": "
                members.append(inner + label + render(member, level + 1, len(label)))
            opening, closing = "{", "}"
        elif all(not isinstance(member, dict | list) for member in item):
            # A long list of scalars: as many to a line as fit.
            lines: list[list[str]] = [[]]
            for member in item:
                text = json.dumps(member, ensure_ascii=False)
                current = lines[-1]
                if current and len(inner) + len(", ".join([*current, text])) + 1 > width:
                    lines.append([])
                lines[-1].append(text)
            members = [inner + ", ".join(line) for line in lines]
            opening, closing = "[", "]"
        else:
            members = [inner + render(member, level + 1, 0) for member in item]
            opening, closing = "[", "]"
        return opening + "\n" + ",\n".join(members) + "\n" + " " * (level * indent) + closing

    return render(value, 0, 0)
