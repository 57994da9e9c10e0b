"""Admin for the guard's decisions: the list an auditor filters (agent, member, tool,
decision, policy version) and exports, and a decision's page that answers "who allowed
this, under which policy version?" by itself: the plan, the policy version in force with
its author and comment, and the rule that decided, as the version's document states it.

Steps are shown as people count them, from 1 (``admin_display.step_number``); the stored
``step`` is the guard's 0-based index. ``plans.admin`` imports this module, so admin
autodiscovery registers it.
"""

from __future__ import annotations

from typing import ClassVar

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.text import Truncator

from guard.decisions import Decision
from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions, ulid_search
from kernel.admin_export import Derived, ExportMixin
from kernel.admin_scoping import scope_to_teams
from kernel.admin_widgets import TextInputFilter, admin_link, datetime_cell
from kernel.json_format import pretty_json
from members.models import Agent, email_normalize
from policies.models import PolicyVersion

from .admin_display import approval_html, constraints_html, step_label, step_number
from .admin_timeline import decision_rule, decision_rule_html, timeline_url
from .approvals import plan_approval_columns
from .models import PlanEvent


class AgentChoiceFilter(admin.SimpleListFilter):
    """The agents of the user's teams; a choice list read from the agents, not from the
    listed rows (a DISTINCT over plans or decisions would scan the biggest tables to list a
    handful of names)."""

    title = "agent"
    parameter_name = "agent"
    #: the listed rows' path to their agent's id
    agent_field = "agent_id"

    def lookups(self, request, model_admin):
        agents = scope_to_teams(Agent.objects.order_by("name"), request)
        return [(str(pk), name) for pk, name in agents.values_list("pk", "name")]

    def queryset(self, request, queryset):
        return queryset.filter(**{self.agent_field: self.value()}) if self.value() else queryset


class DecisionAgentFilter(AgentChoiceFilter):
    agent_field = "plan__agent_id"


class DecisionMemberFilter(TextInputFilter):
    title = "member e-mail"
    parameter_name = "member_email"
    placeholder = "alice@example.com"

    def queryset(self, request, queryset):
        value = email_normalize(self.value() or "")
        return queryset.filter(plan__member__email=value) if value else queryset


class SuggestedToolFilter(TextInputFilter):
    """An exact tool name, typed, with the tools seen recently offered as suggestions (the
    list of every tool ever used would mean scanning the biggest tables)."""

    template = "admin/plans/tool_filter.html"
    parameter_name = "tool"
    placeholder = "github_delete_repo"
    #: how many recent rows the suggestions are read from
    recent_rows = 500

    def __init__(self, request, params, model, model_admin) -> None:
        super().__init__(request, params, model, model_admin)
        self.suggestions = self.recent_tools(request)

    def recent_tools(self, request: HttpRequest) -> list[str]:
        raise NotImplementedError

    def tool(self) -> str:
        return (self.value() or "").strip()

    def choices(self, changelist):
        for choice in super().choices(changelist):
            yield {**choice, "suggestions": self.suggestions}


class DecisionToolFilter(SuggestedToolFilter):
    title = "tool"

    def recent_tools(self, request: HttpRequest) -> list[str]:
        recent = scope_to_teams(PlanEvent.objects.order_by("-occurred_at"), request)
        return sorted(set(recent.values_list("tool", flat=True)[: self.recent_rows]))

    def queryset(self, request, queryset):
        return queryset.filter(tool=self.tool()) if self.tool() else queryset


class DecisionCodeFilter(admin.SimpleListFilter):
    """The guard's decision codes, from the guard's own list (no query)."""

    title = "decision"
    parameter_name = "decision"

    def lookups(self, request, model_admin):
        return [("blocked", "any blocked"), *((code.value, code.value) for code in Decision)]

    def queryset(self, request, queryset):
        if self.value() == "blocked":
            return queryset.exclude(decision=Decision.ALLOWED)
        return queryset.filter(decision=self.value()) if self.value() else queryset


class DecisionPolicyVersionFilter(admin.SimpleListFilter):
    """The policy version a decision was made under, as the server resolved and stored it
    (``PlanEvent.decided_under``): one index (``plan_event_version``) serves the page."""

    title = "policy version"
    parameter_name = "policy_version"

    def lookups(self, request, model_admin):
        versions = scope_to_teams(
            PolicyVersion.objects.select_related("policy").order_by("policy__slug", "-number"),
            request,
        )
        return [
            (str(version.pk), f"{version.policy.slug} v{version.number}") for version in versions
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if not value or not value.isdigit():
            return queryset
        return queryset.filter(decided_under_id=int(value))


def _version_link(version_id: int, slug: str, number: int) -> str:
    url = reverse("admin:policies_policyversion_change", args=[version_id])
    return format_html('<a href="{}">{} v{}</a>', url, slug, number)


@admin.register(PlanEvent)
class PlanEventAdmin(ExportMixin, ReadOnlyPermissions, PlangateModelAdmin):
    """What the guards reported deciding, call by call."""

    list_display = [
        "occurred",
        "plan_column",
        "member_email",
        "agent_name",
        "call_column",
        "decision_column",
        "rule_column",
        "policy_version_link",
    ]
    list_filter = [
        DecisionAgentFilter,
        DecisionMemberFilter,
        DecisionToolFilter,
        DecisionCodeFilter,
        DecisionPolicyVersionFilter,
        ("occurred_at", admin.DateFieldListFilter),
    ]
    exact_searches = (ulid_search("plan_id"),)
    search_help_text = "Search by plan id (exact)."
    list_select_related = ["plan__member", "plan__agent", "decided_under__policy"]
    ordering = ["-occurred_at", "-id"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "plan_link",
                    "plan_approval",
                    "occurred",
                    "received",
                    "member_email",
                    "agent_name",
                    "tool_code",
                    "decision_column",
                    "planned_step",
                    "reason",
                ]
            },
        ),
        (
            "Why: the rule and the policy version in force",
            {"fields": ["policy_version_shown", "rule_shown"]},
        ),
        ("The call's arguments", {"fields": ["args_digest", "args_shown", "amounts_shown"]}),
    ]
    readonly_fields: ClassVar[tuple[str, ...]] = (
        "plan_link",
        "plan_approval",
        "occurred",
        "received",
        "member_email",
        "agent_name",
        "tool_code",
        "decision_column",
        "planned_step",
        "reason",
        "policy_version_shown",
        "rule_shown",
        "args_digest",
        "args_shown",
        "amounts_shown",
    )
    export_filename = "guard-decisions"
    # Tuples of the exported fields, streamed: no model instances (five per row with the
    # plan, member, agent and version), no plan or policy document read per row.
    export_from_values = True
    export_columns = (
        ("occurred_at", "occurred_at"),
        ("received_at", "received_at"),
        ("plan", "plan_id"),
        ("agent", "plan.agent.name"),
        ("member", "plan.member.email"),
        ("tool", "tool"),
        ("decision", "decision"),
        # Counted from 1, as every page shows it.
        ("step", Derived("step", step_number)),
        ("rule_index", "rule_index"),
        ("rule_description", "rule_description"),
        ("policy", "decided_under.policy.slug"),
        ("policy_version", "decided_under.number"),
        ("reason", "reason"),
        ("args_digest", "args_digest"),
        ("args", "args"),
        # What an allowed call counted against each budget of a version-2 plan.
        ("amounts", "amounts"),
        # The plan's approval, when a person gave one (annotated by export_queryset).
        ("approved_by", "approved_by"),
        ("approved_at", "approved_at"),
        ("approval_reason", "approved_reason"),
    )

    def changelist_view(self, request, extra_context=None):
        context = {"title": "Guard decisions", **(extra_context or {})}
        return super().changelist_view(request, context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        context = {"title": "Guard decision", **(extra_context or {})}
        return super().change_view(request, object_id, form_url, context)

    def export_queryset(self, request: HttpRequest):
        # The approval's columns from the plan row the export already joins: no query
        # per row.
        return super().export_queryset(request).annotate(**plan_approval_columns("plan__"))

    def get_queryset(self, request: HttpRequest):
        # The plan's member and agent and the version each decision was made under, with
        # its policy, in the same query: on the list, the export and the decision's page.
        # (The change list applies list_select_related only to a queryset without any.)
        return super().get_queryset(request).select_related(*self.list_select_related)

    @admin.display(description="when", ordering="occurred_at")
    def occurred(self, event: PlanEvent) -> str:
        return datetime_cell(event.occurred_at, seconds=True)

    @admin.display(description="received")
    def received(self, event: PlanEvent) -> str:
        return datetime_cell(event.received_at, seconds=True)

    @admin.display(description="plan", ordering="plan")
    def plan_link(self, event: PlanEvent) -> str:
        return format_html(
            '{} · <a href="{}">timeline</a><br><span class="plangate-note">{}</span>',
            admin_link(event.plan, event.plan_id),
            timeline_url(event.plan),
            Truncator(event.plan.goal).chars(120),
        )

    @admin.display(description="plan", ordering="plan")
    def plan_column(self, event: PlanEvent) -> str:
        # The whole id on hover and in search; its random tail tells plans apart.
        return format_html(
            '<a href="{}" title="{}" class="plangate-nowrap"><code>…{}</code></a>',
            reverse("admin:plans_plan_change", args=[event.plan_id]),
            event.plan_id,
            event.plan_id[-8:],
        )

    @admin.display(description="tool · step", ordering="tool")
    def call_column(self, event: PlanEvent) -> str:
        return format_html(
            '<code>{}</code><br><span class="plangate-quiet">{}</span>',
            event.tool,
            step_label(event.step),
        )

    @admin.display(description="decision · reason", ordering="decision")
    def decision_column(self, event: PlanEvent) -> str:
        allowed = event.decision == Decision.ALLOWED
        badge = format_html(
            '<span class="plangate-badge {}">{}</span>', "ok" if allowed else "bad", event.decision
        )
        if not event.reason:
            return badge
        return format_html(
            '{}<br><small title="{}">{}</small>',
            badge,
            event.reason,
            Truncator(event.reason).chars(60),
        )

    @admin.display(description="member", ordering="plan__member__email")
    def member_email(self, event: PlanEvent) -> str:
        return event.plan.member.email

    @admin.display(description="agent", ordering="plan__agent__name")
    def agent_name(self, event: PlanEvent) -> str:
        return admin_link(event.plan.agent)

    @admin.display(description="tool", ordering="tool")
    def tool_code(self, event: PlanEvent) -> str:
        return format_html("<code>{}</code>", event.tool)

    @admin.display(description="step")
    def step_shown(self, event: PlanEvent) -> str:
        return step_label(event.step)

    @admin.display(description="plan's approval")
    def plan_approval(self, event: PlanEvent) -> str:
        return approval_html(event.plan) or "None needed: no review rule asked for one."

    @admin.display(description="policy version")
    def policy_version_link(self, event: PlanEvent) -> str:
        version = event.decided_under
        return _version_link(version.pk, version.policy.slug, version.number)

    # --- the decision's own page ---------------------------------------------------------

    @admin.display(description="policy version in force")
    def policy_version_shown(self, event: PlanEvent) -> str:
        version = event.decided_under
        return format_html(
            "{} · published {} by {} · comment: {}",
            _version_link(version.pk, version.policy.slug, version.number),
            datetime_cell(version.created_at, seconds=True),
            version.created_by or "—",
            version.comment or "—",
        )

    @admin.display(description="rule")
    def rule_shown(self, event: PlanEvent) -> str:
        """The rule as published in the version's document, so "which rule allowed this"
        needs no other page."""
        version = event.decided_under
        rule_index, description = decision_rule(event)
        if rule_index is None:
            return format_html(
                "{}",
                f"No rule: {description}."
                if description
                else "The policy was not consulted: the plan or its budget decided.",
            )
        rules = version.document.get("rules") if isinstance(version.document, dict) else None
        published = (
            pretty_json(rules[rule_index])
            if isinstance(rules, list) and rule_index < len(rules)
            else "(not in the version's document)"
        )
        return format_html(
            '{}<pre class="plangate-pre">{}</pre>', decision_rule_html(event, version.pk), published
        )

    @admin.display(description="rule")
    def rule_column(self, event: PlanEvent) -> str:
        return decision_rule_html(event, event.decided_under_id, shorten=True)

    @admin.display(description="step planned")
    def planned_step(self, event: PlanEvent) -> str:
        steps = event.plan.document.get("steps") if isinstance(event.plan.document, dict) else None
        if event.step is None or not isinstance(steps, list) or event.step >= len(steps):
            return "—"
        step = steps[event.step] if isinstance(steps[event.step], dict) else {}
        return format_html(
            "{}: <code>{}</code> {}",
            step_label(event.step),
            step.get("tool", "?"),
            constraints_html(step.get("args")),
        )

    @admin.display(description="counted against budgets")
    def amounts_shown(self, event: PlanEvent) -> str:
        if not event.amounts:
            return "Nothing: no budget of the plan covers this call's step, or it was not allowed."
        return format_html_join(
            mark_safe("<br>"),
            "<code>{}</code>: {}",
            sorted(event.amounts.items()),
        )

    @admin.display(description="arguments")
    def args_shown(self, event: PlanEvent) -> str:
        if event.args is None:
            return "Not kept: the team logs only a digest of the arguments."
        return format_html('<pre class="plangate-pre">{}</pre>', pretty_json(event.args))
