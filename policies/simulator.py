"""What a policy version would answer, for a member, to a plan and to one call, without an
agent, a token or a write.

* A plan: what issuance answers under this version: ``allowed`` (with its warnings, and
  the steps a person must approve first, guard.policy_review) or
  ``policy_denied`` naming each step and rule, from the checks issuance itself runs
  (``guard.policy_evaluation.evaluate_plan`` and ``unpinned_policy_arguments``), on the
  member's role and groups as they are now; ``user_disabled`` for a disabled member.
* A call: what the agent's guard answers for it as the first call under a fresh token for
  that plan: the guard's own ``Decider`` decides it, on a ``PlanState`` and a
  ``VerifiedToken`` built from the claims the control plane would sign (the plan, this
  version's document, the member's role and groups). The code, step, rule and reason are
  the guard's, not a second implementation of them.

The plan's ``user`` is set to the simulated member: the simulation answers for the member
chosen, whoever the text names.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

from django.conf import settings

from guard.agent.decider import Decider
from guard.agent.session import CallDecision, PlanState
from guard.agent.verified import VerifiedToken
from guard.claims import IntentClaims
from guard.plan import plan_hash
from guard.policy_evaluation import (
    CompiledPolicy,
    StepWarning,
    evaluate_plan,
    rule_description,
    unpinned_policy_arguments,
)
from guard.policy_review import StepReview, plan_reviews
from kernel.problems import DomainError
from members.models import Member
from plans.services import plan_document_validate

from .impact import RefusedStep, member_role_and_groups
from .models import PolicyVersion
from .services import policy_document_validate

#: the plan id a simulated token carries (a ULID of zeros: never a real plan's)
SIMULATED_PLAN_ID: Final = "0" * 26

ALLOWED: Final = "allowed"
POLICY_DENIED: Final = "policy_denied"
USER_DISABLED: Final = "user_disabled"


@dataclass(frozen=True)
class PlanSimulation:
    """Issuance's answer to ``plan`` for ``member`` under ``version``."""

    version: PolicyVersion
    member: Member
    role: str | None
    groups: tuple[str, ...]
    plan: dict[str, Any]
    decision: str
    denials: tuple[RefusedStep, ...]
    warnings: tuple[StepWarning, ...]
    #: the admitted steps a review rule sends to a person: issuance answers 202 and signs
    #: once approved (guard.policy_review); calls are then decided as simulated
    reviews: tuple[StepReview, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.decision == ALLOWED

    def as_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "policy": self.version.policy.slug,
            "version": self.version.number,
            "user": self.member.email,
            "role": self.role,
            "groups": list(self.groups),
            "steps": [step.as_json() for step in self.denials],
            "warnings": [
                {"path": f"plan.{warning.path}", "code": warning.code, "detail": warning.detail}
                for warning in self.warnings
            ],
            "review": [
                {"path": f"plan.{review.path}", "tool": review.tool, "rule": review.rule}
                for review in self.reviews
            ],
        }


@dataclass(frozen=True)
class CallSimulation:
    """The guard's answer to one call under the plan; ``guard`` None when issuance would
    refuse the plan (no token: the guard never decides)."""

    plan: PlanSimulation
    tool: object
    args: object
    guard: CallDecision | None

    @property
    def allowed(self) -> bool:
        return self.guard is not None and self.guard.allowed

    @property
    def rule_text(self) -> str | None:
        """The deciding rule as the version's page names it, or None (the default, or the
        policy was not consulted)."""
        if self.guard is None or self.guard.rule is None:
            return None
        rule = self.plan.version.document["rules"][self.guard.rule]
        return rule_description(rule, self.guard.rule)

    def as_json(self) -> dict[str, Any]:
        decision = self.guard
        return {
            "plan": self.plan.as_json(),
            "call": None
            if decision is None
            else {
                "tool": self.tool,
                "decision": decision.code.value,
                "step": decision.step,
                "rule": decision.rule,
                "ruleDescription": decision.rule_description,
                "reason": decision.reason,
            },
        }


def simulate_plan(*, version: PolicyVersion, member: Member, document: object) -> PlanSimulation:
    """Issuance's answer under ``version``. DomainError ``invalid_plan`` (paths under
    ``plan``) for a bad plan, ``unknown_user`` for a member of another team."""
    if member.team_id != version.policy.team_id:
        raise DomainError("unknown_user", f"{member.email} is not a member of this team.")
    if isinstance(document, dict):
        document = {**document, "user": member.email}
    plan = plan_document_validate(document)
    role, groups = member_role_and_groups(member)
    if not member.is_active:
        decision, denials, warnings, reviews = USER_DISABLED, [], [], []
    else:
        denials = evaluate_plan(version.document, plan, role=role, groups=groups)
        warnings = (
            []
            if denials
            else unpinned_policy_arguments(version.document, plan, role=role, groups=groups)
        )
        decision = POLICY_DENIED if denials else ALLOWED
        reviews = (
            plan_reviews(version.document, plan, role=role, groups=groups, denials=denials)
            if not denials
            else []
        )
    return PlanSimulation(
        version=version,
        member=member,
        role=role,
        groups=groups,
        plan=plan,
        decision=decision,
        denials=tuple(
            RefusedStep(index=denial.step, tool=denial.tool, rule=denial.rule, reason=denial.reason)
            for denial in denials
        ),
        warnings=tuple(warnings),
        reviews=tuple(reviews),
    )


def simulate_call(
    *, version: PolicyVersion, member: Member, document: object, tool: object, args: object
) -> CallSimulation:
    """The guard's answer to calling ``tool`` with ``args`` first under the plan."""
    plan = simulate_plan(version=version, member=member, document=document)
    if not plan.allowed:
        return CallSimulation(plan=plan, tool=tool, args=args, guard=None)
    decider = Decider(
        lock=threading.Lock(),
        publish=_shown_nowhere,
        wake_refresher=_no_refresh,
        auto_refresh=False,
    )
    state = PlanState(
        SIMULATED_PLAN_ID,
        plan.plan,
        plan_hash(plan.plan),
        _fresh_token(plan),
        report_arguments=False,
    )
    return CallSimulation(
        plan=plan, tool=tool, args=args, guard=decider.decide(state, tool, args, time.time())
    )


def _fresh_token(plan: PlanSimulation) -> VerifiedToken:
    """A verified token as the guard holds one after declaring ``plan``: the claims the
    control plane signs (plans.intent_tokens) and the policy snapshot compiled for the
    member as the guard compiles it (guard.agent.answer). Never expiring: a simulated call
    is decided, not timed."""
    version = plan.version
    now = int(time.time())
    claims = IntentClaims(
        iss=settings.PLANGATE_ISSUER,
        sub=plan.member.email,
        jti=SIMULATED_PLAN_ID,
        iat=now,
        exp=now + settings.PLANGATE_TOKEN_TTL,
        ph=plan_hash(plan.plan),
        plan=plan.plan,
        agent="",
        pol=version.document,
        polv=version.number,
        polh=version.hash,
        role=plan.role,
        groups=plan.groups,
    )
    # An old version is checked by today's validator too (invalid_policy, with paths), as a
    # guard would check the snapshot its token carries.
    policy = CompiledPolicy(
        policy_document_validate(claims.pol), role=claims.role, groups=claims.groups
    )
    return VerifiedToken("", claims, policy, math.inf, math.inf, kid="")


def _shown_nowhere(*args: Any, **kwargs: Any) -> None:
    """No ACP display: nobody watches a simulated plan."""


def _no_refresh() -> None:
    """No refresher: a simulated token never needs one."""
