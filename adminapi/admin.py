"""Admin for admin API tokens: superusers only, as audit tokens (audit.admin_tokens). A token
is created from "Add admin token" and its plaintext shown once, on the page answering the
form; it can then only be revoked. Creating and revoking one is recorded in the team's
activity log."""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from kernel.admin_actions import OneTimeFormToken, confirm_action
from kernel.admin_base import PlangateModelAdmin
from kernel.admin_credentials import RevocableCredentialAdmin
from kernel.admin_secrets import shown_once_view
from teams.models import Team

from .models import AdminToken
from .tokens import admin_token_create, admin_token_revoke

ADMIN_TOKEN_FORM_TOKEN = OneTimeFormToken("admin-token-create")


class AdminTokenCreateForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("slug"), to_field_name="slug")
    name = forms.CharField(
        max_length=200, required=False, help_text="What the token is for, e.g. “policy CI”."
    )
    can_write = forms.BooleanField(
        label="Read and write",
        required=False,
        help_text="Unticked: the token reads, previews and simulates only.",
    )
    user = forms.ModelChoiceField(
        queryset=get_user_model()
        .objects.filter(is_active=True, is_staff=True)
        .order_by("username"),
        required=False,
        help_text="The person the token decides approvals as (the queue's rules apply to "
        "them). Empty: it cannot decide approvals.",
    )


def _is_superuser(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


@admin.register(AdminToken)
class AdminTokenAdmin(RevocableCredentialAdmin, PlangateModelAdmin):
    list_display = [
        "prefix_shown",
        "name",
        "team",
        "scope_shown",
        "user",
        "created",
        "created_by",
        "last_used",
        "state",
    ]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter), "can_write"]
    search_fields = ["lookup_id", "name"]
    list_select_related = ["team", "user"]
    fields: ClassVar[tuple[str, ...]] = (
        "prefix_shown",
        "name",
        "team",
        "can_write",
        "user",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke_admin_tokens"]
    object_actions = {"revoke_admin_tokens": "Revoke this token"}

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_superuser(request)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return _is_superuser(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_superuser(request)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest, obj=None) -> bool:
        return _is_superuser(request)

    @admin.display(description="scope")
    def scope_shown(self, token: AdminToken) -> str:
        return token.scope

    @admin.display(description="state")
    def state(self, token: AdminToken) -> str:
        state = "revoked" if token.is_revoked() else "active"
        return format_html('<span class="plangate-badge {}">{}</span>', state, state)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied

        def create(data: dict[str, Any]) -> tuple[AdminToken, str]:
            token, plaintext = admin_token_create(
                team=data["team"],
                name=data["name"],
                can_write=data["can_write"],
                user=data["user"],
            )
            self.log_addition(request, token, f"Created admin token {token.prefix}.")
            return token, plaintext

        return shown_once_view(
            self,
            request,
            form=AdminTokenCreateForm(request.POST if request.method == "POST" else None),
            form_token=ADMIN_TOKEN_FORM_TOKEN,
            credential_name="token",
            create=create,
            form_template="admin/adminapi/admintoken/create.html",
            created_template="admin/adminapi/admintoken/created.html",
            context={
                "title": "Create an admin token",
                "back_url": reverse("admin:adminapi_admintoken_changelist"),
                "submit_label": "Create admin token",
            },
            created_context=lambda token: {
                "title": f"Admin token for {token.team.slug}",
                "token": token,
                "back_label": "Done, back to the admin tokens",
            },
        )

    @admin.action(description="Revoke selected admin tokens", permissions=["revoke"])
    def revoke_admin_tokens(self, request: HttpRequest, queryset, next_url: str = ""):
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_admin_tokens",
            next_url=next_url,
            title="Revoke admin tokens",
            question="Revoke these admin tokens? Every request made with them is refused "
            "from now on.",
            button="Yes, revoke",
            warning="This cannot be undone: the scripts that use them need a new token.",
        )
        if confirmation is not None:
            return confirmation

        def revoke(token: AdminToken) -> bool:
            if not admin_token_revoke(token=token):
                return False
            self.log_change(request, token, "Revoked.")
            return True

        return self.credentials_revoke(request, queryset, revoke=revoke, plural="tokens")
