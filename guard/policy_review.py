"""Which steps of a plan a policy's review rules send to a person (`plan_reviews`), and
whether a token carries the approval its policy asks for (`approval_verify`).

A rule with ``"effect": "review"`` admits a step as an allow rule does (its ``maxCalls``
caps the step alike, guard.policy_evaluation), and asks that a person approve the plan
before any token is signed. Per step, for a member:

* a step the policy refuses (a deny, the default, a cap) asks nothing: the plan is refused;
* a review rule that applies to the member (``roles``/``groups``) and concerns the step's
  tool asks for review, even when an allow rule also admits the tool (review is the
  stricter of the two, as deny is over allow);
* a review rule with ``args`` is passed over only when the step pins, with ``eq``, a value
  provably outside the rule's constraint (guard.deny reads it the fail-closed way): a step
  leaving the argument free may make the very calls the rule wants a person to see.

A plan with no such step needs nobody. At call time a review rule admits like an allow:
the token exists only once a person approved the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard.claims import IntentClaims
from guard.deny import compile_deny_args
from guard.errors import TokenInvalid
from guard.policy_evaluation import StepDenial, _applicable_rules, _Rule, evaluate_plan

__all__ = ["StepReview", "approval_verify", "plan_reviews", "review_covers"]


@dataclass(frozen=True)
class StepReview:
    """A plan step that a review rule sends to a person: the first such rule, in policy
    order, with its description (guard.policy_evaluation.rule_description)."""

    step: int
    tool: str
    rule: int
    description: str

    @property
    def path(self) -> str:
        return f"steps[{self.step}]"


def _may_match(rule: _Rule, step: Mapping[str, Any]) -> bool:
    """Whether the step's calls may satisfy the review rule's ``args``: False only when an
    argument the rule pins is pinned by the step with ``eq`` to a value provably outside."""
    if rule.pinned is None:
        return True
    fixed = {
        name: constraint["eq"]
        for name, constraint in (step.get("args") or {}).items()
        if "eq" in constraint
    }
    return compile_deny_args(rule.pinned)(fixed)


def plan_reviews(
    policy: Mapping[str, Any],
    plan: Mapping[str, Any],
    *,
    role: str | None,
    groups: Sequence[str],
    denials: Sequence[StepDenial] | None = None,
) -> list[StepReview]:
    """The steps of a normalised plan that the validated policy's review rules send to a
    person, for a member with ``role`` and ``groups``; empty when nobody needs to approve.

    ``denials`` is `evaluate_plan`'s answer for the same plan and member when the caller
    has it; refused steps are left out (the plan is refused, not reviewed).
    """
    reviewers = [rule for rule in _applicable_rules(policy, role, groups) if rule.review]
    if not reviewers:
        return []
    if denials is None:
        denials = evaluate_plan(policy, plan, role=role, groups=groups)
    refused = {denial.step for denial in denials}
    reviews: list[StepReview] = []
    for step_index, step in enumerate(plan["steps"]):
        if step_index in refused:
            continue
        tool = step["tool"]
        rule = next(
            (rule for rule in reviewers if rule.concerns(tool) and _may_match(rule, step)), None
        )
        if rule is not None:
            reviews.append(StepReview(step_index, tool, rule.index, rule.description))
    return reviews


def review_covers(approved_steps: Sequence[int], reviews: Sequence[StepReview]) -> bool:
    """Whether an approval of ``approved_steps`` still covers what a policy asks now: the
    same steps or fewer. A step the policy newly sends for review needs a new approval."""
    return {review.step for review in reviews} <= set(approved_steps)


def approval_verify(claims: IntentClaims) -> None:
    """Check a verified token's approval against its own policy snapshot: when ``pol``
    asks for review of a step of ``plan`` (for ``role`` and ``groups``), the token must
    carry ``apr`` (whose ``ph`` guard.claims.approval_claim has matched to the token's).
    TokenInvalid otherwise."""
    if claims.apr is not None:
        return
    reviews = plan_reviews(claims.pol, claims.plan, role=claims.role, groups=claims.groups)
    if reviews:
        steps = ", ".join(review.path for review in reviews)
        raise TokenInvalid(f"the policy asks a person to approve {steps}, and apr is missing")
