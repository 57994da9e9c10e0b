"""REST API v1 for agents: declare, refresh and read plans; publish the JWKS.

The views parse and answer; what they document (bodies, examples) is in ``plans.api_schema``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Set as AbstractSet

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from guard.errors import FieldError
from guard.events import EVENT_BATCH_KEYS
from kernel.problems import DomainError
from members.authentication import request_agent, request_api_key
from members.models import Agent
from members.services import agent_require_active, api_key_touch

from .api_schema import (
    PROBLEM,
    EventBatchSerializer,
    event_batch_accepted_response,
    jwks_not_modified_response,
    jwks_response,
    plan_declaration_example,
    plan_declaration_request,
    plan_detail_response,
    plan_refresh_request,
    token_response,
)
from .keys import jwks_document
from .models import Plan
from .services import (
    IssuedToken,
    plan_events_record,
    plan_get_for_agent,
    plan_issue,
    plan_refresh,
)


def parse_body(request: Request, *, required: AbstractSet[str], optional: AbstractSet[str]) -> dict:
    """The JSON body as an object with exactly the allowed keys, or ``invalid_request``.

    Unknown keys are refused rather than ignored: a misspelt field must never pass silently.
    """
    data = request.data
    if not isinstance(data, dict):
        raise DomainError(
            "invalid_request",
            "The body must be a JSON object.",
            errors=[FieldError("", "expected an object")],
        )
    errors = [FieldError(key, "this field is required") for key in sorted(required - data.keys())]
    errors += [
        FieldError(key, "unknown field") for key in sorted(data.keys() - required - optional)
    ]
    if errors:
        raise DomainError("invalid_request", "The request body is not valid.", errors=errors)
    return data


def parse_ttl(data: dict) -> int | None:
    ttl = data.get("ttl")
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise DomainError(
            "invalid_request",
            "ttl must be an integer number of seconds.",
            errors=[FieldError("ttl", "expected an integer")],
        )
    return ttl


class AgentAPIView(APIView):
    """An endpoint called with an API key. A successful call records the key's last use."""

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        agent_require_active(agent=request_agent(request))

    def finalize_response(self, request: Request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        api_key = request_api_key(request)
        if response.status_code < 400 and api_key is not None:
            api_key_touch(api_key=api_key)
        return response


def _token_body(issued: IssuedToken, agent: Agent) -> dict:
    return {
        "id": issued.plan.id,
        "token": issued.token,
        "planHash": issued.plan.hash,
        "expiresAt": issued.expires_at.isoformat().replace("+00:00", "Z"),
        "policy": {
            "id": issued.policy_version.policy.slug,
            "version": issued.policy_version.number,
            "hash": issued.policy_version.hash,
        },
        "reportArguments": agent.team.log_call_arguments,
    }


class PlanCreateView(AgentAPIView):
    @extend_schema(
        operation_id="plans_declare",
        summary="Declare a plan and receive an intent token",
        request=plan_declaration_request,
        examples=[plan_declaration_example],
        responses={
            201: token_response,
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
            429: PROBLEM,
            503: PROBLEM,
        },
    )
    def post(self, request: Request) -> Response:
        data = parse_body(request, required={"plan"}, optional={"ttl"})
        issued = plan_issue(
            agent=request_agent(request), document=data["plan"], ttl=parse_ttl(data)
        )
        return Response(_token_body(issued, request_agent(request)), status=201)


class PlanRefreshView(AgentAPIView):
    @extend_schema(
        operation_id="plans_refresh",
        summary="Re-sign the same plan with the current policy",
        request=plan_refresh_request,
        responses={
            200: token_response,
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
            404: PROBLEM,
            409: PROBLEM,
            410: PROBLEM,
            429: PROBLEM,
            503: PROBLEM,
        },
    )
    def post(self, request: Request, plan_id: str) -> Response:
        data = parse_body(request, required={"token"}, optional={"ttl"})
        if not isinstance(data["token"], str):
            raise DomainError(
                "invalid_request",
                "token must be a string.",
                errors=[FieldError("token", "expected a string")],
            )
        issued = plan_refresh(
            agent=request_agent(request), plan_id=plan_id, token=data["token"], ttl=parse_ttl(data)
        )
        return Response(_token_body(issued, request_agent(request)))


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def plan_detail_body(plan: Plan) -> dict:
    version = plan.policy_version
    return {
        "id": plan.id,
        "status": plan.status,
        "goal": plan.goal,
        "user": plan.member.email,
        "agent": plan.agent_id,
        "planHash": plan.hash,
        "createdAt": _iso(plan.created_at),
        "expiresAt": _iso(plan.expires_at),
        "revokedAt": _iso(plan.revoked_at),
        "role": plan.role,
        "groups": plan.groups,
        "policy": {"id": version.policy.slug, "version": version.number, "hash": version.hash},
        "steps": plan.document["steps"],
        "tokens": [
            {
                "kind": token.kind,
                "kid": token.kid,
                "issuedAt": _iso(token.issued_at),
                "expiresAt": _iso(token.expires_at),
                "policyVersion": token.policy_version.number,
                "role": token.role,
                "groups": token.groups,
            }
            for token in plan.tokens.select_related("policy_version").order_by("issued_at", "id")
        ],
    }


class PlanDetailView(AgentAPIView):
    @extend_schema(
        operation_id="plans_read",
        summary="The calling agent's own plan: status, steps, token history",
        responses={
            200: plan_detail_response,
            401: PROBLEM,
            403: PROBLEM,
            404: PROBLEM,
        },
    )
    def get(self, request: Request, plan_id: str) -> Response:
        plan = plan_get_for_agent(agent=request_agent(request), plan_id=plan_id)
        return Response(plan_detail_body(plan))


class PlanEventsView(AgentAPIView):
    @extend_schema(
        operation_id="plans_events",
        summary="Report a batch of guard decisions and the ACP plan updates shown to the user",
        request=EventBatchSerializer,
        responses={
            202: event_batch_accepted_response,
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
            404: PROBLEM,
            429: PROBLEM,
        },
    )
    def post(self, request: Request, plan_id: str) -> Response:
        data = parse_body(request, required=set(), optional=EVENT_BATCH_KEYS)
        recorded = plan_events_record(agent=request_agent(request), plan_id=plan_id, batch=data)
        return Response(
            {
                "events": recorded.events,
                "displayUpdates": recorded.display_updates,
                "argumentsStored": recorded.arguments_stored,
            },
            status=202,
        )


class JwksView(APIView):
    authentication_classes: list = []
    permission_classes: list = []
    throttle_classes: list = []

    @extend_schema(
        operation_id="keys_jwks",
        summary="Public keys that verify intent tokens (RFC 7517 JWK Set)",
        responses={
            (200, "application/jwk-set+json"): jwks_response,
            304: jwks_not_modified_response,
        },
    )
    def get(self, request: Request) -> HttpResponse:
        """A read: lists what is stored and writes nothing, so it is empty on a database
        that has no key yet (the first signature or rotation creates them)."""
        body = json.dumps(jwks_document(), separators=(",", ":"), sort_keys=True).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        headers = {
            "Cache-Control": f"public, max-age={settings.PLANGATE_JWKS_MAX_AGE}",
            "ETag": etag,
        }
        if_none_match = request.headers.get("If-None-Match", "")
        if etag in [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(body, content_type="application/jwk-set+json")
        for name, value in headers.items():
            response[name] = value
        return response
