"""Child plans: an agent delegates part of its plan to a sub-agent (docs/decisions/0070).

``plan_delegate`` signs a child plan whose every call its parent admits, for the parent's
member, under the receiving agent's own policy (checked exactly as issuance checks it), for
no longer than the parent lives, and reserves from the parent what the child may spend:

* **inside**: each child step is inside a step of the parent: the same tool, every argument
  the parent step pins pinned by the child inside it (guard.relation; a relation it cannot
  decide is refused as widening), a closed parent step (``additionalArgs: false``) only by
  a closed child step pinning no other argument. A parent step with ``after`` is never
  delegated from: the child's guard cannot see whether the parent's earlier steps ran;
* **partitioned**: each child step reserves its ``maxCalls`` from the first parent step it
  is inside that has that many left, and each parent budget counting that step must be
  matched by a child budget over the same argument counting the child step, which reserves
  its ``max`` from the parent budget. What is left of a parent step is its ``maxCalls``
  less every child's reservation and less the calls the parent's guard reported allowed;
  of a budget, its ``max`` less reservations and the amounts reported. A reservation is
  never given back (a revoked or ended child's guard may have allowed calls it never
  reported), so the calls of a whole tree never exceed the root's.

The parent's row is locked while the reservations are read and the child is saved, so two
delegations at the same time cannot both take the parent's last calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_append
from guard.budgets import Amount, add_exactly, exact_amount, format_amount
from guard.claims import MAX_ACT_DEPTH
from guard.decisions import Decision
from guard.errors import FieldError, index_path, key_path
from guard.plan import plan_hash
from guard.policy_review import plan_reviews
from guard.relation import Relation, constraint_relation, describe_constraint, relation_budget
from kernel.problems import Code, DomainError
from kernel.sql import row_insert
from members.models import Agent, email_case_lookalike, email_normalize
from members.services import agent_require_active

from .intent_tokens import Signature, intent_token_sign
from .lineage import plan_ancestors, plan_require_live
from .models import Plan, PlanEvent, PlanToken
from .records import (
    RefusalContext,
    agent_actor,
    given_user,
    plan_issued_record,
    refusals_described,
)
from .selectors import signing_context_read
from .services import (
    IssuedToken,
    admitted_policy_version,
    argument_warnings,
    member_require_active,
    plan_document_validate,
    plan_get_for_agent,
    token_record,
    token_ttl_resolve,
)
from .status_list import status_idx_allocate

__all__ = ["DelegatedToken", "plan_delegate"]


@dataclass(frozen=True)
class DelegatedToken:
    """A child plan's first token (``issued``, the issuance answer), its parent, and what
    it reserved of the parent (Plan.reserved)."""

    issued: IssuedToken
    parent: Plan
    reserved: dict[str, Any]


def plan_delegate(
    *,
    agent: Agent,
    parent_id: str,
    document: object,
    to_agent_id: str | None = None,
    ttl: int | None = None,
    jkt: str = "",
) -> DelegatedToken:
    """Sign ``document`` as a child of the agent's own plan ``parent_id``, for the agent
    ``to_agent_id`` (the caller when None), its tokens bound to the key thumbprint ``jkt``
    (the receiving guard's; "" unbound, refused when the team binds every token: the
    delegation request's own DPoP proof is the parent's key, not the child's). Every
    check runs before the first write; a refusal is a PlanRefused (plans.records) and
    writes nothing. A success appends
    ``plan_issued`` for the child and ``plan_delegated`` naming parent, child, both agents
    and the reservation."""
    context = RefusalContext(user=given_user(document))
    with refusals_described(context) as refusal:
        return _plan_delegate(agent, parent_id, document, to_agent_id, ttl, jkt, refusal)


def _plan_delegate(
    agent: Agent,
    parent_id: str,
    document: object,
    to_agent_id: str | None,
    ttl: int | None,
    jkt: str,
    refusal: RefusalContext,
) -> DelegatedToken:
    ttl = token_ttl_resolve(ttl)
    child_document = plan_document_validate(document)
    refusal.plan_hash = plan_hash(child_document)
    agent_require_active(agent=agent)
    parent = plan_get_for_agent(agent=agent, plan_id=parent_id)
    refusal.named_plan_id = parent.pk
    now = timezone.now()
    plan_require_live(parent, now, named="parent plan")
    for ancestor in plan_ancestors(parent):
        plan_require_live(ancestor, now, named=f"parent plan {ancestor.pk}")
    receiver = _receiving_agent(agent, to_agent_id)
    if not jkt and parent.team.require_token_binding:
        raise DomainError(
            Code.INVALID_REQUEST,
            "The team binds every plan's tokens to a key: name the receiving guard's key.",
            errors=[FieldError("jkt", "is required: the team binds every token")],
        )
    act = _act_chain(parent, receiver)
    context = signing_context_read(agent=receiver, member_email=child_document["user"])
    _user_require_parents(context.member, child_document["user"], parent)
    member = member_require_active(parent.member)
    role, groups = context.role, context.groups
    version = admitted_policy_version(receiver, child_document, context, refusal)
    warnings = argument_warnings(version, child_document, role, groups)
    if plan_reviews(version.document, child_document, role=role, groups=groups, denials=()):
        raise DomainError(
            Code.APPROVAL_REQUIRED,
            f"Policy {version.policy.slug} v{version.number} asks a person to approve steps"
            " of the child plan; a child plan cannot wait for approval: declare it as a plan.",
        )
    candidates = _parent_steps_holding(child_document, parent.document)
    child = Plan(
        team=parent.team,
        agent=receiver,
        member=member,
        goal=child_document["goal"],
        document=child_document,
        hash=refusal.plan_hash,
        policy_version=version,
        role=role,
        groups=groups,
        created_at=now,
        expires_at=min(parent.expires_at, now + timedelta(seconds=settings.PLANGATE_PLAN_MAX_AGE)),
        parent=parent,
        act=act,
        jkt=jkt,
    )
    with transaction.atomic():
        # The parent's row, locked (PostgreSQL; SQLite's IMMEDIATE transaction holds the
        # writer lock already): a revocation or another delegation waits for this one.
        locked = Plan.objects.select_for_update().only("status", "expires_at").get(pk=parent.pk)
        plan_require_live(locked, now, named="parent plan")
        child.reserved = _reserve(child_document, parent, candidates)
        # Signed here, not before the transaction as issuance does: its status list index
        # is taken only once the reservation fits, so a refusal moves no counter either.
        child.status_idx = status_idx_allocate(team=parent.team)
        signature = intent_token_sign(
            plan=child,
            member=member,
            role=role,
            groups=groups,
            version=version,
            ttl=ttl,
            now=now,
            active_key=context.active_key,
        )
        row_insert(child)
        _child_records(child, parent, agent, signature, ttl)
        issued = token_record(
            plan=child,
            kind=PlanToken.Kind.ISSUE,
            signature=signature,
            role=role,
            groups=groups,
            version=version,
            warnings=warnings,
        )
    return DelegatedToken(issued=issued, parent=parent, reserved=child.reserved)


# --- who receives ---------------------------------------------------------------------------

# An agent id is a ULID, as a plan id (plans.services).
_AGENT_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def _receiving_agent(caller: Agent, to_agent_id: str | None) -> Agent:
    """The caller, or an active agent of its team that accepts delegations; else
    ``delegation_refused`` at ``agent`` (another team's agent is answered alike)."""
    if to_agent_id is None or to_agent_id == caller.pk:
        return caller
    receiver = None
    if _AGENT_ID.fullmatch(to_agent_id):  # other text names no agent, nor reaches SQL
        receiver = (
            Agent.objects.select_related("team", "policy")
            .filter(pk=to_agent_id, team_id=caller.team_id)
            .first()
        )
    if receiver is None or not receiver.is_active or not receiver.accepts_delegations:
        raise DomainError(
            Code.DELEGATION_REFUSED,
            "That agent does not receive delegations from this one.",
            errors=[
                FieldError(
                    "agent",
                    "must be the calling agent or an active agent of its team that accepts"
                    " delegations",
                )
            ],
        )
    return receiver


def _act_chain(parent: Plan, receiver: Agent) -> dict[str, Any]:
    """The child's RFC 8693 ``act``: the receiving agent, delegated to by the parent's
    actor chain (or, for a root plan, by the parent's agent)."""
    previous = parent.act or {"sub": parent.agent_id}
    depth, level = 1, previous
    while isinstance(level, Mapping) and "act" in level:
        depth, level = depth + 1, level["act"]
    if depth + 1 > MAX_ACT_DEPTH:
        raise DomainError(
            Code.DELEGATION_REFUSED,
            f"A chain of delegations is at most {MAX_ACT_DEPTH} agents long.",
            errors=[FieldError("agent", f"the chain would be {depth + 1} agents long")],
        )
    return {"sub": receiver.pk, "act": previous}


def _user_require_parents(found: Any, user: str, parent: Plan) -> None:
    """The child's user must be the parent's member, as stored (a look-alike of their
    address is another user)."""
    if (
        found is None
        or found.pk != parent.member_id
        or email_case_lookalike(user) is not None
        or email_normalize(user) != email_normalize(parent.member.email)
    ):
        raise DomainError(
            Code.DELEGATION_WIDENS,
            "A child plan is for the parent plan's user.",
            errors=[FieldError("plan.user", f"must be {parent.member.email}")],
        )


# --- inside ---------------------------------------------------------------------------------


def _step_inside(
    child: Mapping[str, Any],
    parent: Mapping[str, Any],
    path: str,
    child_summed: frozenset[str] = frozenset(),
    parent_summed: frozenset[str] = frozenset(),
) -> list[FieldError]:
    """Why the calls of child step ``child`` (at ``path``) are not all calls of parent step
    ``parent``; empty when they are. ``*_summed``: the arguments the budgets counting each
    step sum, which a closed step admits too (guard.plan's allowed_arguments)."""
    if child["tool"] != parent["tool"]:
        return [FieldError(key_path(path, "tool"), f"the parent step calls {parent['tool']}")]
    errors: list[FieldError] = []
    child_args: Mapping[str, Any] = child["args"]
    for name, constraint in parent["args"].items():
        arg_path = key_path(key_path(path, "args"), name)
        pinned = child_args.get(name)
        if pinned is None:
            errors.append(
                FieldError(arg_path, f"the parent step pins it: {describe_constraint(constraint)}")
            )
            continue
        relation = constraint_relation(pinned, constraint)
        if relation is not Relation.INSIDE:
            said = "cannot be shown" if relation is Relation.UNDECIDABLE else "is not"
            errors.append(
                FieldError(
                    arg_path, f"{said} inside the parent's {describe_constraint(constraint)}"
                )
            )
    if parent.get("additionalArgs", True) is False:
        if child.get("additionalArgs", True) is not False:
            errors.append(
                FieldError(
                    key_path(path, "additionalArgs"),
                    "must be false: the parent step admits no other argument",
                )
            )
        errors.extend(
            FieldError(
                key_path(key_path(path, "args"), name),
                "the parent step is closed and does not name it",
            )
            for name in sorted(set(child_args) | child_summed)
            if name not in parent["args"] and name not in parent_summed
        )
    if parent.get("after") and not errors:
        errors.append(
            FieldError(
                path,
                "the parent step runs only after others (after); its order cannot be kept by"
                " a child plan",
            )
        )
    return errors


def _parent_steps_holding(child: Mapping[str, Any], parent: Mapping[str, Any]) -> list[list[int]]:
    """For each child step, the parent steps it is inside, in the parent's order; else
    ``delegation_widens`` with each step's reasons (against the first parent step of the
    same tool, or its tool)."""
    holding: list[list[int]] = []
    errors: list[FieldError] = []
    child_summed, parent_summed = _summed_arguments(child), _summed_arguments(parent)
    with relation_budget():
        for index, step in enumerate(child["steps"]):
            path = index_path("plan.steps", index)
            inside, first_reasons = [], None
            for parent_index, parent_step in enumerate(parent["steps"]):
                reasons = _step_inside(
                    step, parent_step, path, child_summed[index], parent_summed[parent_index]
                )
                if not reasons:
                    inside.append(parent_index)
                elif first_reasons is None and parent_step["tool"] == step["tool"]:
                    first_reasons = reasons
            if not inside:
                errors.extend(
                    first_reasons
                    or [FieldError(key_path(path, "tool"), "no step of the parent calls it")]
                )
            holding.append(inside)
    if errors:
        raise DomainError(
            Code.DELEGATION_WIDENS,
            "The child plan admits calls its parent does not.",
            errors=errors,
        )
    return holding


# --- partition ------------------------------------------------------------------------------


def _amount(value: object) -> Amount:
    """An amount as Plan.reserved keeps it (text) or as a guard reported it (a number)."""
    if isinstance(value, str):
        return int(value) if value.isdigit() else Decimal(value)
    found = exact_amount(value)
    return 0 if found is None else found


def _sum(total: Amount, amount: Amount) -> Amount:
    summed = add_exactly(total, amount)
    return Decimal("Infinity") if summed is None else summed


def _parent_spent(parent: Plan) -> tuple[list[int], dict[str, Amount]]:
    """What of the parent is taken: per step, the calls reserved by its children and the
    calls its guard reported allowed; per budget, the amounts reserved and reported."""
    calls = [0] * len(parent.document["steps"])
    amounts: dict[str, Amount] = {}
    for reserved in Plan.objects.filter(parent=parent).values_list("reserved", flat=True):
        for step, count in (reserved or {}).get("calls", {}).items():
            calls[int(step)] += int(count)
        for budget_id, amount in (reserved or {}).get("budgets", {}).items():
            amounts[budget_id] = _sum(amounts.get(budget_id, 0), _amount(amount))
    allowed = PlanEvent.objects.filter(plan=parent, decision=Decision.ALLOWED.value)
    for step, counted in allowed.values_list("step", "amounts"):
        if step is not None and 0 <= step < len(calls):
            calls[step] += 1
        for budget_id, amount in (counted or {}).items():
            amounts[budget_id] = _sum(amounts.get(budget_id, 0), _amount(amount))
    return calls, amounts


def _budget_indexes(document: Mapping[str, Any]) -> list[list[int]]:
    """For each step, the indexes of the plan's budgets counting it."""
    ids = {step["id"]: index for index, step in enumerate(document["steps"]) if "id" in step}
    counting: list[list[int]] = [[] for _ in document["steps"]]
    for budget_index, budget in enumerate(document.get("budgets", ())):
        for step_id in budget["steps"]:
            if step_id in ids:
                counting[ids[step_id]].append(budget_index)
    return counting


def _budgets_matched(
    child: Mapping[str, Any],
    child_counting: Sequence[int],
    parent: Mapping[str, Any],
    parent_counting: Sequence[int],
) -> dict[int, int] | None:
    """For each parent budget counting the parent step, the child budget over the same
    argument counting ``child_step`` (parent budget index -> child budget index); None
    when one is missing."""
    matched: dict[int, int] = {}
    for parent_budget in parent_counting:
        arg = parent["budgets"][parent_budget]["arg"]
        found = next(
            (k for k in child_counting if child["budgets"][k]["arg"] == arg),
            None,
        )
        if found is None:
            return None
        matched[parent_budget] = found
    return matched


def _summed_arguments(document: Mapping[str, Any]) -> list[frozenset[str]]:
    """For each step, the arguments the budgets counting it sum."""
    budgets = document.get("budgets", ())
    return [
        frozenset(budgets[k]["arg"] for k in counting) for counting in _budget_indexes(document)
    ]


def _reserve(
    child: Mapping[str, Any], parent: Plan, candidates: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """What the child reserves of the parent, read under the parent's lock: Plan.reserved
    ``{"calls": {parent step: n}, "budgets": {parent budget id: amount}, "steps": {child
    step: parent step}}``; else ``budget_unavailable`` (409) at the maxCalls or budget max
    that does not fit, or ``delegation_widens`` at a child step no matching budget counts."""
    document = parent.document
    calls_taken, amounts_taken = _parent_spent(parent)
    left = [step["maxCalls"] - calls_taken[i] for i, step in enumerate(document["steps"])]
    parent_counting = _budget_indexes(document)
    child_counting = _budget_indexes(child)
    reserved_calls: dict[int, int] = {}
    steps: dict[int, int] = {}
    # parent budget index -> the child budgets that reserve from it
    reserving: dict[int, set[int]] = {}
    for index, step in enumerate(child["steps"]):
        path = index_path("plan.steps", index)
        budgeted = [
            (p, m)
            for p in candidates[index]
            if (m := _budgets_matched(child, child_counting[index], document, parent_counting[p]))
            is not None
        ]
        if not budgeted:
            raise DomainError(
                Code.DELEGATION_WIDENS,
                "The child plan spends from a parent budget without a budget of its own.",
                errors=[
                    FieldError(
                        path,
                        "the parent step it is inside is counted by budgets "
                        + ", ".join(
                            f"{document['budgets'][b]['id']} (over {document['budgets'][b]['arg']})"
                            for b in parent_counting[candidates[index][0]]
                        )
                        + "; a child budget over the same argument must count this step",
                    )
                ],
            )
        chosen = next(((p, m) for p, m in budgeted if left[p] >= step["maxCalls"]), None)
        if chosen is None:
            best = max(left[p] for p, _ in budgeted)
            raise DomainError(
                Code.BUDGET_UNAVAILABLE,
                "The parent has not that many calls left.",
                errors=[
                    FieldError(
                        key_path(path, "maxCalls"),
                        f"the parent steps it is inside have at most {max(best, 0)} calls left",
                    )
                ],
            )
        parent_step, matched = chosen
        left[parent_step] -= step["maxCalls"]
        reserved_calls[parent_step] = reserved_calls.get(parent_step, 0) + step["maxCalls"]
        steps[index] = parent_step
        for parent_budget, child_budget in matched.items():
            reserving.setdefault(parent_budget, set()).add(child_budget)
    reserved_budgets: dict[str, Amount] = {}
    for parent_budget, child_budgets in sorted(reserving.items()):
        budget = document["budgets"][parent_budget]
        remaining = _sum(_amount(budget["max"]), 0) - amounts_taken.get(budget["id"], 0)
        total: Amount = 0
        for child_budget in sorted(child_budgets):
            total = _sum(total, _amount(child["budgets"][child_budget]["max"]))
            if total > remaining:
                raise DomainError(
                    Code.BUDGET_UNAVAILABLE,
                    "The parent's budget has not that much left.",
                    errors=[
                        FieldError(
                            key_path(index_path("plan.budgets", child_budget), "max"),
                            f"the parent's budget {budget['id']} has"
                            f" {format_amount(max(remaining, 0))} left",
                        )
                    ],
                )
        reserved_budgets[budget["id"]] = total
    return {
        "calls": {str(step): count for step, count in sorted(reserved_calls.items())},
        "budgets": {key: format_amount(amount) for key, amount in reserved_budgets.items()},
        "steps": {str(child_step): parent_step for child_step, parent_step in steps.items()},
    }


# --- records --------------------------------------------------------------------------------


def _child_records(
    child: Plan, parent: Plan, caller: Agent, signature: Signature, ttl: int
) -> None:
    """``plan_issued`` for the child (its first token, as any plan's), and
    ``plan_delegated``: who delegated what to whom, and what it reserved."""
    plan_issued_record(
        plan=child,
        kid=signature.kid,
        issued_at=signature.issued_at,
        expires_at=signature.expires_at,
        ttl=ttl,
    )
    record_append(
        team=parent.team_id,
        kind=AuditRecord.Kind.PLAN_DELEGATED,
        at=child.created_at,
        actor=agent_actor(caller),
        agent_id=caller.pk,
        agent_name=caller.name,
        user=child.member.email,
        plan_id=parent.pk,
        plan_hash=parent.hash,
        policy=child.policy_version.policy.slug,
        policy_version=child.policy_version.number,
        details={
            "parent": parent.pk,
            "child": child.pk,
            "childHash": child.hash,
            "from": caller.pk,
            "to": child.agent_id,
            "toName": child.agent.name,
            "act": child.act,
            "reserved": child.reserved,
            "expiresAt": int(child.expires_at.timestamp()),
        },
    )
