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

from django.db import transaction
from django.utils import timezone

from guard.policy_review import plan_reviews
from kernel.problems import DomainError
from members.models import Agent
from members.services import agent_require_active

from .approvals import (
    APPROVAL_POLL_SECONDS,
    approval_still_covers,
    plan_approval_expire,
)
from .intent_tokens import intent_token_sign
from .models import Plan, PlanToken
from .records import (
    RefusalContext,
    plan_issued_record,
    refresh_context,
    refusals_described,
    token_refreshed_record,
)
from .services import (
    IssuedToken,
    _admitted_policy_version,
    _member_require_active,
    _record_token,
    _role_and_groups,
    _unpinned_argument_warnings,
    plan_get_for_agent,
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
                "approval_expired", "Nobody decided within the team's approval window."
            )
        raise DomainError(
            "approval_pending",
            "The plan is waiting for a person's approval; ask again later.",
            headers={"Retry-After": str(APPROVAL_POLL_SECONDS)},
        )
    if plan.approval == Plan.Approval.EXPIRED:
        raise DomainError("approval_expired", "Nobody decided within the team's approval window.")
    if plan.approval == Plan.Approval.DENIED:
        raise DomainError(
            "approval_denied", f"{plan.approval_by} denied the plan: {plan.approval_reason}"
        )
    if plan.approval != Plan.Approval.APPROVED:
        raise DomainError(
            "approval_not_pending",
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
        raise DomainError("plan_revoked", "The plan was revoked; declare a new plan.")
    _approval_require(plan)
    now = timezone.now()
    if plan.status == Plan.Status.EXPIRED or plan.is_expired(now):
        raise DomainError("plan_expired", "The plan is past its lifetime; declare a new plan.")
    member = _member_require_active(plan.member)
    role, groups = _role_and_groups(member)
    version = _admitted_policy_version(agent, plan.document, role, groups, refusal)
    approval = approval_still_covers(
        plan=plan,
        reviews=plan_reviews(version.document, plan.document, role=role, groups=groups, denials=()),
    )
    warnings = _unpinned_argument_warnings(version, plan.document, role, groups)
    signature = intent_token_sign(
        plan=plan,
        member=member,
        role=role,
        groups=groups,
        version=version,
        ttl=ttl,
        now=now,
        approval=approval,
    )
    with transaction.atomic():
        # Under lock: a revocation that lands meanwhile wins, as at refresh.
        status = (
            Plan.objects.select_for_update()
            .filter(pk=plan.pk)
            .values_list("status", flat=True)
            .get()
        )
        if status == Plan.Status.REVOKED:
            raise DomainError("plan_revoked", "The plan was revoked; declare a new plan.")
        if plan.tokens.exists():
            token_refreshed_record(
                plan=plan,
                agent=agent,
                user=member.email,
                version=version,
                kid=signature.kid,
                issued_at=signature.issued_at,
                expires_at=signature.expires_at,
            )
        else:
            plan_issued_record(
                plan=plan,
                kid=signature.kid,
                issued_at=signature.issued_at,
                expires_at=signature.expires_at,
                ttl=ttl,
            )
        return _record_token(
            plan=plan,
            kind=PlanToken.Kind.ISSUE,
            signature=signature,
            role=role,
            groups=groups,
            version=version,
            warnings=warnings,
        )
