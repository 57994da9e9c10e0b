"""SCIM tokens in the console: superusers only (kernel.admin_credentials.SuperuserTokenAdmin):
created from "Add SCIM token", shown once, then only revoked."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from kernel.admin_base import PlangateModelAdmin
from kernel.admin_credentials import SuperuserTokenAdmin
from teams.models import Team

from .models import ScimToken
from .tokens import scim_token_create, scim_token_revoke


class ScimTokenCreateForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("slug"), to_field_name="slug")
    name = forms.CharField(
        max_length=200, required=False, help_text="The identity provider, e.g. “Okta”."
    )


@admin.register(ScimToken)
class ScimTokenAdmin(SuperuserTokenAdmin, PlangateModelAdmin):
    noun = "SCIM token"
    form_class = ScimTokenCreateForm
    form_template = "admin/directory/scimtoken/create.html"
    created_template = "admin/directory/scimtoken/created.html"

    def token_create(self, data: dict[str, Any]) -> tuple[ScimToken, str]:
        return scim_token_create(team=data["team"], name=data["name"])

    def token_revoke(self, token: ScimToken) -> bool:
        return scim_token_revoke(token=token)
