"""DRF authentication by ``Authorization: Bearer pg_...``, a limit on failed attempts per
client address, and a rate limit per API key. Both limits count in kernel.ratelimit,
exactly, across every worker process.

The refusals decided here are counted, per day and code, in the audit trail's
UnattributedRefusal, never stored one by one: a request with no usable key names no agent
(anyone on the network can send them), and a flood of throttled requests must not fill a
team's trail. Refusals of a known agent past this point are the views' to record.
"""

from __future__ import annotations

import logging
from typing import cast

from django.db import transaction
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.request import Request

from audit.services import unattributed_refusal_count
from kernel.bearer import (  # noqa: F401  (AUTH_FAILURE_SCOPE, client_address: imported from here by others)
    AUTH_FAILURE_SCOPE,
    BearerAuthentication,
    CredentialRateThrottle,
    client_address,
)
from kernel.problems import Code, DomainError

from .models import Agent, ApiKey
from .services import api_key_authenticate

logger = logging.getLogger(__name__)


def refusal_count(code: Code) -> None:
    """Count one refusal that is not stored (see the module's docstring). A failure to count
    is logged: the client is refused either way, never answered a server error instead."""
    try:
        with transaction.atomic():
            unattributed_refusal_count(code=code)
    except Exception:
        logger.exception("could not count a refused request (%s)", code)


def request_agent(request: Request) -> Agent:
    """The calling agent of a view authenticated by ApiKeyAuthentication.

    DRF types ``request.user`` as Django's user; on these views it is the Agent that
    ``ApiKeyAuthentication.authenticate`` returned, and IsAuthenticated has refused the rest.
    """
    return cast(Agent, request.user)


def request_api_key(request: Request) -> ApiKey | None:
    """The ApiKey the calling agent authenticated with (None when unauthenticated)."""
    return cast(ApiKey | None, request.auth)


class ApiKeyAuthentication(BearerAuthentication):
    """Authenticates an agent. ``request.user`` is the Agent, ``request.auth`` the ApiKey.

    Within the failure budget per client address that every credential shares
    (kernel.bearer); refusals for it are counted, never stored.
    """

    def credential_authenticate(self, credential: str) -> tuple[Agent, ApiKey]:
        try:
            api_key = api_key_authenticate(credential)
        except DomainError as exc:
            raise exceptions.AuthenticationFailed(exc.detail) from exc
        return api_key.agent, api_key

    def malformed(self) -> Exception:
        return exceptions.AuthenticationFailed("Use `Authorization: Bearer <API key>`.")

    def on_throttled(self) -> None:
        refusal_count(Code.THROTTLED)

    def authenticate_header(self, request: Request) -> str:
        # DRF asks for the challenge exactly when it answers 401 because the key is missing
        # or unusable (unknown, revoked, expired, malformed), on every view that
        # authenticates with this class: the one place all of those refusals pass.
        refusal_count(Code.INVALID_API_KEY)
        return 'Bearer realm="plangate"'


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes ApiKeyAuthentication (drf-spectacular finds it here)."""

    target_class = ApiKeyAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent's API key: `Authorization: Bearer pg_...`.",
        }


class ApiKeyRateThrottle(CredentialRateThrottle):
    """PLANGATE_RATE_LIMIT requests per API key per window, whichever process serves them."""

    scope = "api_key"
    credential_type = ApiKey

    def on_throttled(self) -> None:
        refusal_count(Code.THROTTLED)
