"""What issuance would answer to a plan, and what the guard would answer to a call under it,
without a control plane, a token or a network: the one home of the policy simulator
(``rehearsal.simulator``, in the control plane's admin) and of ``plangate check`` and
``plangate test`` (guard.cli).

* A plan: the checks issuance itself runs on a validated plan and policy for a member's
  role and groups (`evaluate_plan`, `plan_argument_warnings`, `plan_reviews`), and the
  ``policy_denied`` refusal as the control plane words it (`PlanAnswer.refusal_errors`).
* A call: the guard's own `Decider` decides it as the first call under a fresh token for
  the plan, on a `PlanState` and a `VerifiedToken` built from the claims the control plane
  would sign (the plan, the policy document, the member's role and groups), the policy
  snapshot compiled as the guard compiles a verified token's (guard.agent.answer).

I/O-free and httpx-free, like the decider and session it drives: the control plane
imports it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from guard.agent.decider import Decider
from guard.agent.session import CallDecision, PlanState
from guard.agent.verified import VerifiedToken
from guard.claims import IntentClaims
from guard.errors import FieldError
from guard.plan import plan_hash
from guard.policy import policy_hash, validate_policy
from guard.policy_evaluation import (
    CompiledPolicy,
    StepDenial,
    StepWarning,
    evaluate_plan,
    plan_argument_warnings,
)
from guard.policy_review import StepReview, plan_reviews

__all__ = [
    "ALLOWED",
    "OFFLINE_ISSUER",
    "OFFLINE_TOKEN_TTL",
    "POLICY_DENIED",
    "SIMULATED_PLAN_ID",
    "PlanAnswer",
    "call_decide",
    "member_groups",
    "plan_answer",
    "simulated_token",
]

#: the plan id a simulated token carries (a ULID of zeros: never a real plan's)
SIMULATED_PLAN_ID: Final = "0" * 26
#: the issuer and lifetime of an offline token, where no control plane names them; neither
#: changes a decision (the token never expires while a call is decided)
OFFLINE_ISSUER: Final = "urn:plangate:offline"
OFFLINE_TOKEN_TTL: Final = 900

ALLOWED: Final = "allowed"
POLICY_DENIED: Final = "policy_denied"


def member_groups(groups: Iterable[str]) -> tuple[str, ...]:
    """Group names as a token carries them: each once, sorted (members.Member.group_names)."""
    return tuple(sorted(set(groups)))


@dataclass(frozen=True)
class PlanAnswer:
    """Issuance's answer to a validated ``plan`` under a validated ``policy`` for a member
    with ``role`` and ``groups``: refused (``denials``, one per refused step) or admitted,
    with its warnings and the steps a person must approve first (``reviews``)."""

    plan: dict[str, Any]
    policy: dict[str, Any]
    role: str | None
    groups: tuple[str, ...]
    denials: tuple[StepDenial, ...]
    warnings: tuple[StepWarning, ...]
    reviews: tuple[StepReview, ...]

    @property
    def allowed(self) -> bool:
        return not self.denials

    @property
    def decision(self) -> str:
        return ALLOWED if self.allowed else POLICY_DENIED

    def refusal_errors(self) -> list[FieldError]:
        """The ``errors`` of the control plane's ``policy_denied`` answer: one per refused
        step, at ``plan.steps[i]``, naming the tool, the reason and the rule."""
        return [denial.error() for denial in self.denials]


def plan_answer(
    *, policy: dict[str, Any], plan: dict[str, Any], role: str | None, groups: Sequence[str]
) -> PlanAnswer:
    """Issuance's answer: ``policy`` and ``plan`` already validated (guard.policy,
    guard.plan), ``groups`` as the token carries them (`member_groups`)."""
    denials = evaluate_plan(policy, plan, role=role, groups=groups)
    if denials:
        warnings: list[StepWarning] = []
        reviews: list[StepReview] = []
    else:
        warnings = plan_argument_warnings(policy, plan, role=role, groups=groups)
        reviews = plan_reviews(policy, plan, role=role, groups=groups, denials=denials)
    return PlanAnswer(
        plan=plan,
        policy=policy,
        role=role,
        groups=tuple(groups),
        denials=tuple(denials),
        warnings=tuple(warnings),
        reviews=tuple(reviews),
    )


def simulated_token(
    *,
    plan: dict[str, Any],
    policy: dict[str, Any],
    role: str | None,
    groups: tuple[str, ...],
    issuer: str = OFFLINE_ISSUER,
    ttl: int = OFFLINE_TOKEN_TTL,
    policy_version: int = 0,
    policy_digest: str | None = None,
    validate: Callable[[object], dict[str, Any]] = validate_policy,
) -> VerifiedToken:
    """A verified token as the guard holds one after declaring ``plan`` (validated, and
    admitted by ``policy``: `plan_answer`) for a member with ``role`` and ``groups``: the claims
    the control plane signs (plans.intent_tokens) and the policy snapshot checked by
    ``validate`` and compiled for the member as the guard does (guard.agent.answer). Never
    expiring: a simulated call is decided, not timed."""
    now = int(time.time())
    claims = IntentClaims(
        iss=issuer,
        sub=plan["user"],
        jti=SIMULATED_PLAN_ID,
        iat=now,
        exp=now + ttl,
        ph=plan_hash(plan),
        plan=plan,
        agent="",
        pol=policy,
        polv=policy_version,
        polh=policy_hash(policy) if policy_digest is None else policy_digest,
        role=role,
        groups=groups,
    )
    compiled = CompiledPolicy(validate(claims.pol), role=claims.role, groups=claims.groups)
    return VerifiedToken("", claims, compiled, math.inf, math.inf, kid="")


def call_decide(token: VerifiedToken, calls: Sequence[tuple[object, object]]) -> list[CallDecision]:
    """The guard's decisions on ``calls`` (tool, args), made one after the other under a
    fresh plan state holding ``token``: the first is the first call of the plan, and each
    allowed call counts against its step (and its budgets) as in the guard, then returns:
    its step is completed, as `Guard.call` completes it, so that a later call of a step
    running `after` it is in order."""
    lock = threading.Lock()
    decider = Decider(
        lock=lock,
        publish=_shown_nowhere,
        wake_refresher=_no_refresh,
        auto_refresh=False,
    )
    plan = token.claims.plan
    state = PlanState(SIMULATED_PLAN_ID, plan, token.claims.ph, token, report_arguments=False)
    decisions = []
    for tool, args in calls:
        decision = decider.decide(state, tool, args, time.time())
        if decision.allowed and decision.step is not None:
            with lock:
                state.complete_step(decision.step)
        decisions.append(decision)
    return decisions


def _shown_nowhere(*args: Any, **kwargs: Any) -> None:
    """No ACP display: nobody watches a simulated plan."""


def _no_refresh() -> None:
    """No refresher: a simulated token never needs one."""
