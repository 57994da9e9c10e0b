"""Admin for policies: the document edited as JSON, saving publishes version n+1.

Saving goes through ``policies.services.policy_set`` (what ``manage.py set_policy`` calls),
so the admin validates and numbers versions exactly like the command does; an edit is first
shown with what it would refuse among live plans (``admin_preview``). Versions are
read-only for everyone, with a diff against the version before (``admin_versions``).

It is in ``rehearsal`` with the preview and the simulator it offers, which judge plans: the
``policies`` app stays below ``plans`` (docs/decisions/0062).
"""

from __future__ import annotations

import json
from typing import cast

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Prefetch
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from guard.policy import policy_hash, policy_json_schema
from kernel.admin_base import PlangateModelAdmin
from kernel.admin_forms import ServiceModelForm, ServiceSavedAdmin
from kernel.admin_widgets import (
    JSONEditorWidget,
    admin_link,
    admin_links,
)
from kernel.json_format import readable_json
from kernel.problems import Code, DomainError
from members.models import Agent
from policies.models import Policy, PolicyVersion
from policies.references import policy_reference_warnings
from policies.selectors import policy_active_version, policy_shadow_version
from policies.services import ANY_BASE, policy_document_validate, policy_set

from . import admin_versions  # noqa: F401 (registers the versions' admin)
from .admin_preview import impact_preview_response
from .admin_shadow import shadow_marks, shadow_section
from .admin_simulator import DraftSimulatorMixin, simulate_draft_button, simulator_link
from .impact import PolicyImpact, policy_impact

STARTER_DOCUMENT = {
    "version": 1,
    "default": "deny",
    "rules": [{"name": "describe what this allows", "effect": "allow", "tools": ["tool_name"]}],
}
MAX_ERRORS_SHOWN = 50
#: the impact preview's "Back to editing" button
EDIT_AGAIN = "_edit_again"
#: set on a request whose save ``PolicyAdmin.save_model`` has answered with its message
SAVE_ANSWERED = "_plangate_policy_save_answered"


class PolicyForm(ServiceModelForm):
    """The document is text here; ``policy_set`` validates it and publishes, once."""

    document = forms.CharField(
        widget=JSONEditorWidget(policy_json_schema()),
        strip=False,
        help_text=(
            "The policy document (JSON). Saving publishes it as the next version; old "
            "versions never change. Running plans get it at their next refresh."
        ),
    )
    comment = forms.CharField(
        max_length=500,
        required=False,
        help_text="Optional: why this change. Kept with the version.",
        widget=forms.TextInput(attrs={"size": 80}),
    )

    publish_in_shadow = forms.BooleanField(
        required=False,
        label="Publish in shadow",
        help_text=(
            "Try it beside the active version first: plans and calls are also decided under "
            "it and the policy page counts where it would answer otherwise, but only the "
            "active version is enforced. Then promote or withdraw it in the Shadow section."
        ),
    )

    # The version the editor started from: saving over a version published meanwhile
    # (another admin, `set_policy`) would silently drop that change.
    base_version = forms.IntegerField(required=False, widget=forms.HiddenInput)

    # The hash of the document whose impact the admin saw and chose to publish (the
    # preview page's "Publish"): another text is shown first, never published unseen.
    publish_confirmed = forms.CharField(required=False, widget=forms.HiddenInput)

    #: who publishes; the admin sets it on the form class it builds for each request
    created_by = ""
    #: whether a changed document is first shown with its impact (editing a policy: yes)
    impact_first = False

    class Meta:
        model = Policy
        fields = ["team", "slug", "description"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.current = policy_active_version(policy=self.instance) if self.instance.pk else None
        text = readable_json(self.current.document if self.current else STARTER_DOCUMENT)
        self.fields["document"].initial = text
        # Tall enough to read the whole policy without scrolling the box, within reason.
        self.fields["document"].widget.attrs["rows"] = min(max(text.count("\n") + 3, 12), 48)
        self.fields["base_version"].initial = self.current.number if self.current else None
        self.parsed_document: object = None
        self.published_version: PolicyVersion | None = None
        #: the version published in shadow by this save
        self.shadow_published: PolicyVersion | None = None
        #: what the document would refuse, when it is held for the admin to review
        self.impact: PolicyImpact | None = None
        self.impact_hash = ""

    def clean_document(self) -> str:
        text = self.cleaned_data["document"]
        try:
            self.parsed_document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from exc
        return text

    @property
    def in_shadow(self) -> bool:
        return bool(self.cleaned_data.get("publish_in_shadow")) and self.instance.pk is not None

    def save_through_service(self) -> Policy:
        if self.in_shadow:
            # Nothing is enforced in shadow, so there is no impact to review first.
            previous = self.instance.shadow_version_id
            version = policy_set(
                team=self.instance.team,
                slug=self.instance.slug,
                document=self.parsed_document,
                comment=self.cleaned_data.get("comment", ""),
                created_by=self.created_by,
                description=self.instance.description,
                shadow=True,
            )
            if version.pk != previous:
                self.shadow_published = version
            return version.policy
        if self.impact_first and self.held_for_impact_review():
            return self.instance
        adding = self.instance._state.adding
        version = policy_set(
            team=self.instance.team,
            slug=self.instance.slug,
            document=self.parsed_document,
            comment=self.cleaned_data.get("comment", ""),
            created_by=self.created_by,
            description=self.instance.description,
            # A new policy has no version to have been overtaken.
            expected_base=ANY_BASE if adding else self.cleaned_data.get("base_version"),
        )
        if self.current is None or version.pk != self.current.pk:
            self.published_version = version
        return version.policy

    def held_for_impact_review(self) -> bool:
        """Whether the document is a change not yet confirmed: then nothing is published and
        ``impact`` says what it would refuse. A document published meanwhile, or one equal
        to the active version, goes on to ``policy_set``, which says so. "Back to editing"
        on the preview holds it too, showing the form with the text as it was."""
        current = self.current
        if EDIT_AGAIN in self.data:
            self.add_error(None, "Not published. Your text is kept below; save to review it again.")
            return True
        if current is None or self.cleaned_data.get("base_version") != current.number:
            return False
        digest = policy_hash(policy_document_validate(self.parsed_document))
        if digest in (current.hash, self.cleaned_data.get("publish_confirmed")):
            return False
        self.impact = policy_impact(policy=self.instance, document=self.parsed_document)
        self.impact_hash = digest
        self.add_error(None, "Review what this version would refuse, then publish it.")
        return True

    def add_domain_error(self, exc: DomainError) -> None:
        if any(error.path == "shadow" for error in exc.errors):
            self.add_error("publish_in_shadow", [error.detail for error in exc.errors])
            return
        if exc.code == Code.INVALID_POLICY:
            errors = [f"{error.path or '(document)'}: {error.detail}" for error in exc.errors]
            if len(errors) > MAX_ERRORS_SHOWN:
                errors = [
                    *errors[:MAX_ERRORS_SHOWN],
                    f"… and {len(errors) - MAX_ERRORS_SHOWN} more",
                ]
            self.add_error("document", errors or [exc.detail])
            return
        if any(error.path == "expected_base" for error in exc.errors):
            # Said once: the form now carries the newer number, so saving again publishes
            # over that version knowingly.
            current = policy_active_version(policy=self.instance)
            # A bound admin form's data is the request's (immutable) QueryDict.
            data = cast(QueryDict, self.data).copy()
            data[self.add_prefix("base_version")] = str(current.number if current else "")
            self.data = data
            self.add_error("document", [error.detail for error in exc.errors])
            return
        super().add_domain_error(exc)


@admin.register(Policy)
class PolicyAdmin(DraftSimulatorMixin, ServiceSavedAdmin, PlangateModelAdmin):
    form = PolicyForm
    list_display = ["slug", "team", "current_version", "agent_list", "description"]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["slug", "description"]
    list_select_related = ["team", "shadow_version"]
    ordering = ["team", "slug"]
    change_form_template = "admin/policies/policy/change_form.html"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .with_active_version()
            .annotate(agent_total=Count("agents"))
            .prefetch_related(
                Prefetch("agents", queryset=Agent.objects.only("id", "name", "policy_id"))
            )
        )

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [
                (None, {"fields": ["team", "slug", "description"]}),
                ("Document", {"fields": ["document", "comment"]}),
            ]
        return [
            (
                None,
                {
                    "fields": [
                        "team",
                        "slug",
                        "description",
                        "current_version",
                        "simulator",
                        "agents_using",
                    ]
                },
            ),
            (
                "Document: saving publishes the next version",
                {
                    "fields": [
                        "document",
                        # A draft is simulated by those who edit it (the form posts it).
                        *(["draft_simulator"] if self.has_change_permission(request, obj) else []),
                        "comment",
                        *(
                            ["publish_in_shadow"]
                            if self.has_change_permission(request, obj)
                            else []
                        ),
                        "base_version",
                    ]
                },
            ),
            ("Version history", {"fields": ["version_history"]}),
        ]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        # The slug is the policy's id in API responses and in `set_policy`.
        return [
            "team",
            "slug",
            "current_version",
            "simulator",
            "draft_simulator",
            "agents_using",
            "version_history",
        ]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # versions are kept: tokens and plans point at them

    @admin.display(description="current version", ordering="active_version_number")
    def current_version(self, policy: Policy) -> str:
        number = getattr(policy, "active_version_number", None)
        version_id = getattr(policy, "active_version_id", None)
        if number is None:
            version = policy_active_version(policy=policy)
            if version is None:
                return "none published"
            number, version_id = version.number, version.pk
        url = reverse("admin:policies_policyversion_change", args=[version_id])
        shown = format_html('<a href="{}">v{}</a>', url, number)
        shadow = policy.shadow_version
        if shadow is None:
            return shown
        return format_html(
            '{} <span class="plangate-badge warn">shadow {}</span>',
            shown,
            admin_link(shadow, f"v{shadow.number}"),
        )

    @admin.display(description="simulator")
    def simulator(self, policy: Policy) -> str:
        return simulator_link(policy_active_version(policy=policy))

    @admin.display(description="simulate the draft")
    def draft_simulator(self, policy: Policy) -> str:
        return simulate_draft_button(policy)

    @admin.display(description="agents")
    def agent_list(self, policy: Policy) -> str:
        return admin_links(policy.agents.all(), empty="none")

    @admin.display(description="agents using it")
    def agents_using(self, policy: Policy) -> str:
        return admin_links(policy.agents.order_by("name"), empty="No agent uses this policy.")

    @admin.display(description="versions")
    def version_history(self, policy: Policy) -> str:
        versions = list(policy.versions.order_by("-number"))
        marks = shadow_marks(policy, versions)
        rows = format_html_join(
            "",
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            (
                (
                    admin_link(version, f"v{version.number}"),
                    format_html(' <span class="plangate-badge warn">{}</span>', marks[version.pk])
                    if version.pk in marks
                    else "",
                    f"{version.created_at:%Y-%m-%d %H:%M} UTC",
                    version.created_by or "—",
                    version.comment or "—",
                    version.hash[:16],
                )
                for version in versions
            ),
        )
        return format_html(
            '<table class="plangate-table"><thead><tr><th>version</th><th>published</th>'
            "<th>by</th><th>comment</th><th>hash</th></tr></thead><tbody>{}</tbody></table>"
            '<p class="help">Open a version to see what changed from the one before.</p>',
            rows,
        )

    def get_form(self, request: HttpRequest, obj=None, change=False, **kwargs):
        # A subclass of self.form, PolicyForm, built for this request.
        form = cast(type[PolicyForm], super().get_form(request, obj, change=change, **kwargs))
        form.created_by = request.user.get_username()
        # A new policy has no agent, so no plan: only edits are previewed.
        form.impact_first = obj is not None
        return form

    def changeform_view(
        self, request: HttpRequest, object_id=None, form_url: str = "", extra_context=None
    ) -> HttpResponse:
        # The form wrote nothing when it held the document for review (and its transaction
        # was rolled back, the description included): show the impact instead.
        response = super().changeform_view(request, object_id, form_url, extra_context)
        adminform = (getattr(response, "context_data", None) or {}).get("adminform")
        form = getattr(adminform, "form", None)
        if isinstance(form, PolicyForm) and form.impact is not None:
            return impact_preview_response(self, request, form)
        return response

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context["shadow"] = shadow_section(request, obj)
        return super().render_change_form(request, context, add, change, form_url, obj)

    def save_model(self, request: HttpRequest, obj: Policy, form: PolicyForm, change: bool) -> None:
        # The form's policy_set published (or found the document unchanged); say which, as
        # the one message of the save (``message_user`` leaves out Django's own).
        version = form.published_version
        if form.in_shadow:
            self._answer_shadow_save(request, obj, form)
            return
        if version is None:
            # Unchanged means equal to the active version, so there is one.
            current = cast(PolicyVersion, form.current)
            saved = "Saved the description. " if "description" in form.changed_data else ""
            self.message_user(
                request,
                f"{saved}The document is the same as version {current.number}: no version "
                f"was published, and version {current.number} stays active.",
            )
        else:
            self.message_user(
                request,
                f"Published {obj.slug} version {version.number}. Agents using it get it with "
                "their next plan or refresh.",
            )
        setattr(request, SAVE_ANSWERED, True)
        published = version or form.current
        assert published is not None
        for warning in policy_reference_warnings(team=obj.team, document=published.document):
            self.message_user(
                request,
                f"{warning}: the rule matches no member until the team has it.",
                messages.WARNING,
            )

    def _answer_shadow_save(self, request: HttpRequest, obj: Policy, form: PolicyForm) -> None:
        shadow = form.shadow_published or policy_shadow_version(policy=obj)
        assert shadow is not None  # published now, or the same document as the shadow's
        active = policy_active_version(policy=obj)
        stays = f" Version {active.number} stays active." if active else ""
        if form.shadow_published is None:
            self.message_user(
                request,
                f"The document is the same as shadow version {shadow.number}: nothing was "
                f"published.{stays}",
            )
        else:
            self.message_user(
                request,
                f"Published {obj.slug} version {shadow.number} in shadow: decided under beside "
                f"the active version and never enforced.{stays}",
            )
        setattr(request, SAVE_ANSWERED, True)
        for warning in policy_reference_warnings(team=obj.team, document=shadow.document):
            self.message_user(
                request,
                f"{warning}: the rule matches no member until the team has it.",
                messages.WARNING,
            )

    def message_user(self, request: HttpRequest, message, level=messages.INFO, *args, **kwargs):
        # After a save, Django adds "The policy “x” was changed successfully.", which said
        # "changed" of a document that was not (next to save_model's own answer).
        if level == messages.SUCCESS and getattr(request, SAVE_ANSWERED, False):
            return
        super().message_user(request, message, level, *args, **kwargs)

    def construct_change_message(self, request, form: forms.Form, formsets, add=False):
        version = cast(PolicyForm, form).published_version  # self.form is PolicyForm
        shadow = cast(PolicyForm, form).shadow_published
        parts = []
        if shadow is not None:
            parts.append(
                f"Published version {shadow.number} in shadow"
                + (f": {shadow.comment}" if shadow.comment else "")
                + "."
            )
        elif cast(PolicyForm, form).in_shadow:
            parts.append("Document unchanged: no version published in shadow.")
        elif version is not None:
            parts.append(
                f"Published version {version.number}"
                + (f": {version.comment}" if version.comment else "")
                + "."
            )
        else:
            parts.append("Document unchanged: no version published.")
        if not add and "description" in form.changed_data:
            parts.append("Changed the description.")
        return " ".join(parts)
