"""Deciding a call against the current plan (the hot path), the step budgets, and stopping
a plan (blocked by a refused refresh, or ended).

Only the budget reservation takes the guard's lock; everything else reads attributes that
are replaced whole (the plan's token, its stop decision), so concurrent calls do not wait
on one another.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from guard.agent import acp
from guard.agent.session import (
    ARGS_NOT_OBJECT,
    PLAN_ENDED,
    TOOL_NOT_STRING,
    CallDecision,
    PlanState,
)
from guard.agent.tool_calls import ToolCalls, tool_calls
from guard.agent.verified import VerifiedToken
from guard.budgets import (
    Amount,
    CompiledBudget,
    add_exactly,
    exact_amount,
    reported_amount,
    try_add,
)
from guard.decisions import Decision
from guard.finite import PLAIN_SCALAR_TYPES, non_finite_argument
from guard.policy_evaluation import PolicyDecision

__all__ = ["Decider"]

_PENDING: Final = acp.PENDING
_IN_PROGRESS: Final = acp.IN_PROGRESS
_COMPLETED: Final = acp.COMPLETED
_PLAIN_SCALARS: Final = PLAIN_SCALAR_TYPES


def _unreadable(tool: Any, args: Any) -> CallDecision | None:
    """The decision for a call that cannot be decided on, in this order: arguments that are
    not an object, a tool name that is not a string, arguments holding NaN or an infinity
    or nesting too deep anywhere inside; else None."""
    if type(args) is not dict and not isinstance(args, Mapping):
        return ARGS_NOT_OBJECT
    if type(tool) is not str:
        return TOOL_NOT_STRING
    try:
        problem = non_finite_argument(args)
    except Exception:  # a Mapping that cannot be read cannot be decided on
        problem = "the arguments cannot be read"
    if problem is None:
        return None
    return CallDecision(
        Decision.INVALID_ARGUMENTS,
        f"{problem}; arguments must be JSON values (no NaN or Infinity)",
    )


class Decider:
    """Decides the calls of one guard.

    `lock` is the guard's lock over budgets, statuses and `tool_output_seen` (set once a
    call was allowed: no plan may be declared after tool output in the same session);
    `publish(plan, removed=False)` shows a plan's state (`PlanDisplay.publish`);
    `wake_refresher()` asks the background
    refresher to look now, when `auto_refresh` is on.
    """

    def __init__(
        self,
        *,
        lock: threading.Lock,
        publish: Callable[..., None],
        wake_refresher: Callable[[], None],
        auto_refresh: bool,
    ) -> None:
        self._lock = lock
        self._acquire = lock.acquire
        self._release = lock.release
        self._publish = publish
        self._wake_refresher = wake_refresher
        self._auto_refresh = auto_refresh
        self.tool_output_seen = False

    def decide(self, plan: PlanState, tool: Any, args: Any, now: float) -> CallDecision:
        """Decide a call against `plan`; an allowed call reserves one call of its step."""
        stopped = plan.stopped
        if stopped is not None:
            return stopped
        token = plan.token
        if now >= token.refresh_at:
            if token.withdrawn is not None or now >= token.expires_at:
                # Never a network wait on a call: the refresher retries (within a second
                # once the token is unusable) and the next call finds the fresh token.
                return self._unusable(plan, token, now)
            if self._auto_refresh and now >= plan.next_attempt_at:
                self._wake_refresher()  # the refresher thread does the network part
        # Most calls: a dict of strings, integers, booleans and nulls, which holds no
        # number that could be non-finite; the rest are read in full. (A loop, not
        # ``issuperset(map(...))``, which builds a set and an iterator on every call.)
        plain = type(args) is dict
        if plain:
            for value in args.values():
                if type(value) not in _PLAIN_SCALARS:
                    plain = False
                    break
        if not plain:
            problem = _unreadable(tool, args)
            if problem is not None:
                return problem
        elif type(tool) is not str:
            return TOOL_NOT_STRING
        calls = token.calls
        if calls is None:  # a token put in place without `PlanState.install`
            calls = token.calls = tool_calls(plan.compiled, token.policy)
        entry = calls.get(tool)
        if entry is None:
            return plan.not_in_plan(tool, args)  # no step names the tool
        matching: Sequence[int] | None = entry.steps
        if matching is None:
            if entry.version2:  # never set for a version-1 plan, whose path stays this one
                return self._decide_v2(plan, entry, token, tool, args)
            matching = plan.compiled.matching_steps(tool, args)
            if not matching:
                return plan.not_in_plan(tool, args)
        verdict = entry.verdict
        if verdict is None:
            test = entry.test
            if test is None:
                verdict = entry.decide(args)
            elif test(args):
                verdict = entry.passed
            else:
                verdict = entry.otherwise
        if not verdict.allowed:
            return self._denied(entry, matching[0], verdict, token)
        used = plan.used
        max_calls = entry.max_calls
        # Not `with self._lock`: a with statement looks up and binds __enter__ and __exit__
        # on every call, costing as much as the rest of the reservation.
        self._acquire()
        try:
            for step in matching:
                if used[step] < max_calls[step]:
                    used[step] += 1
                    self.tool_output_seen = True
                    started = plan.statuses[step] == _PENDING
                    if started:
                        plan.statuses[step] = _IN_PROGRESS
                    break
            else:
                step = -1
        finally:
            self._release()
        if step < 0:
            return plan.spent(matching)
        if started:
            self._publish(plan)
        decision = entry.allowed[step].get(verdict.rule)
        if decision is None:
            decision = self._remember_allowed(entry, step, verdict, tool)
        return decision

    def _decide_v2(
        self,
        plan: PlanState,
        entry: ToolCalls,
        token: VerifiedToken,
        tool: str,
        args: Mapping[str, Any],
    ) -> CallDecision:
        """Decide a call of a version-2 plan (docs/decisions/0066, section 5), once its
        arguments are known readable: the first matching step that admits every argument,
        whose `after` steps have completed, with calls left and room in its budgets takes
        the call, and its budgets count the amounts. When none can, the first matching
        step's first failing check decides the code: ``unexpected_argument``,
        ``out_of_order``, ``max_calls_exceeded``, ``budget_exceeded``.

        Most calls are taken by the first step that matches and admits every argument:
        the steps are tried one by one up to that one, only its amounts are read, and it
        is checked under the lock. Only when it cannot take the call (or none is found)
        does `_decide_v2_all` decide again from the start, every matching step under one
        lock, so the step chosen and the refusal's reasons are those of one state."""
        if type(args) is not dict:  # a Mapping of another kind: read as it always was
            return self._decide_v2_all(plan, entry, token, tool, args, None)
        compiled = plan.compiled
        narrowing = entry.narrowing
        steps = entry.candidates if narrowing is None else narrowing.candidates(args)
        pins = compiled.pin_matchers
        step_budgets = compiled.step_budgets
        allowed_arguments = compiled.allowed_arguments
        first = -1
        amount: Amount = 0  # the step's amount, when one budget counts it
        amounts: dict[int, Amount] = {}  # by budget index, when several do
        for step in steps:
            pinned = pins[step]
            if pinned is not None and not pinned(args):
                continue
            # A budget's argument is part of the step's match (`CompiledPlan`): present
            # and an amount, read here once and made exact before the lock.
            covering = step_budgets[step]
            if covering:
                if len(covering) == 1:
                    value = args.get(covering[0].arg)
                    if type(value) is int and value >= 0:
                        amount = value
                    else:
                        read = exact_amount(value)
                        if read is None:
                            continue
                        amount = read
                else:
                    amounts = {}
                    for budget in covering:
                        read = exact_amount(args.get(budget.arg))
                        if read is None:
                            break
                        amounts[budget.index] = read
                    if len(amounts) < len(covering):
                        continue
            if first < 0:
                first = step
            names = allowed_arguments[step]
            if names is None or names.issuperset(args):
                break
        else:  # no step matches, or every matching step is closed to an argument
            return self._decide_v2_all(plan, entry, token, tool, args, None)
        verdict = entry.verdict
        if verdict is None:
            test = entry.test
            if test is None:
                verdict = entry.decide(args)
            elif test(args):
                verdict = entry.passed
            else:
                verdict = entry.otherwise
        if not verdict.allowed:
            return self._denied(entry, first, verdict, token)
        statuses = plan.statuses
        used = plan.used
        taken = started = False
        self._acquire()
        try:
            for waited in compiled.after[step]:
                if statuses[waited] != _COMPLETED:
                    break
            else:
                if used[step] < entry.max_calls[step]:
                    if not covering:
                        taken = True
                    elif len(covering) == 1:
                        budget = covering[0]
                        totals = plan.budget_totals
                        index = budget.index
                        total = totals[index]
                        if type(total) is int and type(amount) is int:
                            counted: Amount | None = total + amount
                        else:
                            counted = add_exactly(total, amount)
                        if counted is not None and counted <= budget.max:
                            totals[index] = counted
                            taken = True
                    else:
                        taken = try_add(plan.budget_totals, covering, amounts) is None
                    if taken:
                        used[step] += 1
                        self.tool_output_seen = True
                        started = statuses[step] == _PENDING
                        if started:
                            statuses[step] = _IN_PROGRESS
        finally:
            self._release()
        if not taken:  # decide again, every matching step under one lock
            return self._decide_v2_all(plan, entry, token, tool, args, verdict)
        if started:
            self._publish(plan)
        if len(covering) == 1:
            decision = entry.allowed[step].get(verdict.rule)
            if decision is not None:
                # One decision per call, naming this call's amount: the shared one, copied.
                value = args[covering[0].arg]
                return decision.counting(
                    {covering[0].id: value if type(value) is int else reported_amount(value)}
                )
        return self._allowed_v2(entry, step, verdict, tool, args, covering)

    def _decide_v2_all(
        self,
        plan: PlanState,
        entry: ToolCalls,
        token: VerifiedToken,
        tool: str,
        args: Mapping[str, Any],
        verdict: PolicyDecision | None,
    ) -> CallDecision:
        """`_decide_v2` with every matching step (`verdict`: the policy's, when known)."""
        compiled = plan.compiled
        matching: Sequence[int] | None = entry.unpinned
        if matching is None:
            matching = compiled.matching_steps(tool, args)
            if not matching:
                return plan.not_in_plan(tool, args)  # a budget's amount is missing or bad
        candidates = matching
        if compiled.has_closed_steps:
            allowed_arguments = compiled.allowed_arguments
            candidates = [
                step
                for step in matching
                if (names := allowed_arguments[step]) is None or names.issuperset(args)
            ]
            if not candidates:
                return plan.refused(
                    tool,
                    [
                        (step, Decision.UNEXPECTED_ARGUMENT, plan.unexpected(step, args))
                        for step in matching
                    ],
                )
        if verdict is None:
            verdict = entry.verdict_for(args)
        if not verdict.allowed:
            return self._denied(entry, matching[0], verdict, token)
        # The amounts, read and made exact before the lock (budget index -> amount).
        step_budgets = compiled.step_budgets
        amounts: dict[int, Amount] = {}
        if compiled.budgets:
            for step in candidates:
                for budget in step_budgets[step]:
                    if budget.index not in amounts:
                        amount = exact_amount(args.get(budget.arg))
                        if amount is None:  # arguments that changed since they matched
                            return plan.not_in_plan(tool, args)
                        amounts[budget.index] = amount
        used = plan.used
        statuses = plan.statuses
        totals = plan.budget_totals
        max_calls = entry.max_calls
        after = compiled.after
        refusals: list[tuple[int, Decision, str]] = []
        chosen = -1
        started = False
        self._acquire()
        try:
            for step in candidates:
                for waited in after[step]:
                    if statuses[waited] != _COMPLETED:
                        break
                else:
                    if used[step] < max_calls[step]:
                        covering = step_budgets[step]
                        if not covering or try_add(totals, covering, amounts) is None:
                            chosen = step
                            used[step] += 1
                            self.tool_output_seen = True
                            started = statuses[step] == _PENDING
                            if started:
                                statuses[step] = _IN_PROGRESS
                            break
            else:
                # No step can take the call: say why each matching step cannot, as the
                # state was when it was decided.
                for step in matching:
                    if step in candidates:
                        refusal = plan.step_refusal(step, amounts)
                        if refusal is not None:
                            refusals.append((step, *refusal))
                    else:
                        refusals.append(
                            (step, Decision.UNEXPECTED_ARGUMENT, plan.unexpected(step, args))
                        )
        finally:
            self._release()
        if chosen < 0:
            return plan.refused(tool, refusals)
        if started:
            self._publish(plan)
        return self._allowed_v2(entry, chosen, verdict, tool, args, step_budgets[chosen])

    @staticmethod
    def _remember_allowed(
        entry: ToolCalls, step: int, verdict: PolicyDecision, tool: str
    ) -> CallDecision:
        """The allowed decision of `step` under `verdict`'s rule, made once and kept in
        `entry` for every later call it decides alike."""
        # People count steps from 1; `step` stays the index.
        decision = CallDecision(
            Decision.ALLOWED,
            f"step {step + 1} ({tool}) of the plan; {verdict.reason}",
            step,
            verdict.rule,
            verdict.description,
        )
        entry.allowed[step][verdict.rule] = decision
        return decision

    @staticmethod
    def _allowed_v2(
        entry: ToolCalls,
        step: int,
        verdict: PolicyDecision,
        tool: str,
        args: Mapping[str, Any],
        covering: Sequence[CompiledBudget],
    ) -> CallDecision:
        """The decision for a call `step` took (`covering`: the step's budgets)."""
        decision = entry.allowed[step].get(verdict.rule)
        if decision is None:
            decision = Decider._remember_allowed(entry, step, verdict, tool)
        if covering:
            # One decision per call, naming this call's amounts: the shared one, copied.
            return decision.counting(
                {budget.id: reported_amount(args[budget.arg]) for budget in covering}
            )
        return decision

    @staticmethod
    def _denied(
        entry: ToolCalls, step: int, verdict: PolicyDecision, token: VerifiedToken
    ) -> CallDecision:
        """The decision for a call the policy refuses (`step`: the first it matched)."""
        decision = entry.denied[step].get(verdict.rule)
        if decision is None:
            rule = "the policy default" if verdict.rule is None else f"rules[{verdict.rule}]"
            decision = CallDecision(
                Decision.POLICY_DENIED,
                f"{verdict.reason} ({rule}, policy version {token.policy_version})",
                step,
                verdict.rule,
                verdict.description,
            )
            entry.denied[step][verdict.rule] = decision
        return decision

    def _unusable(self, plan: PlanState, token: VerifiedToken, now: float) -> CallDecision:
        """The decision for a call while the token has expired or its key was withdrawn."""
        if self._auto_refresh and now >= plan.next_attempt_at:
            self._wake_refresher()
        return plan.unusable(token)

    def block(self, plan: PlanState, decision: CallDecision) -> None:
        """Stop `plan` for good: every later call gets `decision`, open steps are cancelled.
        A plan that has ended stays as it ended: a background watch that learns of its end
        from the control plane (its status list bit, flipped by the end the guard reported)
        changes nothing the user was shown."""
        with self._lock:
            if plan.ended:
                return
            plan.blocked = plan.stopped = decision
            plan.next_attempt_at = math.inf
            plan.refresh_error = decision.reason
            plan.cancel_open_steps()
        self._publish(plan)

    def end(self, plan: PlanState, *, remove: bool) -> bool:
        """End `plan`: steps still running show as completed, later calls get ``no_plan``,
        and with `remove` (ACP v2) the plan leaves the user's view. True when this call
        ended it (False: it had ended before)."""
        with self._lock:
            if plan.ended:
                return False
            plan.ended = True
            if plan.stopped is None:
                plan.stopped = PLAN_ENDED
            changed = plan.complete_running_steps()
        if changed:
            self._publish(plan)
        if remove:
            self._publish(plan, removed=True)
        return True
