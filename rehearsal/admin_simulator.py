"""The simulator's page: a policy version tried against a plan for a member, and optionally
one call under it (``rehearsal.simulator``). Linked from a version's page and from the
policy's. It writes nothing, so whoever may view the version may use it; the version and
the members offered are the user's teams' only (the admin's scoping).

The same page runs a draft: the text in the policy's editor, before it is published
("Simulate this draft" on the policy's page and on its impact preview posts the edit form
here). The draft travels in the page's hidden fields with the rest of the edit form, so
"Back to editing" posts it back to the editor unchanged; nothing is written.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from kernel.json_format import readable_json
from kernel.problems import DomainError
from members.models import Member
from policies.models import Policy, PolicyVersion
from policies.references import policy_rule_findings
from policies.selectors import policy_active_version

from .admin_preview import document_diff_html, rules_table_html
from .simulator import (
    CallSimulation,
    PlanSimulation,
    PolicyDraft,
    SimulatedVersion,
    policy_draft,
    simulate_call,
    simulate_plan,
)

MAX_ERRORS_SHOWN = 50


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
        ) from exc


class SimulatorForm(forms.Form):
    member = forms.ModelChoiceField(
        queryset=Member.objects.none(),
        help_text="Whose plan: their role and groups are read as they are now.",
    )
    plan = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "cols": 90, "class": "plangate-mono"}),
        strip=False,
        help_text='The plan document (JSON). Its "user" is taken to be the member chosen.',
    )
    tool = forms.CharField(
        required=False,
        max_length=200,
        help_text="Optional: a call under the plan, to see what the agent's guard answers.",
    )
    args = forms.CharField(
        required=False,
        label="Arguments",
        initial="{}",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 90, "class": "plangate-mono"}),
        help_text="The call's arguments (a JSON object).",
    )

    def __init__(self, *args: Any, version: SimulatedVersion, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        members = Member.objects.filter(team_id=version.policy.team_id).select_related("role")
        field = self.fields["member"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = members.order_by("email")
        self.parsed_plan: object = None
        self.parsed_args: object = None

    def clean_plan(self) -> str:
        text = self.cleaned_data["plan"]
        self.parsed_plan = _parsed(text)
        return text

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("tool"):
            try:
                self.parsed_args = _parsed(cleaned.get("args") or "{}")
            except forms.ValidationError as exc:
                self.add_error("args", exc)
        return cleaned

    def add_domain_error(self, exc: DomainError) -> None:
        """A refusal's paths at the fields they concern (``plan.steps[0]...`` on the plan)."""
        if exc.code == "unknown_user":
            self.add_error("member", exc.detail)
            return
        errors = [f"{error.path}: {error.detail}" for error in exc.errors] or [exc.detail]
        if len(errors) > MAX_ERRORS_SHOWN:
            errors = [*errors[:MAX_ERRORS_SHOWN], f"… and {len(errors) - MAX_ERRORS_SHOWN} more"]
        self.add_error("plan", errors)


def starter_plan(version: SimulatedVersion) -> str:
    """A plan to start from: one step per tool the version's allow rules name literally."""
    rules = version.document.get("rules", []) if isinstance(version.document, dict) else []
    tools = [
        tool
        for rule in rules
        if rule.get("effect") == "allow"
        for tool in rule.get("tools", [])
        if not any(mark in tool for mark in "*?[")
    ][:3] or ["tool_name"]
    return readable_json(
        {
            "version": 1,
            "goal": "What the agent means to do",
            "user": "member@example.com",
            "steps": [{"tool": tool} for tool in tools],
        }
    )


def simulator_url(version: PolicyVersion) -> str:
    return reverse("admin:policies_policyversion_simulate", args=[quote(version.pk)])


def simulator_link(version: PolicyVersion | None) -> str:
    if version is None:
        return "—"
    return format_html(
        '<a href="{}" class="plangate-simulate">Simulate a plan or a call under v{}</a>',
        simulator_url(version),
        version.number,
    )


class SimulatorMixin(admin.ModelAdmin):
    """For the PolicyVersion admin, listed before its base: the ``<id>/simulate/`` page."""

    def get_urls(self):
        return [
            path(
                "<path:object_id>/simulate/",
                self.admin_site.admin_view(self.simulate_view),
                name="policies_policyversion_simulate",
            ),
            *super().get_urls(),
        ]

    def simulate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self.get_object(request, unquote(object_id))  # the user's teams' only
        if version is None:
            raise Http404(f"No policy version with id {object_id!r}.")
        if not self.has_view_permission(request, version):
            raise PermissionDenied
        form, result = _form_and_result(request, version, bound=request.method == "POST")
        context = {
            **self.admin_site.each_context(request),
            "title": f"Simulate {version.policy.slug} v{version.number}",
            "opts": self.opts,
            "original": version,
            "version_url": reverse("admin:policies_policyversion_change", args=[quote(version.pk)]),
            **_result_context(form, result),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/policies/policyversion/simulate.html", context)


#: the button of the policy's edit form (and of its impact preview) that posts it here
SIMULATE_DRAFT = "_simulate_draft"
#: the simulator's own button: the posted form is a simulation to run
SIMULATE = "_simulate"
# Not carried back to the editor: the simulator's own fields and buttons, the page's token,
# the edit form's other buttons and a preview's confirmation (the editor previews again).
_NOT_CARRIED = frozenset(
    {
        *SimulatorForm.base_fields,
        SIMULATE,
        SIMULATE_DRAFT,
        "csrfmiddlewaretoken",
        "publish_confirmed",
        "_save",
        "_continue",
        "_addanother",
        "_edit_again",
    }
)


def simulate_draft_url(policy: Policy) -> str:
    return reverse("admin:policies_policy_simulate_draft", args=[quote(policy.pk)])


def simulate_draft_button(policy: Policy) -> str:
    """A button of the policy's edit form that posts it, the unsaved text included, to the
    draft's simulator instead of saving it."""
    return format_html(
        '<button type="submit" name="{}" value="1" formaction="{}" formnovalidate '
        'class="button plangate-simulate-draft">Simulate the text being edited '
        "(not published)</button>",
        SIMULATE_DRAFT,
        simulate_draft_url(policy),
    )


class DraftSimulatorMixin(admin.ModelAdmin):
    """For the Policy admin, listed before its base: the ``<id>/simulate-draft/`` page,
    which the edit form posts to."""

    def get_urls(self):
        return [
            path(
                "<path:object_id>/simulate-draft/",
                self.admin_site.admin_view(self.simulate_draft_view),
                name="policies_policy_simulate_draft",
            ),
            *super().get_urls(),
        ]

    def simulate_draft_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        policy = self.get_object(request, unquote(object_id))  # the user's teams' only
        if policy is None:
            raise Http404(f"No policy with id {object_id!r}.")
        if not self.has_view_permission(request, policy):
            raise PermissionDenied
        change_url = reverse("admin:policies_policy_change", args=[quote(policy.pk)])
        if request.method != "POST" or "document" not in request.POST:
            # The draft comes with the edit form; without one there is nothing to run.
            return HttpResponseRedirect(change_url)
        carried = [
            (name, value)
            for name, values in request.POST.lists()
            if name not in _NOT_CARRIED
            for value in values
        ]
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": policy,
            "change_url": change_url,
            "carried": carried,
            "version_url": "",
        }
        try:
            draft = policy_draft(policy=policy, document=json.loads(request.POST["document"]))
        except json.JSONDecodeError as exc:
            errors = [f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."]
            draft = None
        except DomainError as exc:
            errors = [f"{error.path or '(document)'}: {error.detail}" for error in exc.errors]
            draft = None
        if draft is None:
            context.update(
                title=f"Simulate the draft of {policy.slug}",
                draft_errors=errors[:MAX_ERRORS_SHOWN],
            )
        else:
            form, result = _form_and_result(request, draft, bound=SIMULATE in request.POST)
            context.update(
                title=f"Simulate {draft}",
                draft=draft,
                draft_diff=_draft_diff(draft),
                draft_rules=rules_table_html(draft.document),
                rule_findings=policy_rule_findings(team=policy.team, document=draft.document),
                **_result_context(form, result),
            )
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/policies/policyversion/simulate.html", context)


def _draft_diff(draft: PolicyDraft) -> str:
    current = policy_active_version(policy=draft.policy)
    slug = draft.policy.slug
    return document_diff_html(
        current.document if current is not None else {},
        draft.document,
        old_label=f"{slug} v{current.number} (active)" if current is not None else "(none)",
        new_label=str(draft),
    )


def _form_and_result(
    request: HttpRequest, version: SimulatedVersion, *, bound: bool
) -> tuple[SimulatorForm, PlanSimulation | CallSimulation | None]:
    if not bound:
        return SimulatorForm(version=version, initial={"plan": starter_plan(version)}), None
    form = SimulatorForm(request.POST, version=version)
    return form, (_simulate(form, version) if form.is_valid() else None)


def _result_context(
    form: SimulatorForm, result: PlanSimulation | CallSimulation | None
) -> dict[str, Any]:
    return {
        "form": form,
        "result": result,
        "plan_result": result.plan if isinstance(result, CallSimulation) else result,
        "call_result": result if isinstance(result, CallSimulation) else None,
        "result_json": readable_json(result.as_json()) if result is not None else "",
    }


def _simulate(
    form: SimulatorForm, version: SimulatedVersion
) -> PlanSimulation | CallSimulation | None:
    member = form.cleaned_data["member"]
    try:
        if form.cleaned_data.get("tool"):
            return simulate_call(
                version=version,
                member=member,
                document=form.parsed_plan,
                tool=form.cleaned_data["tool"],
                args=form.parsed_args,
            )
        return simulate_plan(version=version, member=member, document=form.parsed_plan)
    except DomainError as exc:
        form.add_domain_error(exc)
        return None
