"""Admin for issued plans, their tokens and guard decisions; the signing keys' admin is
``plans.admin_keys``, imported here so autodiscovery registers it.

Everything here is an audit record: read-only for everyone, superusers included. The only
write is an action through the service: revoking a plan (``plan_revoke``), which leaves a
history entry.
"""

from __future__ import annotations

from typing import ClassVar

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.db import transaction
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from kernel.admin_actions import confirm_action, redirect_after_action
from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions
from kernel.admin_widgets import TextInputFilter, admin_link, datetime_column
from kernel.json_format import pretty_json
from members.models import email_normalize

from . import admin_keys  # noqa: F401  (registers SigningKeyAdmin)
from .admin_display import (
    blocked_attempts,
    displayed_plan,
    plan_display_status,
    status_badge,
    step_reports,
)
from .models import Plan, PlanEvent, PlanToken, SigningKey
from .services import plan_revoke


class ReadOnlyAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Audit records: nobody adds, edits or deletes them here."""


class MemberEmailFilter(TextInputFilter):
    title = "member e-mail"
    parameter_name = "member_email"
    placeholder = "alice@example.com"

    def queryset(self, request, queryset):
        value = email_normalize(self.value() or "")
        return queryset.filter(member__email=value) if value else queryset


def _version_link(version) -> str:
    return admin_link(version, f"{version.policy.slug} v{version.number}")


@admin.register(Plan)
class PlanAdmin(ReadOnlyAdmin):
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
        ("agent", admin.RelatedOnlyFieldListFilter),
        MemberEmailFilter,
        ("created_at", admin.DateFieldListFilter),
    ]
    search_fields = ["=id", "goal", "member__email", "=hash"]
    search_help_text = "Search by plan id, goal, member e-mail or plan hash."
    list_select_related = ["member", "agent", "team", "policy_version__policy"]
    ordering = ["-created_at"]
    show_full_result_count = False
    fields = ["goal"]
    actions = ["revoke_plans"]
    object_actions = {"revoke_plans": "Revoke plan"}
    change_form_template = "admin/plans/plan/change_form.html"
    issued = datetime_column("created_at", "issued")
    expires = datetime_column("expires_at", "expires")

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Issued plans", **(extra_context or {})})

    @admin.display(description="goal", ordering="goal")
    def goal_and_id(self, plan: Plan) -> str:
        return format_html(
            '{}<br><code class="plangate-mono plangate-quiet">{}</code>',
            Truncator(plan.goal).chars(90),
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
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_plans",
            next_url=next_url,
            title="Revoke plans",
            question=(
                "Revoke these plans? Their next refresh answers 410 plan_revoked and the "
                "agent's guard blocks every further call."
            ),
            button="Yes, revoke",
            warning="This cannot be undone: the agent must declare a new plan.",
        )
        if confirmation is not None:
            return confirmation
        revoked = []
        with transaction.atomic():
            for plan in queryset:
                if plan_revoke(plan=plan):
                    self.log_change(
                        request, plan, "Revoked: its next refresh answers 410 plan_revoked."
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
                    "blocked": blocked_attempts(plan),
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
    search_fields = ["=plan__id", "=kid", "plan__member__email"]
    list_select_related = ["plan", "policy_version__policy"]
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
    show_full_result_count = False
    issued = datetime_column("issued_at", "issued (iat)")
    expires = datetime_column("expires_at", "expires (exp)")

    @admin.display(description="plan", ordering="plan")
    def plan_link(self, token: PlanToken) -> str:
        return admin_link(token.plan, token.plan_id)

    @admin.display(description="kid", ordering="kid")
    def kid_short(self, token: PlanToken) -> str:
        return format_html('<code title="{}">{}…</code>', token.kid, token.kid[:12])

    @admin.display(description="policy version")
    def policy_version_link(self, token: PlanToken) -> str:
        return _version_link(token.policy_version)

    @admin.display(description="groups")
    def group_list(self, token: PlanToken) -> str:
        return ", ".join(token.groups) or "—"


@admin.register(PlanEvent)
class PlanEventAdmin(ReadOnlyAdmin):
    """What the guards reported deciding, call by call."""

    list_display = ["occurred", "plan_link", "tool", "decision", "step", "reason"]
    list_filter = ["decision", ("occurred_at", admin.DateFieldListFilter)]
    search_fields = ["=plan__id", "tool"]
    list_select_related = ["plan"]
    fields: ClassVar[tuple[str, ...]] = (
        "plan_link",
        "occurred_at",
        "received_at",
        "tool",
        "decision",
        "step",
        "reason",
        "args_digest",
        "args",
    )
    readonly_fields = fields
    show_full_result_count = False
    occurred = datetime_column("occurred_at", "when")

    @admin.display(description="plan", ordering="plan")
    def plan_link(self, event: PlanEvent) -> str:
        return admin_link(event.plan, event.plan_id)
