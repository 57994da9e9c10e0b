"""System checks of the single sign-on settings: a bad role map or a missing client is
reported at start-up, not at someone's first sign-in."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from .oidc import oidc_enabled, role_map


@register()
def single_sign_on_settings(app_configs: Any, **kwargs: Any) -> list[Error]:
    if not oidc_enabled():
        return []
    errors = []
    if not settings.OIDC_RP_CLIENT_ID or not settings.OIDC_RP_CLIENT_SECRET:
        errors.append(
            Error(
                "OIDC_ISSUER is set without OIDC_CLIENT_ID and OIDC_CLIENT_SECRET.",
                id="identity.E001",
            )
        )
    try:
        if not role_map():
            errors.append(
                Error("OIDC_ROLE_MAP is empty: nobody could sign in.", id="identity.E002")
            )
    except ImproperlyConfigured as error:
        errors.append(Error(str(error), id="identity.E003"))
    return errors
