"""Admin for audit tokens: superusers only. A token is created from "Add audit token" and
its plaintext shown once, on the page answering the form; it can then only be revoked.

Team admins and auditors neither see nor create tokens here (no group holds their
permissions, and every check below asks for a superuser): a token reads a whole team's
trail from outside the admin, so handing one out is an operator's decision. Creating and
revoking one is recorded in the team's activity log, which auditors do read.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from kernel.admin_base import PlangateModelAdmin
from kernel.admin_credentials import SuperuserTokenAdmin
from teams.models import Team

from .models import AuditToken
from .tokens import audit_token_create, audit_token_revoke


class AuditTokenCreateForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("slug"), to_field_name="slug")
    name = forms.CharField(
        max_length=200, required=False, help_text="What the token is for, e.g. “SIEM”."
    )


@admin.register(AuditToken)
class AuditTokenAdmin(SuperuserTokenAdmin, PlangateModelAdmin):
    noun = "audit token"
    form_class = AuditTokenCreateForm
    form_template = "admin/audit/audittoken/create.html"
    created_template = "admin/audit/audittoken/created.html"

    def token_create(self, data: dict[str, Any]) -> tuple[AuditToken, str]:
        return audit_token_create(team=data["team"], name=data["name"])

    def token_revoke(self, token: AuditToken) -> bool:
        return audit_token_revoke(token=token)
