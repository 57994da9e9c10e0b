"""The token of a plan a person approved: ``POST /v1/plans/{id}/token``.

Signed when asked, not when approved, and with the agent's CURRENT policy, role and groups,
as issuance would sign it: the member and the policy are checked again (a policy that now
denies a step answers ``policy_denied``; one that asks review of a step nobody approved,
``approval_required``). Until then the answer says where the approval stands:
``approval_pending`` (with Retry-After), ``approval_denied`` (with the reason) or
``approval_expired``. Asking again once approved signs a fresh token, so a client whose
answer was lost simply asks again.
"""

from __future__ import annotations

from django.utils import timezone

from kernel.problems import Code, DomainError
from members.models import Agent
from members.services import agent_require_active

from .approvals import (
    APPROVAL_POLL_SECONDS,
    plan_approval_expire,
)
from .models import Plan, PlanToken
from .records import (
    RefusalContext,
    refresh_context,
    refusals_described,
)
from .services import (
    IssuedToken,
    plan_get_for_agent,
    plan_token_sign_current,
    token_ttl_resolve,
)


def plan_approved_token_issue(*, agent: Agent, plan_id: str, ttl: int | None = None) -> IssuedToken:
    """Sign a token for the agent's plan that a person approved; refusals say why not
    (module docstring). The first token appends ``plan_issued``, a later one
    ``token_refreshed``."""
    with refusals_described(refresh_context(plan_id)) as refusal:
        return _approved_token_issue(agent, plan_id, ttl, refusal)


def _approval_require(plan: Plan) -> None:
    """Refuse unless a person approved the plan; an expired wait is marked so here too."""
    if plan.approval == Plan.Approval.PENDING:
        if plan_approval_expire(plan=plan):
            raise DomainError(
                Code.APPROVAL_EXPIRED, "Nobody decided within the team's approval window."
            )
        raise DomainError(
            Code.APPROVAL_PENDING,
            "The plan is waiting for a person's approval; ask again later.",
            headers={"Retry-After": str(APPROVAL_POLL_SECONDS)},
        )
    if plan.approval == Plan.Approval.EXPIRED:
        raise DomainError(
            Code.APPROVAL_EXPIRED, "Nobody decided within the team's approval window."
        )
    if plan.approval == Plan.Approval.DENIED:
        raise DomainError(
            Code.APPROVAL_DENIED, f"{plan.approval_by} denied the plan: {plan.approval_reason}"
        )
    if plan.approval != Plan.Approval.APPROVED:
        raise DomainError(
            Code.APPROVAL_NOT_PENDING,
            "The plan needed no approval: its token came with the declaration; refresh it.",
        )


def _approved_token_issue(
    agent: Agent, plan_id: str, ttl: int | None, refusal: RefusalContext
) -> IssuedToken:
    ttl = token_ttl_resolve(ttl)
    plan = plan_get_for_agent(agent=agent, plan_id=plan_id)
    refusal.plan_from(plan)
    agent_require_active(agent=agent)
    if plan.status == Plan.Status.REVOKED:
        raise DomainError(Code.PLAN_REVOKED, "The plan was revoked; declare a new plan.")
    _approval_require(plan)
    now = timezone.now()
    if plan.status == Plan.Status.EXPIRED or plan.is_expired(now):
        raise DomainError(Code.PLAN_EXPIRED, "The plan is past its lifetime; declare a new plan.")
    return plan_token_sign_current(
        plan=plan, agent=agent, ttl=ttl, now=now, refusal=refusal, kind=PlanToken.Kind.ISSUE
    )
