"""Budgets of a version-2 plan (docs/decisions/0066, section 4): reading a call's amount,
adding amounts exactly, and which budgets count a step's calls.

A budget sums one argument over the calls the guard allowed of the steps it names, and
blocks a call that would take the sum past its `max`. The sum is exact: totals stay
Python ints while every amount is an int; a float amount is read as the shortest decimal
that gives back the same double (`Decimal(repr(amount))`, what the JSON said for any
amount a person writes), and added in a 60-digit context that raises rather than round.
A float sum would admit too much or too little (``0.1 + 0.2 > 0.3``), and
`fractions.Fraction(0.1)` reads the binary value, not the one written.

The caller (`guard.agent.decider`) converts amounts before taking the guard's lock and
checks and adds them under it (`try_add`), so budgets are never passed, whatever the
threads.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

__all__ = [
    "Amount",
    "CompiledBudget",
    "add_exactly",
    "amounts_matcher",
    "compile_budgets",
    "exact_amount",
    "format_amount",
    "is_amount",
    "reported_amount",
    "try_add",
]

#: an amount or a total as it is counted: an int, or an exact Decimal
Amount = int | Decimal

# Exact or nothing: an addition that would round, overflow or be undefined raises.
_CONTEXT: Final = decimal.Context(
    prec=60,
    rounding=decimal.ROUND_HALF_EVEN,
    traps=[decimal.Inexact, decimal.Overflow, decimal.InvalidOperation, decimal.Underflow],
)
_EXACTNESS_LOST: Final = (
    decimal.Inexact,
    decimal.Overflow,
    decimal.InvalidOperation,
    decimal.Underflow,
)
_INFINITY: Final = math.inf


def exact_amount(value: Any) -> Amount | None:
    """The exact amount `value` stands for, or None when it is not one: an amount is a
    number (an int or a float, never a boolean), finite and not negative (a negative
    amount would buy room in the budget)."""
    kind = type(value)
    if kind is int:
        return value if value >= 0 else None
    if kind is float:
        return Decimal(repr(value)) if 0 <= value < _INFINITY else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return exact_amount(int(value))
    if isinstance(value, float):
        return exact_amount(float(value))
    return None


def is_amount(value: Any) -> bool:
    """Whether `exact_amount` reads `value` as an amount (without converting it)."""
    kind = type(value)
    if kind is int:
        return bool(value >= 0)
    if kind is float:
        return bool(0 <= value < _INFINITY)
    return exact_amount(value) is not None


def reported_amount(value: Any) -> int | float:
    """An amount (`is_amount`) as the call gave it, for the decision and its event: an int
    or a float, never a subclass."""
    kind = type(value)
    if kind is int or kind is float:
        return value  # type: ignore[no-any-return]
    if isinstance(value, int):
        return int(value)
    assert isinstance(value, float)
    return float(value)


def amounts_matcher(names: Sequence[str]) -> Callable[[Any], bool]:
    """``call_args -> bool``: each argument of `names` (the arguments a step's budgets sum)
    is present and an amount. A budget is an implicit constraint on each step it counts:
    a call failing it does not match the step."""
    names = tuple(names)

    def match_amounts(call_args: Any) -> bool:
        for name in names:
            try:
                if name not in call_args:
                    return False
                value = call_args[name]
            except Exception:  # arguments that cannot be read match nothing
                return False
            if not is_amount(value):
                return False
        return True

    return match_amounts


def add_exactly(total: Amount, amount: Amount) -> Amount | None:
    """``total + amount`` exactly, or None when the sum cannot be kept exactly (more than
    60 significant digits)."""
    if type(total) is int and type(amount) is int:
        return total + amount
    try:
        return _CONTEXT.add(total, amount)
    except _EXACTNESS_LOST:
        return None


def format_amount(value: Amount) -> str:
    """An amount or total for people: ``500``, ``0.3``, ``1E+300``."""
    return str(value)


class CompiledBudget:
    """One budget of a validated version-2 plan: its place in the plan's `budgets`
    (`index`), `id`, the argument it sums (`arg`), its exact `max` and the indexes of the
    steps it counts (`steps`)."""

    __slots__ = ("arg", "id", "index", "max", "steps")

    def __init__(
        self, index: int, budget_id: str, arg: str, maximum: Amount, steps: tuple[int, ...]
    ) -> None:
        self.index = index
        self.id = budget_id
        self.arg = arg
        self.max = maximum
        self.steps = steps

    def __repr__(self) -> str:
        return (
            f"CompiledBudget(id={self.id!r}, arg={self.arg!r}, max={format_amount(self.max)},"
            f" steps={self.steps!r})"
        )


def compile_budgets(
    budgets: Sequence[Mapping[str, Any]], step_ids: Mapping[str, int], step_count: int
) -> tuple[tuple[CompiledBudget, ...], tuple[tuple[CompiledBudget, ...], ...]]:
    """The plan's budgets, and for each step (by index) the budgets counting it, in plan
    order. `budgets` are validated (every step id names a step, `max` > 0)."""
    compiled = []
    for index, document in enumerate(budgets):
        maximum = exact_amount(document["max"])
        if maximum is None:  # validation refuses it; never count against a misread max
            raise ValueError(f"budgets[{index}].max is not an amount")
        steps = tuple(dict.fromkeys(step_ids[step_id] for step_id in document["steps"]))
        compiled.append(CompiledBudget(index, document["id"], document["arg"], maximum, steps))
    by_step: list[list[CompiledBudget]] = [[] for _ in range(step_count)]
    for budget in compiled:
        for step in budget.steps:
            by_step[step].append(budget)
    return tuple(compiled), tuple(tuple(covering) for covering in by_step)


def try_add(
    totals: list[Amount], budgets: Sequence[CompiledBudget], amounts: Mapping[int, Amount]
) -> CompiledBudget | None:
    """Add to the total of each of `budgets` its call's amount (`amounts`, by budget
    index) when every sum stays within its budget's max; else change nothing and return
    the first budget without room (or whose sum cannot be kept exactly). The caller holds
    the guard's lock."""
    if len(budgets) == 1:  # most budgeted steps: no list to build
        budget = budgets[0]
        index = budget.index
        total = totals[index]
        amount = amounts[index]
        if type(total) is int and type(amount) is int:
            counted: Amount | None = total + amount
        else:
            counted = add_exactly(total, amount)
        if counted is None or counted > budget.max:
            return budget
        totals[index] = counted
        return None
    sums: list[Amount] = []
    for budget in budgets:
        summed = add_exactly(totals[budget.index], amounts[budget.index])
        if summed is None or summed > budget.max:
            return budget
        sums.append(summed)
    for budget, summed in zip(budgets, sums, strict=True):
        totals[budget.index] = summed
    return None
