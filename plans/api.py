"""REST API v1 for agents: declare, refresh and read plans; publish the JWKS.

The views parse (plans.serializers), call one service and render (plans.serializers); the rest
of what the schema documents (refusals, examples, JWKS) is in ``plans.api_schema``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from typing import ClassVar

from django.conf import settings
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import AuditRecord
from kernel.problems import Code, to_domain_error
from kernel.tracing import TracedView
from members.authentication import (
    ApiKeyAuthentication,
    ApiKeyRateThrottle,
    request_agent,
    request_api_key,
)
from members.models import Agent, ApiKey
from members.services import agent_require_active, api_key_touch

from .api_schema import (
    TOKEN_REFUSALS,
    event_batch_accepted_response,
    jwks_not_modified_response,
    jwks_response,
    plan_declaration_example,
    plan_delegation_example,
    refusals,
)
from .approval_tokens import plan_approved_token_issue
from .approvals import ApprovalRequested
from .delegation import plan_delegate
from .dpop import dpop_for_declaration, dpop_require_for_plan, dpop_require_for_plan_id
from .event_credentials import PlanTokenAuthentication, PlanTokenCredential, PlanTokenRateThrottle
from .event_intake import plan_events_record
from .keys import jwks_document
from .records import (
    RefusalContext,
    declaration_context,
    refresh_context,
    refusal_record,
)
from .serializers import (
    AgentSelfSerializer,
    ApprovalRequestedSerializer,
    DelegatedTokenSerializer,
    EventBatchSerializer,
    IntentTokenSerializer,
    PlanDeclarationSerializer,
    PlanDelegationSerializer,
    PlanDetailSerializer,
    PlanRefreshSerializer,
    PlanTokenRequestSerializer,
    delegated_token_body,
    intent_token_body,
)
from .services import (
    plan_get_for_agent,
    plan_issue,
    plan_refresh,
)

# The DPoP proof (RFC 9449, plans.dpop) the doors of a bound plan want; on a declaration it
# binds the plan to its key.
DPOP_PARAMETER = OpenApiParameter(
    "DPoP",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "A DPoP proof (RFC 9449). On a declaration it binds the plan's tokens to its key"
        " (`cnf.jkt`; required when the team requires binding); for a bound plan it must be"
        " by that key. `401 invalid_dpop_proof` otherwise."
    ),
)


class PlainJsonNegotiation(DefaultContentNegotiation):
    """DRF's content negotiation, answered at once for what agents send: a request that
    accepts anything or JSON (no ``Accept``, ``*/*`` or ``application/json``, no format
    override) when JSON is the one renderer gets that renderer and its media type, as DRF's
    own negotiation would answer (tests/plans/test_api_negotiation.py holds the two to one
    answer). Every other request negotiates as DRF does."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        candidates = list(renderers)
        if format_suffix is None and len(candidates) == 1:
            renderer = candidates[0]
            accept = request.META.get("HTTP_ACCEPT", "*/*")
            override = self.settings.URL_FORMAT_OVERRIDE
            if (
                renderer.media_type == "application/json"
                and accept in ("*/*", "application/json")
                and not (override and override in request.query_params)
            ):
                return renderer, renderer.media_type
        return super().select_renderer(request, candidates, format_suffix)


class AgentAPIView(APIView):
    """An endpoint called with an API key. A successful call records the key's last use."""

    content_negotiation_class = PlainJsonNegotiation

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        if self.agent_must_be_active(request):
            agent_require_active(agent=request_agent(request))

    def agent_must_be_active(self, request: Request) -> bool:
        return True

    def finalize_response(self, request: Request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        # The status first: a refused credential is not read (authenticated) a second time.
        if response.status_code < 400:
            api_key = request_api_key(request)
            if isinstance(api_key, ApiKey):
                api_key_touch(api_key=api_key)
        return response


class RecordedRefusalsView(AgentAPIView):
    """An endpoint whose refusals go to the audit trail (plans.records), once the refused
    request's own writes are rolled back.

    Only refusals of a known agent are stored: one with no usable API key was counted by
    members.authentication, and so was one over its rate limit (a flood must not fill the
    trail). A lost database cannot take a record, and a server error is not a refusal.
    """

    refusal_kind: ClassVar[AuditRecord.Kind]
    _NOT_STORED: ClassVar[frozenset[Code]] = frozenset({Code.THROTTLED, Code.DATABASE_UNAVAILABLE})

    calling_agent: Agent | None = None

    def perform_authentication(self, request: Request) -> None:
        super().perform_authentication(request)
        # None when the request carried no key (IsAuthenticated refuses it next).
        self.calling_agent = request.user if isinstance(request.user, Agent) else None

    def refusal_context(self, request: Request) -> RefusalContext:
        """What a refusal made before the service ran was about, from the request."""
        raise NotImplementedError

    def handle_exception(self, exc: Exception) -> Response:
        agent = self.calling_agent
        error = to_domain_error(exc)  # None: a server error, not a refusal
        if agent is not None and error is not None and error.code not in self._NOT_STORED:
            refusal_record(
                kind=self.refusal_kind,
                agent=agent,
                error=error,
                request_context=lambda: self.refusal_context(self.request),
            )
        return super().handle_exception(exc)


def _request_body(request: Request) -> object:
    """The parsed body, or None when it could not be read (the refusal says why)."""
    try:
        return request.data
    except Exception:  # a parse error, or a body over the limit: already the refusal
        return None


class PlanCreateView(TracedView, RecordedRefusalsView):
    """Declare a plan: it is checked against the team and the agent's active policy, and
    signed. Every declaration, issued or refused, is recorded in the team's audit trail."""

    span_name = "plangate.plan.issue"

    refusal_kind = AuditRecord.Kind.PLAN_REFUSED

    def refusal_context(self, request: Request) -> RefusalContext:
        return declaration_context(_request_body(request))

    @extend_schema(
        operation_id="plans_declare",
        summary="Declare a plan and receive an intent token",
        description=(
            "201 with the token; or, when a `review` rule of the policy concerns a step, 202:"
            " the plan waits for a person's approval, nothing is signed, and `Location` names"
            " `POST /v1/plans/{id}/token`, which answers the token once approved."
        ),
        request=PlanDeclarationSerializer,
        parameters=[DPOP_PARAMETER],
        examples=[plan_declaration_example],
        responses={
            201: IntentTokenSerializer,
            202: ApprovalRequestedSerializer,
            **refusals(400, 401, 403, 429, 503),
        },
    )
    def post(self, request: Request) -> Response:
        body = PlanDeclarationSerializer.validated(request.data)
        agent = request_agent(request)
        # A DPoP proof binds the plan's tokens to its key (plans.dpop); a team may require one.
        jkt = dpop_for_declaration(request, require=agent.team.require_token_binding)
        issued = plan_issue(agent=agent, document=body["plan"], ttl=body.get("ttl"), jkt=jkt)
        if isinstance(issued, ApprovalRequested):
            location = request.build_absolute_uri(
                reverse("plan-token", kwargs={"plan_id": issued.plan.id})
            )
            return Response(
                ApprovalRequestedSerializer(issued).data, status=202, headers={"Location": location}
            )
        return Response(intent_token_body(issued), status=201)


class PlanTokenView(TracedView, RecordedRefusalsView):
    """The token of a plan a person approved (plans.approval_tokens). Its refusals are
    recorded, except ``approval_pending``: a client polls while it waits, and every poll
    is not an event of the trail (the request and the decision are)."""

    span_name = "plangate.plan.token"

    refusal_kind = AuditRecord.Kind.PLAN_REFUSED
    _NOT_STORED = RecordedRefusalsView._NOT_STORED | {Code.APPROVAL_PENDING}

    def refusal_context(self, request: Request) -> RefusalContext:
        return refresh_context(str(self.kwargs.get("plan_id", "")), agent=self.calling_agent)

    @extend_schema(
        operation_id="plans_token",
        summary="The token of a plan that a person approved",
        description=(
            "No body is needed (one may ask a `ttl`). 200 with the same body as a 201"
            " declaration once a person approved the plan, signed with the agent's current"
            " policy; the token carries `apr`: who approved, when, and the plan hash."
            " 409 `approval_pending` while it waits, with `Retry-After`; 403"
            " `approval_denied` with the approver's reason; 410 `approval_expired` when"
            " nobody decided within the team's window; 403 `policy_denied` or"
            " `approval_required` when the policy changed since."
        ),
        request=PlanTokenRequestSerializer,
        parameters=[DPOP_PARAMETER],
        responses={
            200: IntentTokenSerializer,
            **TOKEN_REFUSALS,
        },
    )
    def post(self, request: Request, plan_id: str) -> Response:
        # Read even when empty: a body over the limit is refused like on every endpoint.
        body = PlanTokenRequestSerializer.validated(request.data or {})
        dpop_require_for_plan_id(request, agent_id=request_agent(request).id, plan_id=plan_id)
        issued = plan_approved_token_issue(
            agent=request_agent(request), plan_id=plan_id, ttl=body.get("ttl")
        )
        return Response(intent_token_body(issued))


class PlanDelegationView(TracedView, RecordedRefusalsView):
    """Delegate part of the caller's plan to a child plan (plans.delegation). Every
    delegation, signed or refused, is recorded in the team's audit trail."""

    span_name = "plangate.plan.delegate"

    refusal_kind = AuditRecord.Kind.PLAN_REFUSED

    def refusal_context(self, request: Request) -> RefusalContext:
        context = declaration_context(_request_body(request))
        plan_id = str(self.kwargs.get("plan_id", ""))
        context.named_plan_id = refresh_context(plan_id).named_plan_id
        return context

    @extend_schema(
        operation_id="plans_delegate",
        summary="Delegate part of a plan to a child plan for a sub-agent",
        description=(
            "Called with the parent plan's agent's API key. 201 with the child's token: the"
            " issuance body plus `parent`, `agent` and `reserved`. Each child step must be"
            " inside a step of the parent (same tool, every pinned argument pinned inside"
            " it, a closed step only by a closed step; a parent step with `after` is not"
            " delegated), and each parent budget counting that step matched by a child"
            " budget over the same argument. The child reserves its `maxCalls` and budget"
            " `max` from what the parent has left (never given back); its user is the"
            " parent's, its lifetime ends with the parent's, and revoking or ending the"
            " parent stops it. 403 `delegation_widens` at the widening field, 409"
            " `budget_unavailable` at the `maxCalls` or `max` that does not fit, 403"
            " `delegation_refused` at `agent`, 410 `plan_revoked` / `plan_expired` for a"
            " parent (or an ancestor) no longer active, 404 for a plan not the caller's."
        ),
        request=PlanDelegationSerializer,
        parameters=[DPOP_PARAMETER],
        examples=[plan_delegation_example],
        responses={
            201: DelegatedTokenSerializer,
            **refusals(400, 401, 403, 404, 409, 410, 429, 503),
        },
    )
    def post(self, request: Request, plan_id: str) -> Response:
        body = PlanDelegationSerializer.validated(request.data)
        dpop_require_for_plan_id(request, agent_id=request_agent(request).id, plan_id=plan_id)
        delegated = plan_delegate(
            agent=request_agent(request),
            parent_id=plan_id,
            document=body["plan"],
            to_agent_id=body.get("agent"),
            ttl=body.get("ttl"),
            jkt=body.get("jkt", ""),
        )
        return Response(delegated_token_body(delegated), status=201)


class PlanRefreshView(TracedView, RecordedRefusalsView):
    """Sign the same plan again with the agent's current policy, role and groups. Every
    refresh, signed or refused, is recorded in the team's audit trail."""

    span_name = "plangate.plan.refresh"

    refusal_kind = AuditRecord.Kind.REFRESH_REFUSED

    def refusal_context(self, request: Request) -> RefusalContext:
        return refresh_context(str(self.kwargs.get("plan_id", "")), agent=self.calling_agent)

    @extend_schema(
        operation_id="plans_refresh",
        summary="Re-sign the same plan with the current policy",
        request=PlanRefreshSerializer,
        parameters=[DPOP_PARAMETER],
        responses={
            200: IntentTokenSerializer,
            **TOKEN_REFUSALS,
        },
    )
    def post(self, request: Request, plan_id: str) -> Response:
        body = PlanRefreshSerializer.validated(request.data)
        dpop_require_for_plan_id(request, agent_id=request_agent(request).id, plan_id=plan_id)
        issued = plan_refresh(
            agent=request_agent(request), plan_id=plan_id, token=body["token"], ttl=body.get("ttl")
        )
        return Response(intent_token_body(issued))


class AgentSelfView(AgentAPIView):
    """Who an API key is: a gateway in front of many clients checks a client's key here
    before it serves it (guard.gateway.http)."""

    @extend_schema(
        operation_id="agent_read",
        summary="The agent the API key belongs to",
        responses={200: AgentSelfSerializer, **refusals(401, 403)},
    )
    def get(self, request: Request) -> Response:
        return Response(AgentSelfSerializer(request_agent(request)).data)


class PlanDetailView(AgentAPIView):
    @extend_schema(
        operation_id="plans_read",
        summary="The calling agent's own plan: status, steps, token history",
        responses={
            200: PlanDetailSerializer,
            **refusals(401, 403, 404),
        },
    )
    def get(self, request: Request, plan_id: str) -> Response:
        plan = plan_get_for_agent(agent=request_agent(request), plan_id=plan_id)
        return Response(PlanDetailSerializer(plan).data)


class PlanEventsView(TracedView, AgentAPIView):
    """The decision log, sent with the agent's API key or, once that is refused, with the
    plan's own intent token (plans.event_credentials): then the agent need not be active,
    and the token vouches for its plan's decisions up to its expiry."""

    span_name = "plangate.events.record"

    authentication_classes = [PlanTokenAuthentication, ApiKeyAuthentication]
    throttle_classes = [ApiKeyRateThrottle, PlanTokenRateThrottle]

    def agent_must_be_active(self, request: Request) -> bool:
        return not isinstance(request.auth, PlanTokenCredential)

    @extend_schema(
        operation_id="plans_events",
        summary="Report a batch of guard decisions and the ACP plan updates shown to the user",
        description=(
            "Stored exactly once per (plan, stream, seq): a batch received before is"
            " answered 200 with its counts and `duplicate: true`, and stores nothing.\n\n"
            "Sent with the agent's API key, or with the plan's own intent token"
            " (`Authorization: Bearer <token>`, expired or not) when the key is refused"
            " (revoked, expired, agent disabled): the token must be this plan's, signed by a"
            " key that was not revoked, and it vouches for decisions made up to its `exp`"
            " (plus the allowed clock skew); later ones are not stored and are counted in"
            " `lost`, with the decisions the guard reported lost."
        ),
        request=EventBatchSerializer,
        parameters=[DPOP_PARAMETER],
        responses={
            202: event_batch_accepted_response,
            200: event_batch_accepted_response,
            **refusals(400, 401, 403, 404, 409, 429),
        },
    )
    def post(self, request: Request, plan_id: str) -> Response:
        batch = EventBatchSerializer.validated(request.data)
        credential = request.auth
        recorded = plan_events_record(
            agent=request_agent(request),
            plan_id=plan_id,
            batch=batch,
            token=credential.claims if isinstance(credential, PlanTokenCredential) else None,
            holder=functools.partial(dpop_require_for_plan, request),
        )
        return Response(
            {
                "events": recorded.events,
                "displayUpdates": recorded.display_updates,
                "argumentsStored": recorded.arguments_stored,
                "lost": recorded.lost,
                "duplicate": recorded.duplicate,
            },
            status=200 if recorded.duplicate else 202,
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
