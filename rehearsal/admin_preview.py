"""The page between saving a policy and publishing it: what the new version would refuse
among the team's live plans (``rehearsal.impact``), with "Publish" and "Cancel".

Its middle (``impact_context`` and ``admin/policies/includes/impact.html``: the plans, the
rules that can never take effect, the names the team lacks, the diff) is also what "Publish
this version again" shows before it publishes (``admin_republish``).

Publishing posts the same form again with the hash of the document shown; the form then
publishes through ``policy_set`` (with its "published meanwhile" check). Nothing is
written before that.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from kernel.json_format import readable_json
from policies.models import PolicyVersion
from policies.references import policy_reference_warnings, policy_rule_findings
from policies.selectors import policy_next_version_number

from .impact import AffectedPlan, PolicyImpact, WarnedPlan

if TYPE_CHECKING:
    from .admin import PolicyForm

# Not carried over to "Publish": the page's own token and confirmation, and the buttons
# of the change form (Publish saves and goes back to the list, like "Save").
_NOT_CARRIED = frozenset(
    {"csrfmiddlewaretoken", "publish_confirmed", "_save", "_continue", "_addanother", "_edit_again"}
)


def document_diff_html(old: object, new: object, *, old_label: str, new_label: str) -> str:
    """A unified diff of two JSON documents as people read them (a short rule on one line),
    every line escaped."""
    lines = difflib.unified_diff(
        readable_json(old).splitlines(),
        readable_json(new).splitlines(),
        fromfile=old_label,
        tofile=new_label,
        lineterm="",
    )
    rows = []
    for line in lines:
        if line.startswith(("+++", "---")) or line.startswith("@@"):
            css = "hunk"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        else:
            css = "ctx"
        rows.append((css, line or " "))
    if not rows:
        return format_html('<p class="plangate-note">{}</p>', "No change in the document.")
    return format_html(
        '<pre class="plangate-diff">{}</pre>',
        format_html_join("", '<span class="{}">{}</span>', rows),
    )


def rules_table_html(document: object) -> str:
    """Each rule of a policy document with an anchor (``#rules-2``) that a decision or a
    simulation links to, named by its JSON path as the guard's texts name it."""
    document = document if isinstance(document, dict) else {}
    rules = document.get("rules")
    if not isinstance(rules, list) or not rules:
        return format_html("{}", f"No rule: the default ({document.get('default')}) decides.")
    rows = format_html_join(
        "",
        '<tr id="rules-{}"><td><code>rules[{}]</code></td><td>{}</td>'
        '<td><pre class="plangate-pre">{}</pre></td></tr>',
        (
            (
                index,
                index,
                rule.get("description") or rule.get("name") or "—"
                if isinstance(rule, dict)
                else "—",
                readable_json(rule),
            )
            for index, rule in enumerate(rules)
        ),
    )
    return format_html(
        '<table class="plangate-table"><thead><tr><th>rule</th><th>description</th>'
        "<th>as written</th></tr></thead><tbody>{}</tbody></table>",
        rows,
    )


def _plan_row(plan: AffectedPlan | WarnedPlan) -> dict[str, Any]:
    """A listed plan with the links to its plan, agent and member pages."""
    return {
        "plan": plan,
        "plan_url": reverse("admin:plans_plan_change", args=[quote(plan.id)]),
        "agent_url": reverse("admin:members_agent_change", args=[quote(plan.agent_id)]),
        "member_url": reverse("admin:members_member_change", args=[quote(plan.member_id)]),
    }


def impact_context(
    impact: PolicyImpact, *, active: PolicyVersion | None, new_label: str
) -> dict[str, Any]:
    """The context of ``admin/policies/includes/impact.html``: what publishing
    ``impact.document`` over the ``active`` version would do. The edit preview and the
    confirmation of "Publish this version again" both show it, so both say the same."""
    policy = impact.policy
    rows = [_plan_row(plan) for plan in impact.plans]
    warned_rows = [_plan_row(plan) for plan in impact.warned]
    old_document = active.document if active is not None else {}
    old_label = f"{policy.slug} v{active.number} (active)" if active is not None else "(none)"
    return {
        "impact": impact,
        "rows": rows,
        "warned_rows": warned_rows,
        "diff_title": f"Changes from version {active.number}" if active else "The document",
        "diff": document_diff_html(
            old_document, impact.document, old_label=old_label, new_label=new_label
        ),
        "reference_warnings": policy_reference_warnings(team=policy.team, document=impact.document),
        "rule_findings": policy_rule_findings(team=policy.team, document=impact.document),
    }


def impact_preview_response(
    model_admin: admin.ModelAdmin, request: HttpRequest, form: PolicyForm
) -> TemplateResponse:
    impact = form.impact
    assert impact is not None  # only called for a form held for review
    policy = impact.policy
    current = form.current
    assert current is not None  # only an edit of a published policy is held
    # The next number, shadow versions counted (they are numbered with the others).
    number = policy_next_version_number(policy=policy)
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
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Publish {policy.slug} version {number}?",
        "opts": opts,
        "original": policy,
        **impact_context(
            impact,
            active=current,
            new_label=f"{policy.slug} v{number} (this change)",
        ),
        "next_number": number,
        "current": current,
        "carried": carried,
        "confirm_hash": form.impact_hash,
        "change_url": change_url,
        # The draft's simulator (admin_simulator), posted the same form.
        "simulate_draft_url": reverse(
            "admin:policies_policy_simulate_draft", args=[quote(policy.pk)]
        ),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/policies/policy/impact_preview.html", context)
