"""The base of the apps' model admins, and read-only audit models.

The pieces live by concern: team scoping in ``admin_scoping``, actions (object actions,
confirmation, redirects, one-time form tokens) in ``admin_actions``, links, columns,
filters and widgets in ``admin_widgets``, JSON for people in ``json_format``.

This module imports no model at import time: ``controlplane.admin`` (the admin site) is
loaded while the app registry is still being populated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar
from urllib.parse import quote as url_quote

from django.conf import settings
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.http import RFC3986_SUBDELIMS

from kernel.admin_actions import ObjectActionsMixin
from kernel.admin_scoping import (
    scope_to_teams,
    sees_several_teams,
    team_path_of,
    user_team_ids,
)

#: Crockford base32, as ``members.models.new_ulid`` writes ids (upper case)
ULID_PATTERN = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
#: a SHA-256 digest in lowercase hex, as plan hashes are stored
SHA256_HEX_PATTERN = re.compile(r"[0-9a-f]{64}")
#: something that can only be an e-mail address (no space, one @, a dot after it)
EMAIL_PATTERN = re.compile(r"[^\s@]+@[^\s@]+\.[^\s@]+")


@dataclass(frozen=True)
class ExactSearch:
    """A search term of this shape is looked up exactly, by equality on ``fields`` (which
    indexes serve), instead of Django's case-insensitive matches (which no index serves):
    a ULID-shaped term is an id, 64 hex characters a hash."""

    pattern: re.Pattern[str]
    fields: tuple[str, ...]
    #: the form the column stores, applied to the term before it is matched
    normalize: Callable[[str], str] = str.strip

    def matches(self, term: str) -> Q | None:
        value = self.normalize(term)
        if not self.pattern.fullmatch(value):
            return None
        condition = Q()
        for field in self.fields:
            condition |= Q(**{field: value})
        return condition


def ulid_search(*fields: str) -> ExactSearch:
    return ExactSearch(ULID_PATTERN, fields, lambda term: term.strip().upper())


def sha256_search(*fields: str) -> ExactSearch:
    return ExactSearch(SHA256_HEX_PATTERN, fields, lambda term: term.strip().lower())


def email_search(*fields: str, normalize: Callable[[str], str] = str.strip) -> ExactSearch:
    return ExactSearch(EMAIL_PATTERN, fields, normalize)


#: rows a page of the audit lists shows (plans, tokens, the audit trail): Django's 100 rows
#: cost twice the rendering for a page an auditor pages through or narrows with a filter
#: (docs/decisions/0050-the-auditors-pages-render-less.md)
LONG_LIST_PER_PAGE = 50


def exact_count_limit() -> int:
    """Rows a list counts exactly before it estimates (PLANGATE_ADMIN_EXACT_COUNT_LIMIT)."""
    return int(getattr(settings, "PLANGATE_ADMIN_EXACT_COUNT_LIMIT", 10_000))


class BoundedCountPaginator(Paginator):
    """A change list's count that stays cheap on tables of millions of rows.

    On PostgreSQL it counts at most ``exact_count_limit()`` + 1 rows (a bounded scan, from
    the same index the page itself reads); a list that holds fewer is counted exactly, so
    small tables and narrow filters read as before. Past the bound, the count is the
    planner's estimate for the list's query (``pg_class.reltuples`` scaled by the filters'
    selectivity), never below the bound, and ``count_is_estimate`` is set so the page says
    "about". SQLite, a laptop's database, counts exactly.
    """

    count_is_estimate = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet) or connections[queryset.db].vendor != "postgresql":
            return super().count
        limit = exact_count_limit()
        # Only the primary key: the list's annotations are not computed for counting.
        rows = queryset.order_by().values("pk")
        bounded = rows[: limit + 1].count()
        if bounded <= limit:
            return bounded
        self.count_is_estimate = True
        return max(limit + 1, _planned_rows(rows))


def _planned_rows(queryset: QuerySet) -> int:
    """The PostgreSQL planner's estimate of the rows ``queryset`` returns."""
    plan = json.loads(queryset.explain(format="json"))
    return int(plan[0]["Plan"]["Plan Rows"])


_PK_PLACEHOLDER = "~pk~"
#: (view name, admin site, script prefix, URLconf) -> the change URL around the object's id
_change_url_parts: dict[tuple[str, str, str, object], tuple[str, str]] = {}


def change_url(app_label: str, model_name: str, pk: Any, *, site_name: str = "admin") -> str:
    """The admin change page of the ``app_label.model_name`` row with primary key ``pk``:
    what ``reverse("admin:<app>_<model>_change", args=[quote(pk)])`` answers, with the URL
    resolved once per script prefix and URLconf instead of once per row (a list of 100 rows
    with two links a row spent a tenth of its time in ``reverse``)."""
    viewname = f"{site_name}:{app_label}_{model_name}_change"
    key = (viewname, site_name, get_script_prefix(), get_urlconf())
    parts = _change_url_parts.get(key)
    if parts is None:
        url = reverse(viewname, args=[_PK_PLACEHOLDER], current_app=site_name)
        before, _, after = url.partition(_PK_PLACEHOLDER)
        parts = _change_url_parts[key] = (before, after)
    # reverse() quotes its arguments as below; the admin's quote() escapes what a path
    # segment cannot hold.
    return parts[0] + url_quote(str(quote(pk)), safe=RFC3986_SUBDELIMS + "/~:@") + parts[1]


class PlangateChangeList(ChangeList):
    """Django's change list, linking each row through ``change_url``, and reading the
    shown rows without the admin's ``list_deferred_fields``."""

    #: the list's filters, which each row's link carries back (``_changelist_filters=...``)
    row_link_filters = ""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # The shown rows only: the export reads ``self.queryset``, every column.
        deferred = getattr(self.model_admin, "list_deferred_fields", ())
        if deferred and isinstance(self.result_list, QuerySet):
            self.result_list = self.result_list.defer(*deferred)
        # Django adds the filters to each row's link itself (``add_preserved_filters``),
        # after resolving that link's URL again to learn it is no change list: a URL
        # resolution a row. The links carry them from ``url_for_result`` instead.
        self.row_link_filters, self.preserved_filters = self.preserved_filters, ""

    def url_for_result(self, result: Any) -> str:
        url = change_url(
            self.opts.app_label,
            str(self.opts.model_name),
            getattr(result, self.pk_attname),
            site_name=self.model_admin.admin_site.name,
        )
        return f"{url}?{self.row_link_filters}" if self.row_link_filters else url


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
    object's page (see ``ObjectActionsMixin``).

    Lists are counted by ``BoundedCountPaginator`` and never count the whole table a second
    time for "N total" (``show_full_result_count``). ``exact_searches`` match a search term
    of an id's or a hash's shape exactly; other terms search ``search_fields`` as Django
    does, or find nothing when the admin declares no free-text field.
    """

    paginator = BoundedCountPaginator
    show_full_result_count = False
    exact_searches: ClassVar[tuple[ExactSearch, ...]] = ()
    #: columns (related ones too, ``policy_version__document``) the list page never shows:
    #: not read for its rows. The export, which reads the same filtered queryset, still
    #: gets every column.
    list_deferred_fields: ClassVar[tuple[str, ...]] = ()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return PlangateChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return scope_to_teams(super().get_queryset(request), request)

    def get_search_fields(self, request: HttpRequest):
        # The search box shows when there is anything to search, exact fields included.
        free_text = tuple(super().get_search_fields(request))
        return free_text or tuple(f"={field}" for s in self.exact_searches for field in s.fields)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str):
        term = search_term.strip()
        if not term:
            return queryset, False
        for search in self.exact_searches:
            condition = search.matches(term)
            if condition is not None:
                return queryset.filter(condition), False
        if not self.search_fields:
            # No free-text field: a term of no known shape names nothing.
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)

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
