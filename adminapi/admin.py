"""Admin API tokens in the console: superusers only, as audit tokens. A token is created
from "Add admin token" and its plaintext shown once, on the page answering the form; it can
then only be revoked (kernel.admin_credentials.SuperuserTokenAdmin). Creating and revoking
one is recorded in the team's activity log."""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model

from kernel.admin_base import PlangateModelAdmin
from kernel.admin_credentials import SuperuserTokenAdmin
from teams.models import Team

from .models import AdminToken
from .tokens import admin_token_create, admin_token_revoke


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


@admin.register(AdminToken)
class AdminTokenAdmin(SuperuserTokenAdmin, PlangateModelAdmin):
    noun = "admin token"
    form_class = AdminTokenCreateForm
    form_template = "admin/adminapi/admintoken/create.html"
    created_template = "admin/adminapi/admintoken/created.html"
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

    @admin.display(description="scope")
    def scope_shown(self, token: AdminToken) -> str:
        return token.scope

    def token_create(self, data: dict[str, Any]) -> tuple[AdminToken, str]:
        return admin_token_create(
            team=data["team"], name=data["name"], can_write=data["can_write"], user=data["user"]
        )

    def token_revoke(self, token: AdminToken) -> bool:
        return admin_token_revoke(token=token)
