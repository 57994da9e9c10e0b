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

Both run ``guard.offline``, the Django-free home these answers share with ``plangate check``
and ``plangate test``; this module adds the member, the version and the server's settings.

The plan's ``user`` is set to the simulated member: the simulation answers for the member
chosen, whoever the text names.

The policy is a published version, or a draft (``policy_draft``): a document being edited,
not published, answered as the version it would become (the next number, its own hash).
Nothing is written either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from django.conf import settings

from guard import offline
from guard.agent.session import CallDecision
from guard.agent.verified import VerifiedToken
from guard.offline import SIMULATED_PLAN_ID, call_decide, plan_answer, simulated_token
from guard.policy import policy_hash
from guard.policy_evaluation import StepDenial, StepWarning, rule_description
from guard.policy_review import StepReview
from kernel.problems import Code, DomainError
from members.models import Member
from plans.services import plan_document_validate
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_next_version_number
from policies.services import policy_document_validate

from .impact import RefusedStep, member_role_and_groups

__all__ = [
    "ALLOWED",
    "POLICY_DENIED",
    "SIMULATED_PLAN_ID",
    "USER_DISABLED",
    "CallSimulation",
    "PlanSimulation",
    "PolicyDraft",
    "SimulatedVersion",
    "policy_draft",
    "simulate_call",
    "simulate_plan",
]

ALLOWED: Final = offline.ALLOWED
POLICY_DENIED: Final = offline.POLICY_DENIED
USER_DISABLED: Final = "user_disabled"


@dataclass(frozen=True)
class PolicyDraft:
    """A policy document not published, simulated as the version it would become: the
    policy's next ``number``, the validated document's ``hash`` (``policy_draft``)."""

    policy: Policy
    document: dict[str, Any]
    number: int
    hash: str

    def __str__(self) -> str:
        return f"{self.policy.slug} v{self.number} (draft)"


#: what a simulation runs under: a published version, or a draft
SimulatedVersion = PolicyVersion | PolicyDraft


def policy_draft(*, policy: Policy, document: object) -> PolicyDraft:
    """``document`` as ``policy``'s next version, unpublished. DomainError
    ``invalid_policy`` (with paths) for a document that publishing would refuse."""
    normalized = policy_document_validate(document)
    return PolicyDraft(
        policy=policy,
        document=normalized,
        number=policy_next_version_number(policy=policy),
        hash=policy_hash(normalized),
    )


@dataclass(frozen=True)
class PlanSimulation:
    """Issuance's answer to ``plan`` for ``member`` under ``version``."""

    version: SimulatedVersion
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

    @property
    def draft(self) -> bool:
        return isinstance(self.version, PolicyDraft)

    def as_json(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "policy": self.version.policy.slug,
            "version": self.version.number,
            "draft": self.draft,
            "user": self.member.email,
            "role": self.role,
            "groups": list(self.groups),
            # A step's `index` counts from 0 (as the `plan.steps[0]` paths), beside its
            # `number` from 1, as people count it (docs/decisions/0058).
            "steps": [
                {"index": step.index, "number": step.number, **step.as_json()}
                for step in self.denials
            ],
            "warnings": [
                {"path": f"plan.{warning.path}", "code": warning.code, "detail": warning.detail}
                for warning in self.warnings
            ],
            "review": [
                {
                    "path": f"plan.{review.path}",
                    "stepIndex": review.step,
                    "stepNumber": review.step + 1,
                    "tool": review.tool,
                    "rule": review.rule,
                }
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
                # `step` is `stepIndex`'s older name, as in `plangate check --json`
                "step": decision.step,
                "stepIndex": decision.step,
                "stepNumber": decision.step_number,
                "rule": decision.rule,
                "ruleDescription": decision.rule_description,
                "reason": decision.reason,
            },
        }


def simulate_plan(*, version: SimulatedVersion, member: Member, document: object) -> PlanSimulation:
    """Issuance's answer under ``version``. DomainError ``invalid_plan`` (paths under
    ``plan``) for a bad plan, ``unknown_user`` for a member of another team."""
    if member.team_id != version.policy.team_id:
        raise DomainError(Code.UNKNOWN_USER, f"{member.email} is not a member of this team.")
    if isinstance(document, dict):
        document = {**document, "user": member.email}
    plan = plan_document_validate(document)
    role, groups = member_role_and_groups(member)
    denials: tuple[StepDenial, ...] = ()
    warnings: tuple[StepWarning, ...] = ()
    reviews: tuple[StepReview, ...] = ()
    if not member.is_active:
        decision = USER_DISABLED
    else:
        # Issuance's checks, in the guard's one home for them (guard.offline, which
        # `plangate check` and `plangate test` run too).
        answer = plan_answer(policy=version.document, plan=plan, role=role, groups=groups)
        decision = answer.decision
        denials, warnings, reviews = answer.denials, answer.warnings, answer.reviews
    return PlanSimulation(
        version=version,
        member=member,
        role=role,
        groups=groups,
        plan=plan,
        decision=decision,
        denials=tuple(RefusedStep.from_denial(denial) for denial in denials),
        warnings=warnings,
        reviews=reviews,
    )


def simulate_call(
    *, version: SimulatedVersion, member: Member, document: object, tool: object, args: object
) -> CallSimulation:
    """The guard's answer to calling ``tool`` with ``args`` first under the plan."""
    plan = simulate_plan(version=version, member=member, document=document)
    if not plan.allowed:
        return CallSimulation(plan=plan, tool=tool, args=args, guard=None)
    (decision,) = call_decide(_fresh_token(plan), [(tool, args)])
    return CallSimulation(plan=plan, tool=tool, args=args, guard=decision)


def _fresh_token(plan: PlanSimulation) -> VerifiedToken:
    """The token the control plane would sign for ``plan`` now (its issuer and lifetime,
    the version's number and hash), as the guard holds it (guard.offline.simulated_token).
    An old version is checked by today's validator too (invalid_policy, with paths), as a
    guard would check the snapshot its token carries."""
    version = plan.version
    return simulated_token(
        plan=plan.plan,
        policy=version.document,
        role=plan.role,
        groups=plan.groups,
        issuer=settings.PLANGATE_ISSUER,
        ttl=settings.PLANGATE_TOKEN_TTL,
        policy_version=version.number,
        policy_digest=version.hash,
        validate=policy_document_validate,
    )
