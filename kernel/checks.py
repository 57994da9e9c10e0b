"""System checks of the project-wide settings. The signing-key, token and schedule checks
(plangate.E001-E003) live with the app that owns them, in plans/checks.py."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured

from .ratelimit import rate_parse


@register()
def check_rate_limits(app_configs, **kwargs) -> list[Error]:
    errors = []
    for name in ("PLANGATE_RATE_LIMIT", "PLANGATE_AUTH_FAILURE_LIMIT"):
        try:
            rate_parse(getattr(settings, name))
        except ImproperlyConfigured as exc:
            errors.append(Error(f"{name}: {exc}", id="plangate.E004"))
    return errors
