"""DRF authentication by ``Authorization: Bearer pg_...`` and a rate limit per API key."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from controlplane.problems import DomainError

from .models import Agent, ApiKey
from .services import api_key_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Authenticates an agent. ``request.user`` is the Agent, ``request.auth`` the ApiKey."""

    keyword = "bearer"

    def authenticate(self, request: Request) -> tuple[Agent, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, credential = header.partition(" ")
        if scheme.lower() != self.keyword or not credential.strip():
            raise exceptions.AuthenticationFailed("Use `Authorization: Bearer <API key>`.")
        try:
            api_key = api_key_authenticate(credential.strip())
        except DomainError as exc:
            raise exceptions.AuthenticationFailed(exc.detail) from exc
        agent = api_key.agent
        # DRF's IsAuthenticated reads this attribute.
        agent.is_authenticated = True
        return agent, api_key

    def authenticate_header(self, request: Request) -> str:
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


class ApiKeyRateThrottle(SimpleRateThrottle):
    scope = "api_key"

    def get_cache_key(self, request: Request, view) -> str | None:
        if not isinstance(request.auth, ApiKey):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.lookup_id}
