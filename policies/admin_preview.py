"""The page between saving a policy and publishing it: what the new version would refuse
among the team's live plans (``policies.impact``), with "Publish" and "Cancel".

Publishing posts the same form again with the hash of the document shown; the form then
publishes through ``policy_set`` (with its "published meanwhile" check). Nothing is
written before that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from .admin_versions import document_diff_html
from .references import policy_reference_warnings

if TYPE_CHECKING:
    from .admin import PolicyForm

# Not carried over to "Publish": the page's own token and confirmation, and the buttons
# of the change form (Publish saves and goes back to the list, like "Save").
_NOT_CARRIED = frozenset(
    {"csrfmiddlewaretoken", "publish_confirmed", "_save", "_continue", "_addanother", "_edit_again"}
)


def impact_preview_response(
    model_admin: admin.ModelAdmin, request: HttpRequest, form: PolicyForm
) -> TemplateResponse:
    impact = form.impact
    assert impact is not None  # only called for a form held for review
    policy = impact.policy
    current = form.current
    assert current is not None  # only an edit of a published policy is held
    carried = [
        (name, value)
        for name, values in request.POST.lists()
        if name not in _NOT_CARRIED
        for value in values
    ]
    opts = model_admin.model._meta
    change_url = reverse(
        f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(policy.pk)]
    )
    rows: list[dict[str, Any]] = [
        {
            "plan": plan,
            "plan_url": reverse("admin:plans_plan_change", args=[quote(plan.id)]),
            "agent_url": reverse("admin:members_agent_change", args=[quote(plan.agent_id)]),
            "member_url": reverse("admin:members_member_change", args=[quote(plan.member_id)]),
        }
        for plan in impact.plans
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Publish {policy.slug} version {current.number + 1}?",
        "opts": opts,
        "original": policy,
        "impact": impact,
        "rows": rows,
        "next_number": current.number + 1,
        "current": current,
        "diff": document_diff_html(
            current.document,
            impact.document,
            old_label=f"{policy.slug} v{current.number} (active)",
            new_label=f"{policy.slug} v{current.number + 1} (this change)",
        ),
        "carried": carried,
        "reference_warnings": policy_reference_warnings(team=policy.team, document=impact.document),
        "confirm_hash": form.impact_hash,
        "change_url": change_url,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/policies/policy/impact_preview.html", context)
