"""The admin's "create a secret, show it once" pages (API keys, audit tokens).

The form page carries a one-time token (``OneTimeFormToken``) so a resubmitted or replayed
form creates nothing; the page that shows the secret is never cached. Templates extend
``admin/plangate/secret_create.html`` and ``admin/plangate/secret_created.html``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import router, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from .admin_actions import OneTimeFormToken


def shown_once_view(
    model_admin: admin.ModelAdmin,
    request: HttpRequest,
    *,
    form: forms.Form,
    form_token: OneTimeFormToken,
    credential_name: str,
    create: Callable[[dict[str, Any]], tuple[Any, str]],
    form_template: str,
    created_template: str,
    context: Mapping[str, Any],
    created_context: Callable[[Any], Mapping[str, Any]],
) -> HttpResponse:
    """The form, or, on a valid first submission, the secret ``create`` made.

    ``create(cleaned_data)`` calls the service (and logs) inside one transaction and
    returns ``(object, plaintext)``. ``context`` holds the page's ``title``, ``back_url``
    and what its template reads; ``created_context(object)`` the shown page's ``title``,
    ``back_label`` and the rest.
    """
    base = {**model_admin.admin_site.each_context(request), "opts": model_admin.opts, **context}
    if request.method == "POST" and form.is_valid():
        if not form_token.consume(request, request.POST.get("once")):
            model_admin.message_user(
                request,
                f"That form was already used. The {credential_name} is shown only once, when it "
                "is created; create another one if it was lost.",
                messages.WARNING,
            )
            return HttpResponseRedirect(context["back_url"])
        with transaction.atomic(using=router.db_for_write(model_admin.model)):
            created, plaintext = create(form.cleaned_data)
        response = TemplateResponse(
            request,
            created_template,
            {
                **base,
                "plaintext": plaintext,
                "credential_name": credential_name,
                **created_context(created),
            },
        )
        # Shown once: no cache, no history copy, no back-button replay from cache.
        response["Cache-Control"] = "no-store"
        return response
    return TemplateResponse(
        request, form_template, {**base, "form": form, "once": form_token.issue(request)}
    )
