"""One declared plan's state in a session: its verified token, budgets and step statuses,
and the decisions a call can get.

`PlanState` changes under the guard's lock (budgets, statuses); its `token`, `blocked` and
`stopped` are replaced whole (atomic attribute stores), so the hot path reads them without
the lock.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from guard.agent import acp
from guard.agent.tool_calls import tool_calls
from guard.agent.verified import VerifiedToken
from guard.budgets import Amount, add_exactly, format_amount, is_amount
from guard.constraints import compile_constraint
from guard.decisions import Decision, PlanOutcome, not_completed_reason
from guard.plan import CompiledPlan
from guard.utc import isoformat_z

__all__ = ["CallDecision", "PlanState"]

# (argument name, matcher, what the argument must satisfy) for each pinned argument of a step.
Explainer = tuple[tuple[str, Callable[[Any], bool], str], ...]


class CallDecision:
    """The guard's verdict on one call: a stable `code`, the `step` the call counts against
    (or, when blocked for budget or policy, the step it matched; an index from 0), the
    policy `rule` that decided (its index in the policy's rules; None for the default or
    when the policy was not consulted), `rule_description` naming that rule or the default
    for the decision log (None when the policy was not consulted), and a `reason` for
    people and logs (which counts steps from 1). An allowed call of a budgeted step
    (version-2 plans) carries the `amounts` its budgets counted: budget id to the amount as
    the call gave it; None for any other decision. Immutable; shared between calls where
    possible (never one with `amounts`)."""

    __slots__ = ("allowed", "amounts", "code", "reason", "rule", "rule_description", "step")

    allowed: bool
    code: Decision
    reason: str
    step: int | None
    rule: int | None
    rule_description: str | None
    amounts: dict[str, int | float] | None

    def __init__(
        self,
        code: Decision,
        reason: str,
        step: int | None = None,
        rule: int | None = None,
        rule_description: str | None = None,
        amounts: dict[str, int | float] | None = None,
    ) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "rule_description", rule_description)
        object.__setattr__(self, "amounts", amounts)
        object.__setattr__(self, "allowed", code is Decision.ALLOWED)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CallDecision is immutable")

    def counting(self, amounts: dict[str, int | float]) -> CallDecision:
        """A copy of this decision carrying `amounts` (an allowed call of a budgeted step).
        On the hot path: the copy is filled as an `_UnsealedDecision` (plain slot stores,
        a third of the cost of calling each slot's descriptor) and then made a
        `CallDecision`, immutable like every other."""
        copy: CallDecision = _new_decision(_UnsealedDecision)
        copy.code = self.code
        copy.reason = self.reason
        copy.step = self.step
        copy.rule = self.rule
        copy.rule_description = self.rule_description
        copy.amounts = amounts
        copy.allowed = self.allowed
        copy.__class__ = CallDecision
        return copy

    @property
    def step_number(self) -> int | None:
        """`step` as people count it, from 1 (the reason's "step 2"); None with no step."""
        return None if self.step is None else self.step + 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CallDecision):
            return NotImplemented
        return (self.code, self.reason, self.step, self.rule, self.amounts) == (
            other.code,
            other.reason,
            other.step,
            other.rule,
            other.amounts,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.reason, self.step, self.rule))

    def __repr__(self) -> str:
        return (
            f"CallDecision(code={self.code.value!r}, step={self.step!r}, rule={self.rule!r},"
            f" reason={self.reason!r})"
        )


class _UnsealedDecision(CallDecision):
    """A `CallDecision` being filled (`CallDecision.counting`): the same slots, stored
    plainly; never handed out (the copy becomes a `CallDecision` once filled)."""

    __slots__ = ()

    # object's own, which CPython calls as its plain slot store (a method here would cost a
    # Python call per store)
    __setattr__ = object.__setattr__  # type: ignore[assignment]


_new_decision: Final = object.__new__

NO_PLAN: Final = CallDecision(
    Decision.NO_PLAN, "no plan has been declared in this session; call declare_plan first"
)
PLAN_ENDED: Final = CallDecision(Decision.NO_PLAN, "the plan has ended; declare a new plan")
ARGS_NOT_OBJECT: Final = CallDecision(
    Decision.INVALID_ARGUMENTS, "the call's arguments must be a JSON object"
)
TOOL_NOT_STRING: Final = CallDecision(Decision.INVALID_ARGUMENTS, "the tool name must be a string")


class PlanState:
    """One declared plan and its mutable state."""

    __slots__ = (
        "blocked",
        "budget_totals",
        "compiled",
        "delegated",
        "descriptions",
        "document",
        "ended",
        "explainers",
        "failed",
        "hash",
        "id",
        "next_attempt_at",
        "refresh_error",
        "refresh_lock",
        "report_arguments",
        "retry_delay",
        "statuses",
        "stopped",
        "token",
        "used",
    )

    def __init__(
        self,
        plan_id: str,
        document: dict[str, Any],
        document_hash: str,
        token: VerifiedToken,
        report_arguments: bool,
    ) -> None:
        self.id = plan_id
        self.document = document
        self.hash = document_hash
        self.compiled = CompiledPlan(document)
        steps = document["steps"]
        self.descriptions = tuple(acp.describe_step(step) for step in steps)
        self.install(token)
        self.report_arguments = report_arguments
        self.used = [0] * len(steps)
        # Of `used`, the calls held or reserved for child plans (guard.agent.delegation):
        # they count against maxCalls but were never this guard's own calls.
        self.delegated = [0] * len(steps)
        # What each budget of a version-2 plan has counted (`compiled.budgets` order),
        # changed under the guard's lock with `used`; a refreshed token keeps it (`install`
        # replaces the token only, and the plan, so every budget's max, cannot change).
        self.budget_totals: list[Amount] = [0] * len(self.compiled.budgets)
        # Allowed calls whose tool raised (or answered with an error): they do not count as
        # the step having run (`ran`).
        self.failed = [0] * len(steps)
        self.statuses = [acp.PENDING] * len(steps)
        self.explainers: dict[int, Explainer] = {}
        self.blocked: CallDecision | None = None
        self.ended = False
        # The decision every call gets once the plan is blocked or ended: one test on the
        # hot path for both.
        self.stopped: CallDecision | None = None
        self.refresh_lock = threading.Lock()
        self.next_attempt_at = token.refresh_at
        self.retry_delay = 0.0
        self.refresh_error: str | None = None

    def install(self, token: VerifiedToken) -> None:
        """Make `token` (verified for this plan) the plan's token, with what deciding a
        call of each of the plan's tools needs under its policy resolved first."""
        if token.calls is None:
            token.calls = tool_calls(self.compiled, token.policy)
        self.token = token

    # The methods below run off the hot path: they explain a refusal.

    def not_in_plan(self, tool: str, args: Mapping[str, Any]) -> CallDecision:
        candidates = self.compiled.step_candidates(tool)
        if not candidates:
            return CallDecision(Decision.NOT_IN_PLAN, f"no step of the plan calls {tool}")
        reasons = []
        for index in candidates:
            failures = [
                detail
                for name, matches, detail in self.explainer(index)
                if name not in args or not matches(args[name])
            ]
            reasons.append(f"step {index + 1}: {'; '.join(failures) or 'arguments do not match'}")
        return CallDecision(
            Decision.NOT_IN_PLAN,
            f"the arguments match no step for {tool} ({' / '.join(reasons)})",
        )

    def explainer(self, index: int) -> Explainer:
        explainer = self.explainers.get(index)
        if explainer is None:
            args = self.document["steps"][index]["args"]
            explainer = tuple(
                (
                    name,
                    compile_constraint(constraint),
                    f"{name} must satisfy {json.dumps(constraint, ensure_ascii=False)[:120]}",
                )
                for name, constraint in args.items()
            ) + tuple(
                (
                    budget.arg,
                    is_amount,
                    f"{budget.arg} must be a number, not negative (budget {budget.id!r} sums it)",
                )
                for budget in self.compiled.step_budgets[index]
            )
            self.explainers[index] = explainer
        return explainer

    def unexpected(self, step: int, args: Mapping[str, Any]) -> str:
        """Why closed step `step` does not take a call with `args` (some unexpected)."""
        unexpected = ", ".join(
            repr(name) for name in self.compiled.unexpected_arguments(step, args)
        )
        names = self.compiled.allowed_arguments[step] or ()
        admitted = ", ".join(repr(name) for name in sorted(names)) or "none"
        return (
            f"it takes only the arguments it names (additionalArgs is false): {unexpected}"
            f" unexpected; it names {admitted}"
        )

    def step_refusal(self, step: int, amounts: Mapping[int, Amount]) -> tuple[Decision, str] | None:
        """Why `step` cannot take a call now, as its first failing check in the order
        ``out_of_order``, ``max_calls_exceeded``, ``budget_exceeded`` (`amounts`: the
        call's amount by budget index); None when it can. The caller holds the guard's
        lock (statuses, used counts and budget totals are read as the decision saw them)."""
        compiled = self.compiled
        waiting = [index for index in compiled.after[step] if self.statuses[index] != acp.COMPLETED]
        if waiting:
            names = ", ".join(self._step_name(index) for index in waiting)
            return (
                Decision.OUT_OF_ORDER,
                f"it runs after step(s) {names}, not completed yet. A step completes when an"
                " allowed call of it has returned: Guard.call, @guard.tool and the MCP gateway"
                " record it; an application calling Guard.check alone must call"
                " Guard.completed(decision) once the tool returned",
            )
        used, max_calls = self.used[step], compiled.max_calls[step]
        if used >= max_calls:
            return (
                Decision.MAX_CALLS_EXCEEDED,
                f"it has used its maxCalls ({used} of {max_calls} calls{self._delegated(step)})",
            )
        for budget in compiled.step_budgets[step]:
            total = self.budget_totals[budget.index]
            amount = amounts[budget.index]
            counted = add_exactly(total, amount)
            if counted is None:
                return (
                    Decision.BUDGET_EXCEEDED,
                    f"budget {budget.id!r} cannot add {budget.arg} {format_amount(amount)} to"
                    f" its total {format_amount(total)} exactly (more than 60 significant"
                    " digits)",
                )
            if counted > budget.max:
                return (
                    Decision.BUDGET_EXCEEDED,
                    f"budget {budget.id!r} has counted {format_amount(total)} of its max"
                    f" {format_amount(budget.max)}; {budget.arg} {format_amount(amount)} would"
                    f" take it to {format_amount(counted)}",
                )
        return None

    def refused(self, tool: str, refusals: Sequence[tuple[int, Decision, str]]) -> CallDecision:
        """The decision for a call no matching step can take: the first matching step's
        code, and why each matching step (index, code, detail) cannot take it."""
        step, code, detail = refusals[0]
        reason = f"step {step + 1} ({tool}) cannot take the call: {detail}"
        others = "; ".join(f"step {index + 1}: {other}" for index, _code, other in refusals[1:])
        if others:
            reason += f" (nor can the other matching steps: {others})"
        return CallDecision(code, reason, step)

    def _step_name(self, index: int) -> str:
        step_id = self.compiled.ids[index]
        tool = self.compiled.tools[index]
        return f"{index + 1} ({tool}, id {step_id!r})" if step_id else f"{index + 1} ({tool})"

    def spent(self, matching: Sequence[int]) -> CallDecision:
        steps = ", ".join(
            f"{index + 1} ({self.used[index]} calls{self._delegated(index)})" for index in matching
        )
        return CallDecision(
            Decision.MAX_CALLS_EXCEEDED,
            f"every matching step has used its maxCalls: step {steps}",
            matching[0],
        )

    def _delegated(self, step: int) -> str:
        """ ", n held or reserved for child plans" when some of a step's calls are."""
        delegated = self.delegated[step]
        return f", {delegated} held or reserved for child plans" if delegated else ""

    def unusable(self, token: VerifiedToken) -> CallDecision:
        """The decision for a call while `token` has expired or its key was withdrawn."""
        if self.blocked is not None:
            return self.blocked
        detail = f": {self.refresh_error}" if self.refresh_error else ""
        if token.withdrawn is not None:
            return CallDecision(
                Decision.TOKEN_INVALID,
                f"the intent token can no longer be trusted ({token.withdrawn}) and was not"
                f" refreshed{detail}",
            )
        return CallDecision(
            Decision.TOKEN_EXPIRED,
            f"the intent token expired at {isoformat_z(token.expires_at)} and was not"
            f" refreshed{detail}",
        )

    # Delegation (guard.agent.delegation): the caller holds the guard's lock.

    def hold(self, tools: set[str]) -> tuple[dict[int, int], dict[int, Amount]]:
        """Take what is left of every step calling one of `tools`, and of every budget
        counting such a step, while a delegation is asked for: the parent's own calls of
        them wait (``max_calls_exceeded`` / ``budget_exceeded``) so that the control plane,
        which counts the calls reported to it, reserves for the child only what the parent
        has not used. Returns what to give back to `release`: the counts as they were."""
        steps = {
            index: self.used[index]
            for index, tool in enumerate(self.compiled.tools)
            if tool in tools
        }
        budgets = {
            budget.index: self.budget_totals[budget.index]
            for index in steps
            for budget in self.compiled.step_budgets[index]
        }
        for index, used in steps.items():
            held = max(0, self.compiled.max_calls[index] - used)
            self.used[index] += held
            self.delegated[index] += held
        for index in budgets:
            budget = self.compiled.budgets[index]
            self.budget_totals[index] = max(budget.max, self.budget_totals[index])
        return steps, budgets

    def release(self, held: tuple[dict[int, int], dict[int, Amount]]) -> None:
        """Give back what `hold` took (nothing could be counted meanwhile: it was full)."""
        steps, budgets = held
        for index, used in steps.items():
            self.delegated[index] -= self.used[index] - used
            self.used[index] = used
        for index, total in budgets.items():
            self.budget_totals[index] = total

    def reserve(self, calls: Mapping[int, int], budgets: Mapping[int, Amount]) -> None:
        """Count what a child plan took (its reservation, by parent step and budget index)
        as spent here, so that this guard and its children together never exceed the plan.
        A reservation is never given back, as on the control plane."""
        for index, count in calls.items():
            self.used[index] += count
            self.delegated[index] += count
        for index, amount in budgets.items():
            counted = add_exactly(self.budget_totals[index], amount)
            self.budget_totals[index] = (
                counted if counted is not None else self.compiled.budgets[index].max
            )

    # Status changes: the caller holds the guard's lock and publishes when they return True.

    def complete_step(self, step: int) -> bool:
        changed = self.statuses[step] == acp.IN_PROGRESS
        if changed:
            self.statuses[step] = acp.COMPLETED
        return changed

    def fail_step(self, step: int) -> None:
        """An allowed call of `step` raised: it does not count as the step having run. The
        step stays in progress (another call may still complete it)."""
        if self.failed[step] < self.used[step] - self.delegated[step]:
            self.failed[step] += 1

    def ran(self, step: int) -> bool:
        """Whether `step` has run: it completed, or an allowed call of it did not fail (one
        still running, or one the application ran without telling `completed`)."""
        return (
            self.statuses[step] == acp.COMPLETED
            or self.used[step] - self.delegated[step] > self.failed[step]
        )

    def required_not_run(self) -> list[int]:
        """The required steps (indexes) that have not run."""
        return [
            index
            for index, step in enumerate(self.document["steps"])
            if step.get("required") and not self.ran(index)
        ]

    def cancel_open_steps(self) -> None:
        for index, status in enumerate(self.statuses):
            if status != acp.COMPLETED:
                self.statuses[index] = acp.CANCELLED

    def outcome(self) -> PlanOutcome:
        """How the plan ended: ``completed`` when every required step completed."""
        steps = self.document["steps"]
        done = all(
            status == acp.COMPLETED
            for step, status in zip(steps, self.statuses, strict=True)
            if step.get("required")
        )
        return PlanOutcome.COMPLETED if done else PlanOutcome.ENDED

    def end_reason(self) -> str:
        """Why the plan did not complete, for the decision log: the required steps that did
        not run, counted from 1 as people count them (empty when it completed)."""
        return not_completed_reason(
            (index, step["tool"], self.failed[index] > 0)
            for index, (step, status) in enumerate(
                zip(self.document["steps"], self.statuses, strict=True)
            )
            if step.get("required") and status != acp.COMPLETED
        )

    def complete_running_steps(self) -> bool:
        """At the end: a step still in progress shows as completed, unless every call of it
        failed (then it shows cancelled: it did not run, and will not now)."""
        changed = False
        for index, status in enumerate(self.statuses):
            if status == acp.IN_PROGRESS:
                ran = self.used[index] - self.delegated[index] > self.failed[index]
                self.statuses[index] = acp.COMPLETED if ran else acp.CANCELLED
                changed = True
        return changed
