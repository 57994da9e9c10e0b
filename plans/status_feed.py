"""The status feed: ``GET /v1/plans/{id}/status``, which running guards poll in the background
to learn within their team's bound that their plan was revoked, their member or agent
disabled, or their token's signing key revoked (docs/decisions/0032).

It is polled by every running guard every few seconds, so its cost per request is kept
close to ``/healthz``'s: a plain Django view (no DRF, no content negotiation), and in the
common case one indexed query that authenticates the API key and reads the plan, its
member, its agent, its team's bound and the signing key's state together, plus the
failed-attempts peek that every credential check makes. The answer carries an ``ETag``;
a guard sends it back in ``If-None-Match`` and gets ``304`` while nothing changed.

Polls do not count against the API key's request rate (``PLANGATE_RATE_LIMIT``): the
server sets their pace (``pollInterval``) and a poll would otherwise take from the budget
of declarations, refreshes and decision batches. Failed credentials count as everywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import DatabaseError, connection
from django.db.models import (
    BooleanField,
    ExpressionWrapper,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from guard.decisions import Decision
from guard.errors import FieldError
from kernel.bearer import (
    auth_failure_count,
    auth_failures_over,
    bearer_credential,
    client_address,
)
from kernel.problems import (
    PROBLEM_CONTENT_TYPE,
    Code,
    DomainError,
    database_unavailable_error,
    is_database_unavailable,
    problem_body,
)
from kernel.sql import row_read, statement
from kernel.tracing import traced_view
from members.authentication import refusal_count
from members.models import API_KEY_FORMAT, Agent, ApiKey, ApiKeyQuerySet, Member
from members.services import api_key_authenticate, usable_key_condition
from teams.models import Team

from .dpop import dpop_require_for_jkt
from .models import Plan, SigningKey

__all__ = [
    "FEED_STOP_CODES",
    "PlanStatus",
    "plan_status_for_key",
    "plan_status_view",
    "poll_interval",
]

# A signing key id is an RFC 7638 thumbprint: base64url, 43 characters for SHA-256.
_KID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PLAN_ID: Final = re.compile(r"[0-9A-Za-z]{1,26}")
# The bound is the longest a running agent may go on; polling twice per bound leaves the
# other half for a poll that fails once, the request's own time and the guard's jitter.
POLLS_PER_BOUND: Final = 2


# A plan a review rule sent to a person has no token until approved: while it waits its
# calls get approval_pending, and a denied or expired request stops it for good (the
# token endpoint's codes, plans.approval_tokens).
_APPROVAL_STOPS: Final[dict[str, tuple[str, str]]] = {
    Plan.Status.PENDING_APPROVAL: (Code.APPROVAL_PENDING.value, "the plan awaits approval"),
    Plan.Status.APPROVAL_DENIED: (Code.APPROVAL_DENIED.value, "a person denied the plan"),
    Plan.Status.APPROVAL_EXPIRED: (
        Code.APPROVAL_EXPIRED.value,
        "nobody decided on the plan within the team's approval window",
    ),
}

# The decision codes `code` may carry (the guard's, guard.decisions, and the approvals').
FEED_STOP_CODES: Final = frozenset(
    [
        *(
            code.value
            for code in (
                Decision.PLAN_REVOKED,
                Decision.PLAN_EXPIRED,
                Decision.AGENT_DISABLED,
                Decision.USER_DISABLED,
                Decision.TOKEN_INVALID,
            )
        ),
        *(code for code, _ in _APPROVAL_STOPS.values()),
    ]
)


def poll_interval(bound_seconds: int) -> float:
    """How often a guard polls for a team whose bound is `bound_seconds`."""
    return bound_seconds / POLLS_PER_BOUND


@dataclass(frozen=True)
class PlanStatus:
    """What the feed tells a guard about its plan. `code` is the decision every later call
    gets (``plan_revoked``, ``plan_expired``, ``user_disabled``, ``agent_disabled``,
    ``token_invalid``, and ``approval_pending`` / ``approval_denied`` / ``approval_expired``
    for a plan a review rule sent to a person), None while the plan may go on."""

    plan_id: str
    status: str
    code: str | None
    reason: str
    bound_seconds: int
    # The key the plan's tokens are bound to ("" unbound): a poll must then carry a DPoP
    # proof by it (plans.dpop). Not part of the answer.
    jkt: str = ""

    def body(self) -> dict[str, Any]:
        return {
            "plan": self.plan_id,
            "status": self.status,
            "code": self.code,
            "reason": self.reason,
            "boundSeconds": self.bound_seconds,
            "pollInterval": poll_interval(self.bound_seconds),
        }

    @property
    def etag(self) -> str:
        # The whole answer, hashed: a guard's copy is current exactly when the body is.
        text = json.dumps(self.body(), sort_keys=True, separators=(",", ":"))
        return '"' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def _stop(
    *,
    status: str,
    past_lifetime: bool,
    member_active: bool,
    agent_active: bool,
    key_state: str | None,
    kid: str | None,
) -> tuple[str | None, str]:
    """The decision code that stops the plan, and why; the first that holds wins, in the
    order the refresh refuses them (plans.services)."""
    if status == Plan.Status.REVOKED:
        return Decision.PLAN_REVOKED.value, "the plan was revoked"
    if status == Plan.Status.EXPIRED or past_lifetime:
        return Decision.PLAN_EXPIRED.value, "the plan is past its absolute lifetime"
    if status in _APPROVAL_STOPS:
        return _APPROVAL_STOPS[status]
    if not agent_active:
        return Decision.AGENT_DISABLED.value, "the agent is disabled"
    if not member_active:
        return Decision.USER_DISABLED.value, "the plan's member is disabled"
    if key_state == SigningKey.State.REVOKED:
        return Decision.TOKEN_INVALID.value, f"its signing key {kid} was revoked"
    return None, ""


def status_queryset(*, plan_id: str, lookup_id: str, kid: str, now: datetime) -> QuerySet:
    """The one query of a poll: the plan `plan_id` with the secret hash of its agent's
    usable key `lookup_id` (None when the key is not one), whether the plan is past its
    lifetime, its member's and agent's flags, its team's bound and the state of the signing
    key `kid`."""
    # Scalar subqueries by primary key rather than joins: PostgreSQL plans this statement
    # in about a sixth of the time a five-table join takes, and planning is most of a poll's
    # database work (docs/decisions/0032).
    usable_key = ApiKey.objects.filter(
        Q(agent_id=OuterRef("agent_id"), lookup_id=lookup_id) & ApiKeyQuerySet.usable_condition(now)
    )
    return (
        Plan.objects.filter(pk=plan_id)
        .annotate(
            key_secret_hash=_one(usable_key, "secret_hash"),
            past_lifetime=ExpressionWrapper(Q(expires_at__lte=now), output_field=BooleanField()),
            member_active=_one(Member.objects.filter(pk=OuterRef("member_id")), "is_active"),
            agent_active=_one(Agent.objects.filter(pk=OuterRef("agent_id")), "is_active"),
            bound=_one(Team.objects.filter(pk=OuterRef("team_id")), "revocation_bound_seconds"),
            key_state=_one(SigningKey.objects.filter(kid=kid), "state"),
        )
        .order_by()  # a primary-key probe: no sort
        .values_list(
            "key_secret_hash",
            "status",
            "past_lifetime",
            "member_active",
            "agent_active",
            "bound",
            "key_state",
            "jkt",
        )[:1]
    )


def _one(queryset: QuerySet, field: str) -> Subquery:
    return Subquery(queryset.order_by().values(field)[:1])


def _status_statement() -> str:
    """``status_queryset`` written by hand (kernel.sql, decision 0061: the ORM's building and
    compiling of it cost five times what running it does, on every poll). A usable key is
    members.services.usable_key_condition, the SQL home of ``ApiKeyQuerySet.usable``.
    tests/plans/test_status_feed.py holds its rows to the queryset's. Parameters: lookup
    id, now (twice), kid, plan id."""
    quote = connection.ops.quote_name

    def table(model: type[Model]) -> str:
        return quote(model._meta.db_table)

    # Only the models' own table names are formatted in; every value is a parameter.
    return (
        "SELECT "  # noqa: S608
        f"(SELECT k.secret_hash FROM {table(ApiKey)} k WHERE k.agent_id = p.agent_id "
        f"AND k.lookup_id = %s AND {usable_key_condition('k')}), "
        "p.status, p.expires_at <= %s, "
        f"(SELECT m.is_active FROM {table(Member)} m WHERE m.id = p.member_id), "
        f"(SELECT a.is_active FROM {table(Agent)} a WHERE a.id = p.agent_id), "
        f"(SELECT t.revocation_bound_seconds FROM {table(Team)} t WHERE t.id = p.team_id), "
        f"(SELECT s.state FROM {table(SigningKey)} s WHERE s.kid = %s), "
        "p.jkt "
        f"FROM {table(Plan)} p WHERE p.id = %s"
    )


def _status_row(*, plan_id: str, lookup_id: str, kid: str, now: datetime) -> tuple | None:
    """The row ``status_queryset`` answers, as the ORM converts it (booleans as bool)."""
    at = Plan._meta.get_field("expires_at").get_db_prep_value(now, connection)
    row = row_read(
        statement("plans.status_feed", _status_statement), [lookup_id, at, at, kid, plan_id]
    )
    if row is None:
        return None
    secret_hash, status, past_lifetime, member_active, agent_active, bound, key_state, jkt = row
    return (
        secret_hash,
        status,
        bool(past_lifetime),
        None if member_active is None else bool(member_active),
        None if agent_active is None else bool(agent_active),
        bound,
        key_state,
        jkt,
    )


def plan_status_for_key(
    *, plan_id: str, api_key: str, kid: str | None, now: datetime | None = None
) -> PlanStatus:
    """The status of the plan `plan_id` for the API key `api_key` (its plaintext).

    One query in the common case (a usable key of the plan's agent): the key, the plan, its
    member, its agent, its team's bound and the state of the signing key `kid`. Raises
    DomainError ``invalid_api_key`` (a key that is unknown, revoked, expired or whose secret
    does not match) or ``plan_not_found`` (no such plan for this key's agent).
    """
    parsed = API_KEY_FORMAT.parse(api_key)  # malformed text is refused before any query
    if parsed is None:
        raise DomainError(Code.INVALID_API_KEY)
    lookup_id, secret = parsed
    now = now or timezone.now()
    row = _status_row(plan_id=plan_id, lookup_id=lookup_id, kid=kid or "", now=now)
    if row is None or row[0] is None:
        # The rare path: tell an unusable key (401) from another agent's plan (404) with the
        # one home of the key's rules, which raises invalid_api_key for the former.
        api_key_authenticate(api_key)
        raise DomainError(Code.PLAN_NOT_FOUND, f"No plan {plan_id} for this agent.")
    secret_hash, status, past_lifetime, member_active, agent_active, bound, key_state, jkt = row
    if not API_KEY_FORMAT.matches(secret_hash, secret):
        raise DomainError(Code.INVALID_API_KEY)
    code, reason = _stop(
        status=status,
        past_lifetime=bool(past_lifetime),
        member_active=bool(member_active),
        agent_active=bool(agent_active),
        key_state=key_state,
        kid=kid,
    )
    return PlanStatus(plan_id, status, code, reason, bound, jkt or "")


def _problem(request: HttpRequest, error: DomainError) -> JsonResponse:
    body = problem_body(error.code, error.detail, errors=error.errors, instance=request.path)
    response = JsonResponse(body, status=error.status, content_type=PROBLEM_CONTENT_TYPE)
    for name, value in error.headers.items():
        response[name] = value
    if error.code == Code.INVALID_API_KEY:
        response["WWW-Authenticate"] = 'Bearer realm="plangate"'
    return response


def _credential(request: HttpRequest) -> str:
    """The ``Authorization: Bearer`` key, else invalid_api_key."""
    credential = bearer_credential(request.headers.get("Authorization", ""))
    if credential is None:
        raise DomainError(Code.INVALID_API_KEY, "Use `Authorization: Bearer <API key>`.")
    return credential


def _failed_attempt(address: str) -> DomainError:
    """Count a failed credential against the budget every credential shares
    (kernel.bearer); over it, the answer is throttled."""
    retry_after = auth_failure_count(address)
    if retry_after is not None:
        refusal_count(Code.THROTTLED)
        return DomainError(Code.THROTTLED, headers={"Retry-After": str(retry_after)})
    refusal_count(Code.INVALID_API_KEY)
    return DomainError(Code.INVALID_API_KEY)


@traced_view("plangate.status_feed")
def plan_status_view(request: HttpRequest, plan_id: str) -> HttpResponse:
    """``GET /v1/plans/{id}/status[?kid=<the token's key id>]`` for the plan's agent."""
    if request.method != "GET":
        response = _problem(request, DomainError(Code.METHOD_NOT_ALLOWED))
        response["Allow"] = "GET"
        return response
    kid = request.GET.get("kid") or None
    if kid is not None and not _KID.fullmatch(kid):
        return _problem(
            request,
            DomainError(
                Code.INVALID_REQUEST,
                "kid must be a signing key id (base64url, at most 64 characters).",
                errors=[FieldError("kid", "not a signing key id")],
            ),
        )
    address = client_address(request)
    try:
        # As every bearer credential: an address over its failure budget is refused before
        # its key is looked at, a valid one too, so that guessing cannot go on here.
        retry_after = auth_failures_over(address)
        if retry_after is not None:
            refusal_count(Code.THROTTLED)
            raise DomainError(Code.THROTTLED, headers={"Retry-After": str(retry_after)})
        try:
            api_key = _credential(request)
            if not _PLAN_ID.fullmatch(plan_id):
                api_key_authenticate(api_key)  # a bad key is still told first
                raise DomainError(Code.PLAN_NOT_FOUND, f"No plan {plan_id} for this agent.")
            status = plan_status_for_key(plan_id=plan_id.upper(), api_key=api_key, kid=kid)
            if status.jkt:  # the unbound path costs nothing more
                dpop_require_for_jkt(request, status.jkt)
        except DomainError as error:
            if error.code == Code.INVALID_API_KEY:
                raise _failed_attempt(address) from error
            raise
    except DomainError as error:
        return _problem(request, error)
    except DatabaseError as error:
        if not is_database_unavailable(error):
            raise
        return _problem(request, database_unavailable_error())
    etag = status.etag
    headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
    if etag in _etags(request.headers.get("If-None-Match", "")):
        return HttpResponse(status=304, headers=headers)
    return JsonResponse(status.body(), headers=headers)


def _etags(header: str) -> set[str]:
    return {part.strip().removeprefix("W/") for part in header.split(",") if part.strip()}
