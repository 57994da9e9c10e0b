"""Admin forms whose save is a service call, so the console keeps the rules the commands
keep: the service validates and writes, and its DomainError becomes form errors at the
fields its paths name. Each app's forms say which service saves them (members/forms.py)."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin
from django.db import router, transaction
from django.db.models import Model
from django.http import HttpRequest, HttpResponse

from kernel.problems import DomainError


class ServiceModelForm(forms.ModelForm):
    """Django's own checks run first (field types, choices, unique constraints); then, if they
    pass, ``save_through_service`` writes, and its refusals are shown at the fields they
    name. The write happens while the admin validates the form, inside the admin's
    transaction; ``ServiceSavedAdmin`` undoes it when the page is shown again instead."""

    def save_through_service(self) -> Model:
        raise NotImplementedError

    # A private BaseModelForm hook (run after clean()); the stubs leave it out.
    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]
        if self.errors:
            return
        try:
            self.instance = self.save_through_service()
        except DomainError as exc:
            self.add_domain_error(exc)

    def add_domain_error(self, exc: DomainError) -> None:
        if not exc.errors:
            self.add_error(None, exc.detail)
        for error in exc.errors:
            self.add_error(self.field_for_path(error.path), error.detail)

    def field_for_path(self, path: str) -> str | None:
        """The form field an error path starts with, or None (shown above the form)."""
        name = re.split(r"[.\[]", path, maxsplit=1)[0]
        return name if name in self.fields else None


class ServiceSavedAdmin(admin.ModelAdmin):
    """For a ModelAdmin whose form is a ServiceModelForm: the form already saved the object.

    Listed before the project's admin base, so its methods come first."""

    # Typed as loosely as ModelAdmin.save_model, so an admin can name its model and form.
    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        pass

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets, change: bool):
        # The service set the many-to-many fields; only the inlines are left.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def changeform_view(
        self, request: HttpRequest, object_id=None, form_url: str = "", extra_context=None
    ) -> HttpResponse:
        with transaction.atomic(using=router.db_for_write(self.model)):
            response = super().changeform_view(request, object_id, form_url, extra_context)
            context: dict[str, Any] = getattr(response, "context_data", None) or {}
            if request.method == "POST" and context.get("errors"):
                # Shown again with errors (an inline's, say, after the form's service
                # wrote): a refused request writes nothing.
                transaction.set_rollback(True)
        return response
