"""A plan's place in its tree of delegations (docs/decisions/0070): its ancestors, which
must all still be active for it to be used, and its descendants, which stop with it.

Revoking a plan revokes every descendant, and ending one ends them, in the transaction that
changes the plan itself: the status feed and the status list read these rows, so a child's
guard stops within the team's revocation bound, as the parent's does.
"""

from __future__ import annotations

from datetime import datetime

from audit.models import AuditRecord
from audit.services import record_build
from kernel.problems import Code, DomainError

from .models import Plan

#: how deep a tree is walked: far above guard.claims.MAX_ACT_DEPTH, which delegation keeps
_MAX_GENERATIONS = 64


def plan_ancestors(plan: Plan) -> list[Plan]:
    """The plan's parent, its parent's parent, and so on, nearest first."""
    ancestors: list[Plan] = []
    parent_id = plan.parent_id
    while parent_id is not None and len(ancestors) < _MAX_GENERATIONS:
        parent = Plan.objects.only("id", "status", "expires_at", "parent_id").get(pk=parent_id)
        ancestors.append(parent)
        parent_id = parent.parent_id
    return ancestors


def plan_require_live(plan: Plan, now: datetime, *, named: str = "plan") -> None:
    """``plan_revoked`` or ``plan_expired`` (410) unless ``plan`` is active and unexpired.
    ``named`` says which plan a refusal is about ("plan", "parent plan <id>")."""
    if plan.status == Plan.Status.EXPIRED or (
        plan.status == Plan.Status.ACTIVE and plan.is_expired(now)
    ):
        raise DomainError(Code.PLAN_EXPIRED, f"The {named} is past its lifetime.")
    if plan.status != Plan.Status.ACTIVE:
        raise DomainError(
            Code.PLAN_REVOKED, f"The {named} is {plan.get_status_display()}; it is no longer used."
        )


def ancestors_require_live(plan: Plan, now: datetime) -> datetime:
    """``plan_revoked`` or ``plan_expired`` unless every ancestor of ``plan`` is active and
    unexpired: a child plan is never used past its parent. The earliest end of the plan
    and its ancestors, which no token of the plan outlives."""
    ends = plan.expires_at
    for ancestor in plan_ancestors(plan):
        plan_require_live(ancestor, now, named=f"parent plan {ancestor.pk}")
        ends = min(ends, ancestor.expires_at)
    return ends


def descendants_for_update(plan: Plan) -> list[Plan]:
    """Every plan delegated from ``plan``, directly or not, parents first, with what their
    audit records name, each generation locked (PostgreSQL; the caller's transaction, which
    has locked ``plan`` by changing it) before its children are read.

    A delegation locks its parent's row while it saves the child: once a generation is
    locked, every child of it is committed and visible, and any delegation still waiting
    on it then finds its parent stopped. Read all at once, a grandchild saved meanwhile
    would be missed and stay active."""
    found: list[Plan] = []
    generation = [plan.pk]
    for _ in range(_MAX_GENERATIONS):
        children = list(
            Plan.objects.select_for_update(of=("self",))
            .select_related("agent", "member", "policy_version__policy")
            .filter(parent_id__in=generation)
            .order_by("created_at", "id")
        )
        if not children:
            break
        found.extend(children)
        generation = [child.pk for child in children]
    return found


def descendants_end(plan: Plan, *, status: str, actor: str, now: datetime) -> list[AuditRecord]:
    """End every active descendant of ``plan``, which its agent just ended (``status``:
    completed, ended or token_refused), in the caller's transaction; the ``plan_ended``
    records to append, one a descendant, acted by ``actor``."""
    because = f"parent plan {plan.pk} {status}"
    records = []
    for descendant in descendants_for_update(plan):
        if descendant.status != Plan.Status.ACTIVE:
            continue
        Plan.objects.filter(pk=descendant.pk, status=Plan.Status.ACTIVE).update(
            status=Plan.Status.ENDED, ended_at=now, end_reason=because
        )
        records.append(
            record_build(
                team=descendant.team_id,
                kind=AuditRecord.Kind.PLAN_ENDED,
                at=now,
                actor=actor,
                agent_id=descendant.agent_id,
                agent_name=descendant.agent.name,
                user=descendant.member.email,
                plan_id=descendant.pk,
                plan_hash=descendant.hash,
                policy=descendant.policy_version.policy.slug,
                policy_version=descendant.policy_version.number,
                code=Plan.Status.ENDED.value,
                details={"outcome": "ended", "reason": because, "status": "ended"},
            )
        )
    return records
