"""The audit records of declaring, refreshing and revoking plans (audit.models.AuditRecord).

A success (``plan_issued``, ``token_refreshed``, ``plan_revoked``) is appended inside the
transaction of the rows it describes, so it exists exactly when they do. A refusal
(``plan_refused``, ``refresh_refused``) writes nothing else, and whatever the refused
request had begun is rolled back: its record is appended afterwards, by the API's door, in a
transaction of its own, and a failure to append it is logged rather than turning the
refusal into a server error.

What a refusal was about (the user as given, the plan hash when the plan was valid, the
policy version that refused) is known where the checks run: the services raise
:class:`PlanRefused`, a DomainError that carries a :class:`RefusalContext` filled in as far
as the checks got. A refusal made before a service ran (a malformed body, a disabled
agent) is described from the body alone.

Agents act as ``agent:<id>`` (:func:`agent_actor`, the one spelling, which the event intake
uses too); the record also keeps the agent's name, so the trail reads the same after the
agent is renamed or deleted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from audit.actors import current_actor
from audit.models import AuditRecord
from audit.services import record_append
from guard.errors import DocumentInvalid
from guard.plan import plan_hash, validate_plan
from guard.policy_evaluation import StepDenial, rule_description
from kernel.json_format import compact_json
from kernel.problems import DomainError
from members.models import Agent

from .models import Plan, ShadowDifference
from .shadow import ShadowOutcome, shadow_difference_record

if TYPE_CHECKING:
    from policies.models import PolicyVersion


logger = logging.getLogger(__name__)

# The longest user a record keeps (AuditRecord.user's length); a longer one is cut, marked.
_USER_LENGTH = AuditRecord._meta.get_field("user").max_length or 254
# A plan id as the API accepts it (plans.services checks the same); others are not kept.
_PLAN_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def agent_actor(agent: Agent) -> str:
    """How the trail names an agent that acted through the API."""
    return f"agent:{agent.pk}"


@dataclass
class RefusalContext:
    """What a refused request was about, as far as its checks got before the refusal."""

    user: str = ""
    #: the agent's own plan the request was about
    plan_id: str = ""
    #: a plan id the request named that is not known to be the agent's own: kept in the
    #: record's details only, so another team's plan never shows this team's attempts
    named_plan_id: str = ""
    plan_hash: str = ""
    policy: str = ""
    policy_version: int | None = None
    rule: dict[str, Any] | None = None
    #: where the policy version tried in shadow answered otherwise (plans.shadow): written
    #: with the issuance or refresh, or with the refusal's record
    shadow: ShadowOutcome | None = None
    #: the active version that answered, when one did
    active_version: PolicyVersion | None = None

    def policy_from(self, version: PolicyVersion) -> None:
        self.policy, self.policy_version = version.policy.slug, version.number

    def plan_from(self, plan: Plan) -> None:
        self.plan_id, self.plan_hash, self.user = plan.id, plan.hash, plan.member.email
        self.named_plan_id = ""


class PlanRefused(DomainError):
    """A refusal by plan_issue or plan_refresh, answered like any DomainError, that also
    says what was refused (``context``) for its audit record."""

    def __init__(self, error: DomainError, context: RefusalContext) -> None:
        super().__init__(error.code, error.detail, errors=error.errors, headers=error.headers)
        self.context = context


@contextmanager
def refusals_described(context: RefusalContext) -> Iterator[RefusalContext]:
    """Every DomainError raised inside becomes a PlanRefused carrying ``context``."""
    try:
        yield context
    except PlanRefused:
        raise
    except DomainError as error:
        raise PlanRefused(error, context) from error


def given_user(document: object) -> str:
    """The plan's ``user`` as the request gave it: a string as it is, any other value as
    its JSON (``5``, ``null``), "" when there was none; in ASCII, every other character
    (and a backslash or control character) written as its Python escape (``\\u212aim``):
    a refused user is the outsider's text, which must never pass for a member's address
    in the trail (docs/decisions/0059)."""
    if not isinstance(document, Mapping) or "user" not in document:
        return ""
    user = document["user"]
    text = user if isinstance(user, str) else compact_json(user)
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= _USER_LENGTH else text[: _USER_LENGTH - 1] + "…"


def declaration_context(body: object) -> RefusalContext:
    """What a declaration refused before the service ran was about: its body's user, and
    its plan's hash when the plan is valid."""
    document = body.get("plan") if isinstance(body, Mapping) else None
    context = RefusalContext(user=given_user(document))
    with suppress(DocumentInvalid):
        context.plan_hash = plan_hash(validate_plan(document))
    return context


def refresh_context(plan_id: str, *, agent: Agent | None = None) -> RefusalContext:
    """What a refresh was about: the plan id it named (when it is one), and, given the
    ``agent`` (a refusal before the service ran), that plan when it is the agent's own."""
    context = RefusalContext(named_plan_id=plan_id if _PLAN_ID.fullmatch(plan_id) else "")
    if agent is not None and context.named_plan_id:
        plan = Plan.objects.select_related("member").filter(pk=plan_id, agent=agent).first()
        if plan is not None:
            context.plan_from(plan)
    return context


def denial_rule(policy_document: Mapping[str, Any], denials: list[StepDenial]) -> dict[str, Any]:
    """The rule a record names for a policy denial: the first step's (every step's reason is
    in the record's errors). Index from 0 as in the policy's ``rules``; None for the
    policy's default."""
    index = denials[0].rule
    if index is None:
        return {"index": None, "description": "the policy default (deny)"}
    return {"index": index, "description": rule_description(policy_document["rules"][index], index)}


def _agent_fields(agent: Agent) -> dict[str, Any]:
    return {
        "team": agent.team_id,
        "actor": agent_actor(agent),
        "agent_id": agent.pk,
        "agent_name": agent.name,
    }


def _instant(value: datetime) -> int:
    return int(value.timestamp())


def plan_issued_record(
    *, plan: Plan, kid: str, issued_at: datetime, expires_at: datetime, ttl: int
) -> AuditRecord:
    """Appended in the transaction that saves the plan's first token: with the plan, or,
    for a plan a person approved, when its token is signed."""
    return record_append(
        **_agent_fields(plan.agent),
        kind=AuditRecord.Kind.PLAN_ISSUED,
        at=plan.created_at if not plan.approval else issued_at,
        user=plan.member.email,
        plan_id=plan.id,
        plan_hash=plan.hash,
        policy=plan.policy_version.policy.slug,
        policy_version=plan.policy_version.number,
        details={
            "goal": plan.goal,
            "steps": len(plan.document["steps"]),
            "kid": kid,
            "iat": _instant(issued_at),
            "exp": _instant(expires_at),
            "ttl": ttl,
        },
    )


def token_refreshed_record(
    *,
    plan: Plan,
    agent: Agent,
    user: str,
    version: PolicyVersion,
    kid: str,
    issued_at: datetime,
    expires_at: datetime,
) -> AuditRecord:
    """Appended in the transaction that saves the refreshed token's row."""
    return record_append(
        **_agent_fields(agent),
        kind=AuditRecord.Kind.TOKEN_REFRESHED,
        at=issued_at,
        user=user,
        plan_id=plan.id,
        plan_hash=plan.hash,
        policy=version.policy.slug,
        policy_version=version.number,
        details={
            "kid": kid,
            "iat": _instant(issued_at),
            "exp": _instant(expires_at),
            "policyVersion": version.number,
        },
    )


def plan_revoked_record(*, plan: Plan, by: str, reason: str, at: datetime) -> AuditRecord:
    """Appended in the transaction that marks the plan revoked. The actor is who revoked."""
    return record_append(
        team=plan.team_id,
        kind=AuditRecord.Kind.PLAN_REVOKED,
        at=at,
        actor=by,
        agent_name=plan.agent.name,
        user=plan.member.email,
        plan_id=plan.id,
        plan_hash=plan.hash,
        policy=plan.policy_version.policy.slug,
        policy_version=plan.policy_version.number,
        details={"reason": reason},
    )


def refusal_record(
    *,
    kind: AuditRecord.Kind,
    agent: Agent,
    error: DomainError,
    request_context: Callable[[], RefusalContext],
) -> AuditRecord | None:
    """Append the record of a refused declaration or refresh, in a transaction of its own.

    What was refused is the service's PlanRefused context, or, for a refusal made before
    the service ran, ``request_context()``. Called once the refused request's own writes are
    rolled back. Never raises: the agent is answered its refusal whether or not the trail
    could take the record (the failure is logged, with the refusal's code).
    """
    try:
        context = error.context if isinstance(error, PlanRefused) else request_context()
        shadow = context.shadow
        with transaction.atomic():
            if shadow is not None:
                shadow_difference_record(
                    shadow,
                    team_id=agent.team_id,
                    request=(
                        ShadowDifference.Request.DECLARATION
                        if kind == AuditRecord.Kind.PLAN_REFUSED
                        else ShadowDifference.Request.REFRESH
                    ),
                    active=context.active_version,
                    plan_id=context.plan_id,
                    agent_id=agent.pk,
                )
            return record_append(
                **_agent_fields(agent),
                kind=kind,
                user=context.user,
                plan_id=context.plan_id,
                plan_hash=context.plan_hash,
                policy=context.policy,
                policy_version=context.policy_version,
                code=error.code,
                rule=context.rule,
                details={
                    "status": error.status,
                    "errors": [{"path": e.path, "detail": e.detail} for e in error.errors],
                    **({"planId": context.named_plan_id} if context.named_plan_id else {}),
                    **({"shadow": shadow.details()} if shadow is not None else {}),
                },
            )
    except Exception:
        logger.exception(
            "could not record the %s refusal (%s) of agent %s", kind, error.code, agent.pk
        )
        return None


def _plan_fields(plan: Plan) -> dict[str, Any]:
    """The fields every record about an existing plan carries."""
    return {
        "team": plan.team_id,
        "agent_id": plan.agent_id,
        "agent_name": plan.agent.name,
        "user": plan.member.email,
        "plan_id": plan.id,
        "plan_hash": plan.hash,
        "policy": plan.policy_version.policy.slug,
        "policy_version": plan.policy_version.number,
    }


def approval_requested_record(*, plan: Plan, unavailable: str = "") -> AuditRecord:
    """Appended in the transaction that saves a plan a review rule sent to a person. The
    actor is the agent that declared it; ``rule`` names the first step's review rule;
    ``approval_unavailable`` in the details says why nobody can decide, when nobody can."""
    first = plan.review[0]["rule"]
    more = {"approval_unavailable": unavailable} if unavailable else {}
    return record_append(
        **_plan_fields(plan),
        kind=AuditRecord.Kind.APPROVAL_REQUESTED,
        at=plan.created_at,
        actor=agent_actor(plan.agent),
        rule=first,
        details={
            "goal": plan.goal,
            "steps": len(plan.document["steps"]),
            "review": plan.review,
            "deadline": _instant(plan.approval_deadline) if plan.approval_deadline else None,
            **more,
        },
    )


def approval_decided_record(*, plan: Plan) -> AuditRecord:
    """Appended in the transaction that stores a person's decision: who (their e-mail, and
    the door's actor), when, approve or deny, and the reason."""
    assert plan.approval_decided_at is not None
    return record_append(
        **_plan_fields(plan),
        kind=AuditRecord.Kind.APPROVAL_DECIDED,
        at=plan.approval_decided_at,
        actor=current_actor() or plan.approval_by,
        code=plan.approval,
        details={"by": plan.approval_by, "decision": plan.approval, "reason": plan.approval_reason},
    )


def approval_expired_record(*, plan: Plan, at: datetime) -> AuditRecord:
    """Appended in the transaction that marks a request for approval expired."""
    return record_append(
        **_plan_fields(plan),
        kind=AuditRecord.Kind.APPROVAL_EXPIRED,
        at=at,
        details={"deadline": _instant(plan.approval_deadline) if plan.approval_deadline else None},
    )
