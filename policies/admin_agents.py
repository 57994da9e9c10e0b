"""Admin for agents and their API keys.

An API key is created only through ``api_key_create`` and its plaintext is shown once, on
the page answering the form that created it; nothing stores or logs it. ``policies.admin``
imports this module, so admin autodiscovery registers it; it lives in ``policies`` because
an agent's page shows its policy's active version (docs/decisions/0062).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from kernel.admin_actions import (
    OneTimeFormToken,
    confirm_action,
    object_action_allowed,
)
from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions
from kernel.admin_credentials import RevocableCredentialAdmin
from kernel.admin_forms import ServiceSavedAdmin
from kernel.admin_secrets import shown_once_view
from kernel.admin_widgets import datetime_column
from members.forms import AgentForm
from members.models import Agent, ApiKey, ApiKeyQuerySet
from members.services import api_key_create, api_key_revoke
from teams.models import running_agents_stop_within

from .models import ActiveVersionAnnotations, active_version_annotations

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class AgentRow(ActiveVersionAnnotations):
    """What AgentAdmin.get_queryset annotates each agent with."""

    usable_keys: int


class ApiKeyInline(ReadOnlyPermissions, admin.TabularInline):
    model = ApiKey
    extra = 0
    can_delete = False
    fields: ClassVar[tuple[str, ...]] = (
        "prefix",
        "name",
        "created",
        "last_used",
        "expires",
        "state",
        "revoke",
    )
    readonly_fields = fields
    created = datetime_column("created_at", "created")
    last_used = datetime_column("last_used_at", "last used")
    expires = datetime_column("expires_at", "expires")
    ordering = ["-created_at"]
    verbose_name_plural = "API keys (the secret is shown once, when created)"

    def get_fields(self, request: HttpRequest, obj=None):
        # The "Revoke…" column only for those who may revoke: the same check as the 403.
        fields = list(super().get_fields(request, obj))
        if not object_action_allowed(request, ApiKey, "revoke_api_keys"):
            fields.remove("revoke")
        return fields

    @admin.display(description="prefix")
    def prefix(self, api_key: ApiKey) -> str:
        return format_html("<code>{}</code>", api_key.prefix)

    @admin.display(description="state")
    def state(self, api_key: ApiKey) -> str:
        return api_key.state()

    @admin.display(description="")
    def revoke(self, api_key: ApiKey) -> str:
        if api_key.is_revoked():
            return ""
        url = reverse("admin:members_apikey_revoke_api_keys", args=[api_key.pk])
        agent_url = reverse("admin:members_agent_change", args=[quote(api_key.agent_id)])
        return format_html('<a href="{}?{}">Revoke…</a>', url, urlencode({"next": agent_url}))


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        max_length=200, required=False, help_text="What the key is for, e.g. “CI runner”."
    )
    expires_at = forms.DateTimeField(
        required=False,
        label="Expires at",
        help_text="Optional, UTC, e.g. 2027-01-31 18:00. Empty: the key never expires.",
        widget=forms.DateTimeInput(attrs={"placeholder": "YYYY-MM-DD HH:MM"}),
    )

    def clean_expires_at(self):
        expires_at = self.cleaned_data["expires_at"]
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return expires_at


API_KEY_FORM_TOKEN = OneTimeFormToken("api-key-create")


@admin.register(Agent)
class AgentAdmin(ServiceSavedAdmin, PlangateModelAdmin):
    form = AgentForm
    list_display = [
        "name",
        "team",
        "policy",
        "active_version",
        "is_active",
        "key_count",
        "created",
    ]
    list_filter = [
        "is_active",
        ("policy", admin.RelatedOnlyFieldListFilter),
        ("team", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["name", "=id"]
    list_select_related = ["team", "policy"]
    autocomplete_fields = ["policy"]
    inlines = [ApiKeyInline]
    ordering = ["team", "name"]
    created = datetime_column("created_at", "created")
    actions = ["create_api_key"]
    change_form_template = "admin/members/agent/change_form.html"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                **active_version_annotations("policy_id"),
                usable_keys=Count(
                    "api_keys",
                    filter=ApiKeyQuerySet.usable_condition(timezone.now(), through="api_keys"),
                ),
            )
        )

    def get_fields(self, request, obj=None):
        fields = ["team", "name", "policy", "is_active", "accepts_delegations"]
        return fields + (["id", "created_at"] if obj else [])

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if "is_active" in form.base_fields:
            # A class-level form is shared: the help text goes on a copy of the field.
            field = form.base_fields["is_active"] = copy.copy(form.base_fields["is_active"])
            bound = obj.team.revocation_bound_seconds if obj is not None else None
            field.help_text = (
                "Untick to disable the agent: no plan or refresh is signed for it, and its "
                f"{running_agents_stop_within([bound])} (their calls are agent_disabled)."
            )
        return form

    def get_readonly_fields(self, request, obj=None):
        # An agent keeps its team: its plans and keys were issued there.
        return ["id", "created_at", "team"] if obj else []

    @admin.display(description="active policy version")
    def active_version(self, agent: WithAnnotations[Agent, AgentRow]) -> str:
        if agent.active_version_id is None:
            return "none published"
        url = reverse("admin:policies_policyversion_change", args=[agent.active_version_id])
        return format_html('<a href="{}">v{}</a>', url, agent.active_version_number)

    @admin.display(description="usable keys", ordering="usable_keys")
    def key_count(self, agent: WithAnnotations[Agent, AgentRow]) -> int:
        return agent.usable_keys

    def has_add_key_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm("members.add_apikey")

    @admin.action(description="Create an API key for the selected agent", permissions=["add_key"])
    def create_api_key(self, request: HttpRequest, queryset):
        agents = list(queryset[:2])
        if len(agents) != 1:
            self.message_user(
                request, "Select exactly one agent to create an API key for.", messages.WARNING
            )
            return None
        return HttpResponseRedirect(
            reverse("admin:members_agent_create_api_key", args=[quote(agents[0].pk)])
        )

    def get_urls(self):
        return [
            path(
                "<path:object_id>/api-keys/new/",
                self.admin_site.admin_view(self.api_key_create_view),
                name="members_agent_create_api_key",
            ),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["can_create_api_key"] = obj is not None and self.has_add_key_permission(request)
        return super().render_change_form(request, context, add, change, form_url, obj)

    def api_key_create_view(self, request: HttpRequest, object_id: str):
        agent = self.get_object(request, unquote(object_id))
        if agent is None:
            raise Http404(f"No agent with id {object_id!r}.")
        if not self.has_add_key_permission(request):
            raise PermissionDenied
        agent_url = reverse("admin:members_agent_change", args=[quote(agent.pk)])

        def create(data: dict[str, Any]) -> tuple[ApiKey, str]:
            api_key, plaintext = api_key_create(
                agent=agent, name=data["name"], expires_at=data["expires_at"]
            )
            self.log_addition(request, api_key, f"Created API key {api_key.prefix}.")
            self.log_change(request, agent, f"Created API key {api_key.prefix}.")
            return api_key, plaintext

        return shown_once_view(
            self,
            request,
            form=ApiKeyCreateForm(request.POST if request.method == "POST" else None),
            form_token=API_KEY_FORM_TOKEN,
            credential_name="API key",
            create=create,
            form_template="admin/members/agent/api_key_create.html",
            created_template="admin/members/agent/api_key_created.html",
            context={
                "title": f"Create an API key for {agent.name}",
                "original": agent,
                "back_url": agent_url,
                "submit_label": "Create API key",
            },
            created_context=lambda api_key: {
                "title": f"API key for {agent.name}",
                "api_key": api_key,
                "back_label": f"Done, back to {agent.name}",
            },
        )


class ApiKeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked"), ("expired", "expired")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.usable(timezone.now())
        if self.value() == "revoked":
            return queryset.revoked()
        if self.value() == "expired":
            return queryset.expired(timezone.now())
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyPermissions, RevocableCredentialAdmin, PlangateModelAdmin):
    """Browsable and revocable; created only from the agent's page ("Create API key" shows
    the secret once), never edited; revoked keys stay, for the record."""

    list_display = [
        "prefix_shown",
        "name",
        "agent",
        "created",
        "last_used",
        "expires",
        "revoked",
        "state",
    ]
    list_filter = [ApiKeyStateFilter, ("agent", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["lookup_id", "name", "agent__name"]
    list_select_related = ["agent"]
    fields: ClassVar[tuple[str, ...]] = (
        "prefix_shown",
        "name",
        "agent",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke_api_keys"]
    object_actions = {"revoke_api_keys": "Revoke this key"}
    expires = datetime_column("expires_at", "expires")
    revoked = datetime_column("revoked_at", "revoked")

    def has_revoke_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm("members.change_apikey")

    @admin.display(description="state")
    def state(self, api_key: ApiKey) -> str:
        return api_key.state()

    @admin.action(description="Revoke selected API keys", permissions=["revoke"])
    def revoke_api_keys(self, request: HttpRequest, queryset, next_url: str = ""):
        queryset = queryset.select_related("agent")
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_api_keys",
            next_url=next_url,
            title="Revoke API keys",
            question=(
                "Revoke these API keys? Every request made with them is refused from now on, "
                "and the guards that hold them block every further call as agent_disabled: "
                + running_agents_stop_within(
                    queryset.values_list("agent__team__revocation_bound_seconds", flat=True)
                )
                + "."
            ),
            button="Yes, revoke",
            warning="This cannot be undone: the agent needs a new key.",
        )
        if confirmation is not None:
            return confirmation

        def revoke(api_key: ApiKey) -> bool:
            api_key_revoke(api_key=api_key)
            self.log_change(request, api_key, "Revoked.")
            self.log_change(request, api_key.agent, f"Revoked API key {api_key.prefix}.")
            return True

        return self.credentials_revoke(request, queryset, revoke=revoke, plural="keys")
