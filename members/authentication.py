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

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from audit.services import unattributed_refusal_count
from kernel.problems import Code, DomainError
from kernel.ratelimit import rate_limit_hit, rate_limit_peek, rate_parse

from .models import Agent, ApiKey
from .services import api_key_authenticate

logger = logging.getLogger(__name__)

AUTH_FAILURE_SCOPE = "auth_failure"


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


def client_address(request: Request | HttpRequest) -> str:
    # DRF's client identity: REMOTE_ADDR, or the address PLANGATE_NUM_PROXIES trusted
    # proxies put in X-Forwarded-For. It reads only META, which a plain Django request (the
    # status feed's, plans.status_feed) has as well.
    return BaseThrottle().get_ident(cast(Request, request)) or "unknown"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Authenticates an agent. ``request.user`` is the Agent, ``request.auth`` the ApiKey.

    Failed attempts count per client address (PLANGATE_AUTH_FAILURE_LIMIT). Once an address
    is over its limit every credential it sends is refused as ``throttled`` before the key is
    looked at, a valid one too: otherwise guessing could go on at full speed.
    """

    keyword = "bearer"

    def authenticate(self, request: Request) -> tuple[Agent, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        address = client_address(request)
        rate = rate_parse(settings.PLANGATE_AUTH_FAILURE_LIMIT)
        so_far = rate_limit_peek(scope=AUTH_FAILURE_SCOPE, ident=address, rate=rate)
        if not so_far.allowed:
            refusal_count(Code.THROTTLED)
            raise exceptions.Throttled(wait=so_far.retry_after)
        try:
            api_key = self._api_key(header)
        except exceptions.AuthenticationFailed:
            # The count decides, not the peek above: concurrent failures that all passed the
            # peek still get exactly `limit` 401s between them, the rest 429.
            failure = rate_limit_hit(scope=AUTH_FAILURE_SCOPE, ident=address, rate=rate)
            if not failure.allowed:
                refusal_count(Code.THROTTLED)
                raise exceptions.Throttled(wait=failure.retry_after) from None
            raise
        return api_key.agent, api_key

    def _api_key(self, header: str) -> ApiKey:
        scheme, _, credential = header.partition(" ")
        if scheme.lower() != self.keyword or not credential.strip():
            raise exceptions.AuthenticationFailed("Use `Authorization: Bearer <API key>`.")
        try:
            return api_key_authenticate(credential.strip())
        except DomainError as exc:
            raise exceptions.AuthenticationFailed(exc.detail) from exc

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


class ApiKeyRateThrottle(BaseThrottle):
    """PLANGATE_RATE_LIMIT requests per API key per window, whichever process serves them."""

    scope = "api_key"

    def __init__(self) -> None:
        self.retry_after: int | None = None

    def allow_request(self, request: Request, view) -> bool:
        if not isinstance(request.auth, ApiKey):
            return True
        result = rate_limit_hit(
            scope=self.scope,
            ident=request.auth.lookup_id,
            rate=rate_parse(settings.PLANGATE_RATE_LIMIT),
        )
        self.retry_after = result.retry_after
        if not result.allowed:
            refusal_count(Code.THROTTLED)
        return result.allowed

    def wait(self) -> float | None:
        return self.retry_after
