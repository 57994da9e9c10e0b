"""Admin for audit tokens: superusers only. A token is created from "Add audit token" and
its plaintext shown once, on the page answering the form; it can then only be revoked.

Team admins and auditors neither see nor create tokens here (no group holds their
permissions, and every check below asks for a superuser): a token reads a whole team's
trail from outside the admin, so handing one out is an operator's decision. Creating and
revoking one is recorded in the team's activity log, which auditors do read.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from kernel.admin_actions import OneTimeFormToken, confirm_action
from kernel.admin_base import PlangateModelAdmin
from kernel.admin_credentials import RevocableCredentialAdmin
from kernel.admin_secrets import shown_once_view
from teams.models import Team

from .models import AuditToken
from .tokens import audit_token_create, audit_token_revoke

AUDIT_TOKEN_FORM_TOKEN = OneTimeFormToken("audit-token-create")


class AuditTokenCreateForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("slug"), to_field_name="slug")
    name = forms.CharField(
        max_length=200, required=False, help_text="What the token is for, e.g. “SIEM”."
    )


def _is_superuser(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


@admin.register(AuditToken)
class AuditTokenAdmin(RevocableCredentialAdmin, PlangateModelAdmin):
    list_display = [
        "prefix_shown",
        "name",
        "team",
        "created",
        "created_by",
        "last_used",
        "state",
    ]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["lookup_id", "name"]
    list_select_related = ["team"]
    fields: ClassVar[tuple[str, ...]] = (
        "prefix_shown",
        "name",
        "team",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ["revoke_audit_tokens"]
    object_actions = {"revoke_audit_tokens": "Revoke this token"}

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

    @admin.display(description="state")
    def state(self, token: AuditToken) -> str:
        state = "revoked" if token.is_revoked() else "active"
        return format_html('<span class="plangate-badge {}">{}</span>', state, state)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied

        def create(data: dict[str, Any]) -> tuple[AuditToken, str]:
            token, plaintext = audit_token_create(team=data["team"], name=data["name"])
            self.log_addition(request, token, f"Created audit token {token.prefix}.")
            return token, plaintext

        return shown_once_view(
            self,
            request,
            form=AuditTokenCreateForm(request.POST if request.method == "POST" else None),
            form_token=AUDIT_TOKEN_FORM_TOKEN,
            credential_name="token",
            create=create,
            form_template="admin/audit/audittoken/create.html",
            created_template="admin/audit/audittoken/created.html",
            context={
                "title": "Create an audit token",
                "back_url": reverse("admin:audit_audittoken_changelist"),
                "submit_label": "Create audit token",
            },
            created_context=lambda token: {
                "title": f"Audit token for {token.team.slug}",
                "token": token,
                "back_label": "Done, back to the audit tokens",
            },
        )

    @admin.action(description="Revoke selected audit tokens", permissions=["revoke"])
    def revoke_audit_tokens(self, request: HttpRequest, queryset, next_url: str = ""):
        confirmation = confirm_action(
            self,
            request,
            queryset,
            action="revoke_audit_tokens",
            next_url=next_url,
            title="Revoke audit tokens",
            question="Revoke these audit tokens? Every request made with them is refused "
            "from now on.",
            button="Yes, revoke",
            warning="This cannot be undone: the tool that reads the trail needs a new token.",
        )
        if confirmation is not None:
            return confirmation

        def revoke(token: AuditToken) -> bool:
            if not audit_token_revoke(token=token):
                return False
            self.log_change(request, token, "Revoked.")
            return True

        return self.credentials_revoke(request, queryset, revoke=revoke, plural="tokens")
