"""What deciding a call of each tool of a plan needs, resolved once per token.

A token holds one plan and one policy snapshot: for every tool the plan names, the steps a
call may count against and the policy's verdict (fixed, or a function of the arguments
alone: `CompiledPolicy.tool_decision`) do not change while the token is in force. The
decider looks a call's tool up here once, instead of resolving the steps, the policy's
rules and the decision object on every call. A tool the plan does not name has no entry:
its calls are ``not_in_plan`` and the policy is never asked.

The table belongs to the token (`VerifiedToken.calls`), so a refreshed token, whose policy
may differ, never reuses a decision made under the previous one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from guard.constraints import ArgsMatcher
from guard.eq_index import EqIndex
from guard.plan import CompiledPlan
from guard.policy_evaluation import CompiledPolicy, PolicyDecision, ToolDecision

if TYPE_CHECKING:
    from guard.agent.session import CallDecision

__all__ = ["ToolCalls", "tool_calls"]


class ToolCalls:
    """One tool of a plan under one token's policy.

    `steps`: the steps naming the tool, in plan order, when none of them pins an argument
    (every call matches them all), else None (`CompiledPlan.matching_steps` decides).
    `verdict`: the policy's verdict when no argument can change it; else, when one rule's
    arguments decide, ``passed if test(args) else otherwise``; else ``decide(args)``
    (`CompiledPolicy.tool_decision`). `max_calls` is the plan's maxCalls per step. `allowed` and
    `denied` keep the decisions already made, per step and policy rule (None for the
    policy default): shared between calls, filled on first use.

    A version-2 plan's tool (`version2`) always has `steps` None, so that the decider's
    version-1 fast path never takes its calls: order, closed arguments and budgets are
    checked on every call (`Decider._decide_v2`). There `unpinned` is what `steps` would be
    (a budget's argument counts as pinned: it must be present and an amount), `candidates`
    the steps naming the tool and `narrowing` the plan's `EqIndex` over them (None when
    it has none), so the decider tries the steps one by one, stopping at the first that
    takes the call.
    """

    __slots__ = (
        "allowed",
        "candidates",
        "decide",
        "denied",
        "max_calls",
        "narrowing",
        "otherwise",
        "passed",
        "steps",
        "test",
        "unpinned",
        "verdict",
        "version2",
    )

    def __init__(
        self,
        steps: tuple[int, ...] | None,
        candidates: tuple[int, ...],
        policy: ToolDecision,
        max_calls: tuple[int, ...],
        *,
        version2: bool = False,
        narrowing: EqIndex | None = None,
    ) -> None:
        self.version2 = version2
        self.unpinned = steps
        self.candidates = candidates
        self.narrowing = narrowing
        self.steps = None if version2 else steps
        self.verdict: PolicyDecision | None = policy.fixed
        self.test: ArgsMatcher | None = policy.test
        # Read only when `test` is set, and then both are.
        self.passed = cast(PolicyDecision, policy.passed)
        self.otherwise = cast(PolicyDecision, policy.otherwise)
        # Read only when neither `verdict` nor `test` is set, and then it is.
        self.decide = cast(Callable[[Any], PolicyDecision], policy.decide)
        self.max_calls = max_calls
        self.allowed: dict[int, dict[int | None, CallDecision]] = {step: {} for step in candidates}
        self.denied: dict[int, dict[int | None, CallDecision]] = {step: {} for step in candidates}

    def verdict_for(self, args: Any) -> PolicyDecision:
        """The policy's verdict on a call with `args`, read as the class docstring says.
        (The deciders' fast paths write this out inline: a method call per decision costs
        as much as the read.)"""
        if self.verdict is not None:
            return self.verdict
        test = self.test
        if test is None:
            return self.decide(args)
        return self.passed if test(args) else self.otherwise


def tool_calls(plan: CompiledPlan, policy: CompiledPolicy) -> dict[str, ToolCalls]:
    """The entry of every tool `plan` names, under `policy`."""
    table = {}
    for tool in dict.fromkeys(plan.tools):
        candidates = plan.step_candidates(tool)
        table[tool] = ToolCalls(
            candidates if plan.pins_no_argument(tool) else None,
            candidates,
            policy.tool_decision(tool),
            plan.max_calls,
            version2=plan.version2,
            narrowing=plan.narrowing(tool),
        )
    return table
