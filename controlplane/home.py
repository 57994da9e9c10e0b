"""The page at ``/``: what this server is and where its doors are, for a person who typed
its address (and the admin's "View site"). Reads settings only."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET


@require_GET
def home(request: HttpRequest) -> TemplateResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Plangate control plane",
        "is_nav_sidebar_enabled": False,
        "issuer": settings.PLANGATE_ISSUER,
    }
    return TemplateResponse(request, "plangate/home.html", context)
