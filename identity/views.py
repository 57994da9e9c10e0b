"""The single sign-on doors: the start of the code flow (mozilla-django-oidc's view, the
authorization endpoint from discovery) and the password login's refusal when it is off."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.http import Http404, HttpResponseRedirect
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from .oidc import DiscoveryFailed, oidc_enabled, oidc_setting

security_logger = logging.getLogger("plangate.security")


class SingleSignOnStart(OIDCAuthenticationRequestView):
    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request):  # type: ignore[no-untyped-def]
        if not oidc_enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except DiscoveryFailed as error:
            # The provider is down or misconfigured: back to the sign-in page, not a 500.
            security_logger.warning("single sign-on unavailable: %s", error)
            return HttpResponseRedirect(settings.LOGIN_REDIRECT_URL_FAILURE)
        self.OIDC_RP_CLIENT_ID = oidc_setting("OIDC_RP_CLIENT_ID")
        return super().get(request)
