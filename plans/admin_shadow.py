"""Admin for the differences a policy version tried in shadow recorded: where it would have
answered otherwise than the active version (docs/decisions/0076). Read-only for everyone,
team-scoped, filtered by shadow version, kind and time; the policy page counts them over
the last day (``shadow_difference_counts``) and links here (``shadow_differences_url``).
``plans.admin`` imports this module, so admin autodiscovery registers it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar
from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import Count, OuterRef, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from kernel.admin_base import (
    LONG_LIST_PER_PAGE,
    PlangateModelAdmin,
    ReadOnlyPermissions,
    change_url,
)
from kernel.admin_scoping import scope_to_teams
from kernel.admin_widgets import datetime_column
from kernel.json_format import pretty_json
from members.models import Agent
from policies.models import PolicyVersion

from .admin_display import step_number
from .models import ShadowDifference

#: the time choices of the list, as ``within=`` takes them; the policy page counts "day"
WITHIN = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}
WITHIN_LABELS = {"hour": "last hour", "day": "last day", "week": "last 7 days"}
#: what the policy page counts
RECENT = "day"


def shadow_difference_counts(
    *, shadow_version: PolicyVersion | int, now: datetime | None = None
) -> dict[str, int]:
    """How many differences of each kind the shadow version recorded over the last day
    (``RECENT``), every kind present (0 when none): one grouped query, served by the
    ``shadow_difference_recent`` index."""
    since = (now or timezone.now()) - WITHIN[RECENT]
    rows = (
        ShadowDifference.objects.filter(shadow_version=shadow_version, at__gte=since)
        .order_by()
        .values("kind")
        .annotate(total=Count("id"))
    )
    counts = dict.fromkeys(ShadowDifference.Kind.values, 0)
    counts.update({row["kind"]: row["total"] for row in rows})
    return counts


def shadow_differences_url(*, shadow_version: PolicyVersion | int, kind: str = "") -> str:
    """The list of the shadow version's differences over the last day, of ``kind`` if
    given: what a count on the policy page opens."""
    version_id = shadow_version.pk if isinstance(shadow_version, PolicyVersion) else shadow_version
    query = {"shadow_version": str(version_id), **({"kind__exact": kind} if kind else {})}
    query["within"] = RECENT
    return f"{reverse('admin:plans_shadowdifference_changelist')}?{urlencode(query)}"


class ShadowVersionFilter(admin.SimpleListFilter):
    """The shadow versions of the user's teams, read from the versions (a DISTINCT over
    the differences would scan the table to list a handful of versions)."""

    title = "shadow version"
    parameter_name = "shadow_version"

    def lookups(self, request, model_admin):
        versions = scope_to_teams(
            PolicyVersion.objects.filter(shadow=True)
            .select_related("policy")
            .order_by("policy__slug", "-number"),
            request,
        )
        return [(str(version.pk), str(version)) for version in versions]

    def queryset(self, request, queryset):
        value = self.value()
        if not value:
            return queryset
        if not value.isdigit():
            return queryset.none()
        return queryset.filter(shadow_version_id=int(value))


class WithinFilter(admin.SimpleListFilter):
    """Recorded in the last hour, day or week, counted back from now."""

    title = "recorded"
    parameter_name = "within"

    def lookups(self, request, model_admin):
        return list(WITHIN_LABELS.items())

    def queryset(self, request, queryset):
        window = WITHIN.get(self.value() or "")
        return queryset if window is None else queryset.filter(at__gte=timezone.now() - window)


@admin.register(ShadowDifference)
class ShadowDifferenceAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Nothing here was enforced: each row says what the shadow version would have
    answered where the active version answered otherwise."""

    list_display = [
        "recorded",
        "kind",
        "request",
        "tool_shown",
        "step_shown",
        "codes",
        "rule_shown",
        "plan_link",
        "agent_link",
    ]
    list_filter: ClassVar = [ShadowVersionFilter, "kind", WithinFilter, "request"]
    list_select_related = ["shadow_version", "shadow_version__policy"]
    list_per_page = LONG_LIST_PER_PAGE
    fields: ClassVar[tuple[str, ...]] = (
        "recorded",
        "shadow_version_link",
        "active_version_link",
        "kind",
        "request",
        "tool_shown",
        "step_shown",
        "codes",
        "rule_shown",
        "plan_link",
        "agent_link",
    )
    readonly_fields = fields
    recorded = datetime_column("at", "at")

    def get_queryset(self, request: HttpRequest):
        agents = Agent.objects.filter(pk=OuterRef("agent_id")).values("name")[:1]
        return super().get_queryset(request).annotate(agent_name=Subquery(agents))

    @admin.display(description="tool", ordering="tool")
    def tool_shown(self, difference: ShadowDifference) -> str:
        return format_html('<code class="plangate-tool">{}</code>', difference.tool or "—")

    @admin.display(description="step")
    def step_shown(self, difference: ShadowDifference) -> str:
        return "—" if difference.step is None else str(step_number(difference.step))

    @admin.display(description="code → shadow code")
    def codes(self, difference: ShadowDifference) -> str:
        return format_html(
            "<code>{}</code> → <code>{}</code>", difference.code, difference.shadow_code
        )

    @admin.display(description="rule")
    def rule_shown(self, difference: ShadowDifference) -> str:
        rule = difference.rule if isinstance(difference.rule, dict) else None
        if not rule:
            return "—"
        index, description = rule.get("index"), rule.get("description") or ""
        if not isinstance(index, int):
            return format_html("{}", description or pretty_json(rule))
        url = change_url("policies", "policyversion", difference.shadow_version_id)
        return format_html(
            '<a href="{}#rules-{}"><code>rules[{}]</code></a> {}', url, index, index, description
        )

    @admin.display(description="plan")
    def plan_link(self, difference: ShadowDifference) -> str:
        if not difference.plan_id:
            return "—"
        url = change_url("plans", "plan", difference.plan_id)
        return format_html('<a href="{}"><code>{}</code></a>', url, difference.plan_id)

    @admin.display(description="agent")
    def agent_link(self, difference: ShadowDifference) -> str:
        if not difference.agent_id:
            return "—"
        url = change_url("members", "agent", difference.agent_id)
        name = getattr(difference, "agent_name", None) or difference.agent_id
        return format_html('<a href="{}">{}</a>', url, name)

    @admin.display(description="shadow version")
    def shadow_version_link(self, difference: ShadowDifference) -> str:
        version = difference.shadow_version
        url = change_url("policies", "policyversion", version.pk)
        return format_html('<a href="{}">{}</a>', url, version)

    @admin.display(description="active version")
    def active_version_link(self, difference: ShadowDifference) -> str:
        version = difference.active_version
        if version is None:
            return "—"
        url = change_url("policies", "policyversion", version.pk)
        return format_html('<a href="{}">{}</a>', url, version)
