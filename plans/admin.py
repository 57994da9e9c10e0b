"""Admin for issued plans (with each plan's timeline, ``plans.admin_timeline``) and their
tokens; the guard decisions' admin is ``plans.admin_decisions`` and the signing keys' is
``plans.admin_keys``, both imported here so autodiscovery registers them.

Everything here is an audit record: read-only for everyone, superusers included. The only
write is an action through the service: revoking a plan (``plan_revoke``), which leaves a
history entry.
"""

from __future__ import annotations

from typing import ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db import connections, transaction
from django.db.models import F, Func, JSONField, Value
from django.http import Http404, HttpRequest
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from audit.doors import person_actor
from kernel.admin_actions import action_form, confirm_action, redirect_after_action
from kernel.admin_base import (
    LONG_LIST_PER_PAGE,
    PlangateModelAdmin,
    ReadOnlyPermissions,
    change_url,
    email_search,
    sha256_search,
    ulid_search,
)
from kernel.admin_export import ExportMixin
from kernel.admin_scoping import scope_to_teams
from kernel.admin_widgets import TextInputFilter, admin_link, datetime_column
from kernel.json_format import pretty_json
from members.models import email_normalize
from teams.models import running_agents_stop_within

from . import (
    admin_keys,  # noqa: F401  (registers SigningKeyAdmin)
    admin_shadow,  # noqa: F401  (registers ShadowDifferenceAdmin)
)
from .admin_decisions import AgentChoiceFilter, SuggestedToolFilter
from .admin_display import (
    approval_html,
    blocked_attempts,
    budget_reports,
    delegation_tree,
    delivered_by_token,
    displayed_plan,
    plan_display_status,
    plan_version,
    status_badge,
    step_reports,
)
from .admin_timeline import decisions_list_url, plan_timeline, timeline_url
from .approvals import plan_approval_columns
from .models import Plan, PlanToken, SigningKey
from .selectors import planned_tools, plans_planning_tool
from .services import plan_revoke


class ReadOnlyAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Audit records: nobody adds, edits or deletes them here."""


class RevokePlanForm(forms.Form):
    """The revoke confirmation's one field."""

    reason = forms.CharField(
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text=(
            "Optional. Kept with the plan and in the audit trail; the agent reads it in "
            "GET /v1/plans/{id}."
        ),
    )


class MemberEmailFilter(TextInputFilter):
    title = "member e-mail"
    parameter_name = "member_email"
    placeholder = "alice@example.com"

    def queryset(self, request, queryset):
        value = email_normalize(self.value() or "")
        return queryset.filter(member__email=value) if value else queryset


class ApprovedByFilter(TextInputFilter):
    """ "Which plans did april@acme.dev approve": the person who approved, in any case."""

    title = "approved by"
    parameter_name = "approved_by"
    placeholder = "april@example.com"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        if not value:
            return queryset
        return queryset.filter(approval=Plan.Approval.APPROVED, approval_by__iexact=value)


class PlannedToolFilter(SuggestedToolFilter):
    """ "Which plans included github_delete_repo": a step calls exactly this tool."""

    title = "planned tool"

    def recent_tools(self, request: HttpRequest) -> list[str]:
        recent = scope_to_teams(Plan.objects.order_by("-created_at"), request)
        if connections[recent.db].vendor != "postgresql":
            return planned_tools(recent.values_list("document", flat=True)[: self.recent_rows])
        # Only the steps' tool names leave the database, not 500 whole documents to decode
        # (2 ms of CPU a request instead of 8). Which names count is still planned_tools'
        # rule.
        tool_names = recent.annotate(
            tool_names=Func(
                F("document"),
                Value("$.steps[*].tool"),
                function="jsonb_path_query_array",
                output_field=JSONField(),
            )
        ).values_list("tool_names", flat=True)[: self.recent_rows]
        return planned_tools({"steps": [{"tool": name} for name in names]} for names in tool_names)

    def queryset(self, request, queryset):
        return plans_planning_tool(queryset, self.tool()) if self.tool() else queryset


def _shortened(text: str, length: int) -> str:
    """``Truncator(text).chars(length)``, skipped for a goal that already fits: it looks up
    its ellipsis' translation and walks every character, the costliest cell of a row."""
    return text if len(text) <= length else Truncator(text).chars(length)


def _version_link(version) -> str:
    return format_html(
        '<a href="{}">{} v{}</a>',
        change_url("policies", "policyversion", version.pk),
        version.policy.slug,
        version.number,
    )


@admin.register(Plan)
class PlanAdmin(ExportMixin, ReadOnlyAdmin):
    list_display = [
        "goal_and_id",
        "member_email",
        "agent",
        "status_shown",
        "issued",
        "expires",
        "policy_version_link",
        "team",
    ]
    list_display_links = ["goal_and_id"]
    list_filter = [
        "status",
        AgentChoiceFilter,
        MemberEmailFilter,
        ApprovedByFilter,
        PlannedToolFilter,
        ("created_at", admin.DateFieldListFilter),
    ]
    # An id, a hash or an e-mail is matched exactly, through its index; other words
    # search the goals.
    exact_searches = (
        ulid_search("id"),
        sha256_search("hash"),
        email_search("member__email", normalize=email_normalize),
    )
    search_fields = ["goal"]
    search_help_text = (
        "Search by plan id, plan hash or member e-mail (exact), or words of the goal."
    )
    list_select_related = ["member", "agent", "team", "policy_version__policy"]
    list_deferred_fields = (
        "document",
        "groups",
        "review",
        "approval_reason",
        "policy_version__document",
    )
    list_per_page = LONG_LIST_PER_PAGE
    ordering = ["-created_at"]
    fields = ["goal"]
    actions = ["revoke_plans"]
    object_actions = {"revoke_plans": "Revoke plan"}
    change_form_template = "admin/plans/plan/change_form.html"
    issued = datetime_column("created_at", "issued")
    expires = datetime_column("expires_at", "expires")
    export_filename = "issued-plans"
    export_columns = (
        ("id", "id"),
        ("issued_at", "created_at"),
        ("expires_at", "expires_at"),
        ("status", "status"),
        ("team", "team.slug"),
        ("agent", "agent.name"),
        ("member", "member.email"),
        ("goal", "goal"),
        ("tools", lambda plan: planned_tools([plan.document])),
        ("plan_hash", "hash"),
        ("policy", "policy_version.policy.slug"),
        ("policy_version", "policy_version.number"),
        ("role", "role"),
        ("groups", "groups"),
        ("revoked_at", "revoked_at"),
        ("revoked_by", "revoked_by"),
        ("revoke_reason", "revoke_reason"),
        ("ended_at", "ended_at"),
        ("end_reason", "end_reason"),
        ("decisions_lost", "decisions_lost"),
        # Annotated by export_queryset: an approved plan's approval, null for any other.
        ("approved_by", "approved_by"),
        ("approved_at", "approved_at"),
        ("approval_reason", "approved_reason"),
    )

    def get_queryset(self, request: HttpRequest):
        # A plan's page and timeline show its member, agent, team and policy version: read
        # with the plan rather than one query each.
        return (
            super()
            .get_queryset(request)
            .select_related("member", "agent", "team", "policy_version__policy")
        )

    def export_queryset(self, request: HttpRequest):
        return super().export_queryset(request).annotate(**plan_approval_columns())

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Issued plans", **(extra_context or {})})

    def get_urls(self):
        return [
            path(
                "<path:object_id>/timeline/",
                self.admin_site.admin_view(self.timeline_view),
                name="plans_plan_timeline",
            ),
            *super().get_urls(),
        ]

    def timeline_view(self, request: HttpRequest, object_id: str) -> TemplateResponse:
        plan = self.get_object(request, unquote(object_id))
        if plan is None:
            raise Http404(f"No plan with id {object_id!r}.")
        if not self.has_view_permission(request, plan):
            raise PermissionDenied
        request.current_app = self.admin_site.name
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": Truncator(f"Timeline: {plan.goal}").chars(100),
            "subtitle": plan.pk,
            "plan": plan,
            "plan_url": self._change_url(plan),
            "timeline": plan_timeline(plan),
        }
        return TemplateResponse(request, "admin/plans/plan/timeline.html", context)

    @admin.display(description="goal", ordering="goal")
    def goal_and_id(self, plan: Plan) -> str:
        return format_html(
            '{}<br><code class="plangate-mono plangate-quiet">{}</code>',
            _shortened(plan.goal, 90),
            plan.pk,
        )

    @admin.display(description="member", ordering="member__email")
    def member_email(self, plan: Plan) -> str:
        return plan.member.email

    @admin.display(description="status", ordering="status")
    def status_shown(self, plan: Plan) -> str:
        return status_badge(plan_display_status(plan))

    @admin.display(description="policy version", ordering="policy_version")
    def policy_version_link(self, plan: Plan) -> str:
        return _version_link(plan.policy_version)

    def has_revoke_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm("plans.change_plan")

    def object_action_available(self, obj: Plan, action_name: str) -> bool:
        return obj.status == Plan.Status.ACTIVE and not obj.is_expired()

    @admin.action(description="Revoke selected plans", permissions=["revoke"])
    def revoke_plans(self, request: HttpRequest, queryset, next_url: str = ""):
        form = action_form(request, RevokePlanForm)
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_plans",
            next_url=next_url,
            title="Revoke plans",
            question=(
                "Revoke these plans? The agents' guards block every further call as "
                "plan_revoked: "
                + running_agents_stop_within(
                    queryset.values_list("team__revocation_bound_seconds", flat=True)
                )
                + ", and a refresh answers 410 plan_revoked. Every plan delegated from them"
                " is revoked with them."
            ),
            button="Yes, revoke",
            warning="This cannot be undone: the agent must declare a new plan.",
            form=form,
        )
        if confirmation is not None:
            return confirmation
        reason = form.cleaned_data["reason"]
        revoked = []
        with transaction.atomic():
            for plan in queryset:
                if plan_revoke(plan=plan, by=person_actor(request.user), reason=reason):
                    self.log_change(
                        request,
                        plan,
                        "Revoked: its next refresh answers 410 plan_revoked."
                        + (f" Reason: {reason}" if reason else ""),
                    )
                    revoked.append(plan.pk)
        if revoked:
            self.message_user(request, f"Revoked {len(revoked)} plan(s): {', '.join(revoked)}.")
        else:
            self.message_user(request, "The selected plans were already revoked.", messages.INFO)
        return redirect_after_action(request)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        plan = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if plan is not None:
            tokens = list(
                plan.tokens.select_related("policy_version__policy").order_by("issued_at", "id")
            )
            known_kids = set(
                SigningKey.objects.filter(kid__in={token.kid for token in tokens}).values_list(
                    "kid", flat=True
                )
            )
            context.update(
                {
                    "title": Truncator(f"Plan: {plan.goal}").chars(100),
                    "subtitle": plan.pk,
                    "plan": plan,
                    "plan_status": plan_display_status(plan),
                    "policy_version_link": _version_link(plan.policy_version),
                    "member_link": admin_link(plan.member, plan.member.email),
                    "agent_link": admin_link(plan.agent),
                    "steps": step_reports(plan),
                    "plan_version": plan_version(plan),
                    "budgets": budget_reports(plan),
                    "delegation": delegation_tree(plan),
                    "blocked": blocked_attempts(plan),
                    "delivered_by_token": delivered_by_token(plan),
                    "approval": approval_html(plan),
                    "displayed": displayed_plan(plan),
                    "tokens": [
                        (
                            token,
                            _version_link(token.policy_version),
                            reverse("admin:plans_signingkey_change", args=[quote(token.kid)])
                            if token.kid in known_kids
                            else None,
                        )
                        for token in tokens
                    ],
                    "document_json": pretty_json(plan.document),
                    "now": timezone.now(),
                    "timeline_url": timeline_url(plan),
                    "decisions_url": decisions_list_url(plan),
                    "blocked_url": decisions_list_url(plan, decision="blocked"),
                }
            )
        return super().change_view(request, object_id, form_url, context)


@admin.register(PlanToken)
class PlanTokenAdmin(ReadOnlyAdmin):
    """One row per token signed; the token itself is a bearer credential and never kept."""

    list_display = [
        "issued",
        "plan_link",
        "kind",
        "kid_short",
        "expires",
        "policy_version_link",
        "role",
        "group_list",
    ]
    list_filter = ["kind", ("issued_at", admin.DateFieldListFilter)]
    exact_searches = (
        ulid_search("plan_id"),
        email_search("plan__member__email", normalize=email_normalize),
    )
    search_fields = ["kid"]
    search_help_text = "Search by plan id or member e-mail (exact), or a signing key's kid."
    # The plan column needs only the plan's id, which the token holds.
    list_select_related = ["policy_version__policy"]
    list_deferred_fields = ("policy_version__document",)
    list_per_page = LONG_LIST_PER_PAGE
    fields: ClassVar[tuple[str, ...]] = (
        "plan_link",
        "kind",
        "kid",
        "issued_at",
        "expires_at",
        "policy_version_link",
        "role",
        "group_list",
    )
    readonly_fields = fields
    issued = datetime_column("issued_at", "issued (iat)")
    expires = datetime_column("expires_at", "expires (exp)")

    @admin.display(description="plan", ordering="plan")
    def plan_link(self, token: PlanToken) -> str:
        return format_html(
            '<a href="{}">{}</a>', change_url("plans", "plan", token.plan_id), token.plan_id
        )

    @admin.display(description="kid", ordering="kid")
    def kid_short(self, token: PlanToken) -> str:
        return format_html('<code title="{}">{}…</code>', token.kid, token.kid[:12])

    @admin.display(description="policy version")
    def policy_version_link(self, token: PlanToken) -> str:
        return _version_link(token.policy_version)

    @admin.display(description="groups")
    def group_list(self, token: PlanToken) -> str:
        return ", ".join(token.groups) or "—"
