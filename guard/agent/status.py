"""What the guard tells its application: the declared plan, and where the session stands."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from guard.agent import acp
from guard.agent.approval import AwaitingPlan
from guard.agent.reporter import ReporterStats
from guard.agent.session import NO_PLAN, PlanState

__all__ = ["DeclaredPlan", "GuardStatus", "StepStatus", "awaiting_status", "session_status"]


@dataclass(frozen=True)
class DeclaredPlan:
    """What `declare` returns: the plan as the control plane signed it; `approved_by` is the
    e-mail of the person who approved it, when a policy's review rule asked for one."""

    plan_id: str
    plan_hash: str
    plan: dict[str, Any]
    expires_at: float
    policy: dict[str, Any]
    report_arguments: bool
    approved_by: str | None = None


@dataclass(frozen=True)
class StepStatus:
    """One step of the plan: `index` counts from 0 (``plan["steps"][index]``), `number`
    from 1, as every text for people does ("step 2"). `used` counts the allowed calls,
    `failed` those whose tool raised (or answered with an error), `delegated` the calls
    reserved for child plans (`Guard.delegate`), which count against `max_calls` too."""

    index: int
    tool: str
    description: str
    required: bool
    used: int
    max_calls: int
    # the ACP entry status: pending, in_progress, completed, cancelled, _awaiting_approval
    status: str
    failed: int = 0
    delegated: int = 0

    @property
    def number(self) -> int:
        """The step as people count it, from 1."""
        return self.index + 1


@dataclass(frozen=True)
class GuardStatus:
    """Where the session stands.

    `state` is ``no_plan``, ``awaiting_approval`` (a person must approve the plan first:
    `blocked` is ``approval_pending``, `review` lists what asked for it), ``active``,
    ``expired`` (the token lapsed and no refresh has succeeded yet), ``invalid`` (the
    token's signing key left the JWKS and no refresh has succeeded yet: calls get
    ``token_invalid``) or ``blocked`` (`blocked` then holds the decision code every call
    gets).
    `approval_url` is the page where a person decides on a plan awaiting approval (None
    when the control plane named none, or no plan awaits approval).
    `required_pending` lists the indexes (from 0) of the required steps that have not run
    yet: not called, or every call of them failed (the tool raised); `complete` is true
    once every required step has run.
    """

    state: str
    plan_id: str | None = None
    blocked: str | None = None
    reason: str = ""
    expires_at: float | None = None
    policy_version: int | None = None
    steps: tuple[StepStatus, ...] = ()
    required_pending: tuple[int, ...] = ()
    complete: bool = False
    refresh_error: str | None = None
    reporter: ReporterStats | None = None
    review: tuple[dict[str, Any], ...] = ()
    # Where a person decides on a plan awaiting approval, when the control plane said.
    approval_url: str | None = None


def _steps(
    document: dict[str, Any],
    descriptions: tuple[str, ...],
    used: list[int],
    statuses: list[str],
    failed: list[int] | None = None,
    delegated: list[int] | None = None,
) -> tuple[StepStatus, ...]:
    return tuple(
        StepStatus(
            index=index,
            tool=step["tool"],
            description=descriptions[index],
            required=step["required"],
            used=used[index] - (delegated[index] if delegated is not None else 0),
            max_calls=step["maxCalls"],
            status=statuses[index],
            failed=failed[index] if failed is not None else 0,
            delegated=delegated[index] if delegated is not None else 0,
        )
        for index, step in enumerate(document["steps"])
    )


def awaiting_status(
    awaiting: AwaitingPlan, *, lock: threading.Lock, reporter: ReporterStats | None
) -> GuardStatus:
    """The status of a session whose plan awaits a person's approval: no token yet."""
    with lock:
        statuses = list(awaiting.statuses)
    steps = _steps(
        awaiting.document,
        tuple(acp.describe_step(step) for step in awaiting.document["steps"]),
        [0] * len(statuses),
        statuses,
    )
    return GuardStatus(
        state="awaiting_approval",
        plan_id=awaiting.id,
        blocked=awaiting.blocked.code.value,
        reason=awaiting.blocked.reason,
        steps=steps,
        required_pending=tuple(step.index for step in steps if step.required),
        complete=False,
        reporter=reporter,
        review=tuple(awaiting.review),
        approval_url=awaiting.approval_url,
    )


def session_status(
    plan: PlanState | None,
    *,
    lock: threading.Lock,
    clock: Callable[[], float],
    reporter: ReporterStats | None,
) -> GuardStatus:
    """The status of a session holding `plan`; `lock` guards its budgets and statuses."""
    if plan is None:
        return GuardStatus(state="no_plan", reason=NO_PLAN.reason, reporter=reporter)
    with lock:
        used = list(plan.used)
        failed = list(plan.failed)
        delegated = list(plan.delegated)
        statuses = list(plan.statuses)
        pending = tuple(plan.required_not_run())
    token = plan.token
    steps = _steps(plan.document, plan.descriptions, used, statuses, failed, delegated)
    if plan.blocked is not None:
        state, reason = "blocked", plan.blocked.reason
    elif token.withdrawn is not None:
        state, reason = (
            "invalid",
            f"the intent token can no longer be trusted: {token.withdrawn}",
        )
    elif clock() >= token.expires_at:
        state, reason = "expired", "the intent token has expired"
    else:
        state, reason = "active", ""
    return GuardStatus(
        state=state,
        plan_id=plan.id,
        blocked=plan.blocked.code.value if plan.blocked is not None else None,
        reason=reason,
        expires_at=token.expires_at,
        policy_version=token.policy_version,
        steps=steps,
        required_pending=pending,
        complete=not pending,
        refresh_error=plan.refresh_error,
        reporter=reporter,
    )
