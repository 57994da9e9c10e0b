"""The approval queue: plans a policy's review rule sent to a person, for the team admins
and the "Approvers" of their teams. Each shows the whole plan; Approve and Deny (with a
reason) are actions through ``plans.approvals.plan_approval_decide``, which refuses anyone
``plans.approvals.plan_approver_refusal`` refuses (a plan made for the person deciding, a
person who is not asked to decide it); the queue draws no controls for them and says why.

A proxy of ``plans.Plan`` in this app (``notify.ApprovalRequest``): its view permission
shows the queue, ``notify.decide_approval`` lets a person decide (docs/decisions/0037).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.text import Truncator

from kernel.admin_actions import action_form, confirm_action, redirect_after_action
from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions
from kernel.admin_widgets import admin_link, datetime_column
from kernel.json_format import pretty_json
from kernel.problems import DomainError
from plans.admin import PlanAdmin
from plans.admin_display import step_number, step_reports
from plans.approvals import (
    acts_for,
    plan_approval_decide,
    plan_approver_refusal,
    plans_awaiting_approval,
)
from plans.models import Plan

from .models import ApprovalRequest
from .selectors import DECIDE_PERMISSION


class DenyForm(forms.Form):
    reason = forms.CharField(
        required=True,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Required. The agent reads it in the approval_denied answer.",
    )


class ApproveForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Optional. Kept with the plan and in the audit trail.",
    )


@admin.register(ApprovalRequest)
class ApprovalQueueAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    list_display = ["goal_and_id", "member_email", "agent", "review_summary", "asked", "deadline"]
    list_display_links = ["goal_and_id"]
    list_select_related = ["member", "agent", "team"]
    list_filter = [("agent", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["=id", "goal", "member__email"]
    ordering = ["created_at"]  # the oldest request first: it expires first
    show_full_result_count = False
    fields = ["goal"]
    actions = ["approve_plans", "deny_plans"]
    object_actions = {"approve_plans": "Approve…", "deny_plans": "Deny…"}
    change_form_template = "admin/notify/approvalrequest/change_form.html"
    asked = datetime_column("created_at", "asked")
    deadline = datetime_column("approval_deadline", "decide by")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The queue is plans_awaiting_approval (0036): a plan revoked while it waited has
        # left it, and the index's count of waiting plans lists exactly these.
        return plans_awaiting_approval(super().get_queryset(request))

    def has_decide_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(DECIDE_PERMISSION)

    def object_action_available(self, obj: Plan, action_name: str) -> bool:
        return obj.approval == Plan.Approval.PENDING

    def object_action_url(self, request: HttpRequest, obj: Any, action_name: str) -> str | None:
        # Only a person the service would let decide sees the controls (one rule:
        # plan_approver_refusal), so nobody is offered a button that would only refuse.
        if plan_approver_refusal(obj, request.user) is not None:
            return None
        return super().object_action_url(request, obj, action_name)

    # The goal and the plan's id, as the plans' own list shows them.
    goal_and_id = PlanAdmin.goal_and_id

    @admin.display(description="for", ordering="member__email")
    def member_email(self, plan: Plan) -> str:
        return plan.member.email

    @admin.display(description="review asked for")
    def review_summary(self, plan: Plan) -> str:
        tools = sorted({str(entry.get("tool", "?")) for entry in plan.review or []})
        return ", ".join(tools) or "—"

    @admin.action(description="Approve selected plans", permissions=["decide"])
    def approve_plans(self, request: HttpRequest, queryset: QuerySet, next_url: str = ""):
        form = action_form(request, ApproveForm)
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="approve_plans",
            next_url=next_url,
            title="Approve plans",
            question=(
                "Approve these plans? Each agent gets a token for exactly the plan shown, "
                "carrying your approval."
            ),
            button="Yes, approve",
            form=form,
        )
        if confirmation is not None:
            return confirmation
        return self._decide(request, queryset, approve=True, reason=form.cleaned_data["reason"])

    @admin.action(description="Deny selected plans", permissions=["decide"])
    def deny_plans(self, request: HttpRequest, queryset: QuerySet, next_url: str = ""):
        form = action_form(request, DenyForm)
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="deny_plans",
            next_url=next_url,
            title="Deny plans",
            question="Deny these plans? Each agent is told approval_denied, with your reason.",
            button="Yes, deny",
            warning="A denied plan never gets a token: the agent must declare a new plan.",
            form=form,
        )
        if confirmation is not None:
            return confirmation
        return self._decide(request, queryset, approve=False, reason=form.cleaned_data["reason"])

    def _decide(self, request: HttpRequest, queryset: QuerySet, *, approve: bool, reason: str):
        decided, refused = [], []
        for plan in queryset.select_related("member"):
            try:
                plan_approval_decide(
                    plan=plan, by_user=request.user, approve=approve, reason=reason
                )
            except DomainError as exc:
                refused.append(f"{plan.pk}: {exc.detail}")
                continue
            self.log_change(
                request,
                plan,
                ("Approved" if approve else "Denied") + (f". Reason: {reason}" if reason else "."),
            )
            decided.append(plan.pk)
        verb = "Approved" if approve else "Denied"
        if decided:
            self.message_user(request, f"{verb} {len(decided)} plan(s): {', '.join(decided)}.")
        for refusal in refused:
            self.message_user(request, f"Not decided: {refusal}", messages.ERROR)
        if refused:
            return redirect_after_action(request)
        # A decided plan has left the queue: its page here is gone, so back to the queue.
        return HttpResponseRedirect(reverse("admin:notify_approvalrequest_changelist"))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        plan = self.get_object(request, unquote(object_id))
        context = dict(extra_context or {})
        if plan is not None:
            member = plan.member
            refusal = plan_approver_refusal(plan, request.user)
            context.update(
                {
                    "title": Truncator(f"Approve or deny: {plan.goal}").chars(100),
                    "subtitle": plan.pk,
                    "plan": plan,
                    "member": member,
                    "member_link": admin_link(member, member.email),
                    "member_role_now": member.role.name if member.role_id else None,
                    "member_groups_now": member.group_names(),
                    "agent_link": admin_link(plan.agent),
                    "steps": step_reports(plan),
                    # counted from 1 by the one function every page uses (0058), so the
                    # review table names the step the steps table and the plan page do
                    "review": [
                        {**entry, "number": step_number(entry.get("step"))}
                        for entry in plan.review or []
                    ],
                    "document_json": pretty_json(plan.document),
                    "own_plan": acts_for(request.user, plan),
                    "may_decide": self.has_decide_permission(request) and refusal is None,
                    # why a person holding the permission still may not decide this plan,
                    # in the service's own words (no e-mail address, not the team's staff)
                    "refusal": refusal.detail
                    if refusal is not None and self.has_decide_permission(request)
                    else "",
                }
            )
        return super().change_view(request, object_id, form_url, context)
