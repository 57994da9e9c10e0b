"""The second credential of ``POST /v1/plans/{id}/events``: the plan's own intent token.

An agent's API key can be refused after its guard has already decided calls: the key
revoked or expired, the agent disabled. Those decisions must still reach the trail
(docs/decisions/0054), so a batch may also be sent with ``Authorization: Bearer <the
plan's intent token>``. The token is checked by the same verification a refresh uses
(``refresh_token_verify``: our signature, a key that was not revoked, our issuer; an
expired token is still read), and it vouches only for its own plan, and only for decisions
made up to its ``exp`` (plans.event_intake counts the later ones as lost).

The token is told from an API key by its shape (a compact JWS, three base64url parts);
an API key (``pg_...``) goes on to members.authentication. Failed tokens count against the
address's budget of failed attempts like every credential (kernel.bearer), and a plan's
token-authenticated batches share one rate limit per plan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from guard.claims import IntentClaims
from kernel.bearer import BearerAuthentication, CredentialRateThrottle, bearer_credential
from kernel.problems import Code, DomainError
from members.authentication import ApiKeyAuthentication, refusal_count
from members.models import Agent

from .intent_tokens import refresh_token_verify

__all__ = ["PlanTokenAuthentication", "PlanTokenCredential", "PlanTokenRateThrottle"]

# Three base64url parts: the shape of a compact JWS, which no API key (pg_...) has.
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class PlanTokenCredential:
    """A verified intent token presented for its plan's decision log."""

    claims: IntentClaims

    @property
    def plan_id(self) -> str:
        return self.claims.jti

    @property
    def lookup_id(self) -> str:
        """What the rate limit counts by: the plan (its tokens share one budget)."""
        return f"plan:{self.claims.jti}"


def is_intent_token(credential: str) -> bool:
    return not credential.startswith("pg_") and _COMPACT_JWS.fullmatch(credential) is not None


class PlanTokenAuthentication(BearerAuthentication):
    """``request.user`` is the plan's agent (active or not), ``request.auth`` a
    PlanTokenCredential. Leaves any other credential to the next authentication class."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        credential = bearer_credential(header)
        if credential is None or not is_intent_token(credential):
            return None
        return super().authenticate(request)

    def credential_authenticate(self, credential: str) -> tuple[Agent, PlanTokenCredential]:
        claims = refresh_token_verify(credential)
        agent = Agent.objects.filter(pk=claims.agent).first()
        if agent is None:
            raise DomainError(Code.INVALID_TOKEN, "The token is not valid: unknown agent.")
        return agent, PlanTokenCredential(claims)

    def malformed(self) -> Exception:  # pragma: no cover - authenticate passes these on
        return exceptions.AuthenticationFailed("Use `Authorization: Bearer <intent token>`.")

    def on_throttled(self) -> None:
        refusal_count(Code.THROTTLED)

    def authenticate_header(self, request: Request) -> str:
        # DRF asks the first authentication class for the challenge of a request it refuses
        # as unauthenticated: here, one with no credential or an unusable API key, which
        # the API key's authentication counts.
        return ApiKeyAuthentication().authenticate_header(request)


class PlanTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema describes PlanTokenAuthentication (drf-spectacular finds it)."""

    target_class = PlanTokenAuthentication
    name = "planToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": (
                "The plan's own intent token, on the decision log of that plan only, once"
                " the agent's API key is refused: `Authorization: Bearer <token>`."
            ),
        }


class PlanTokenRateThrottle(CredentialRateThrottle):
    """PLANGATE_RATE_LIMIT token-authenticated batches per plan per window."""

    scope = "plan_token"
    credential_type = PlanTokenCredential

    def on_throttled(self) -> None:
        refusal_count(Code.THROTTLED)
