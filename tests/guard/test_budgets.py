"""Budgets of version-2 plans (guard.budgets, docs/decisions/0066 section 4): amounts are read
strictly, summed exactly, and a budget is never passed, whatever the threads."""

from __future__ import annotations

import threading
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from guard.agent.decider import Decider
from guard.agent.session import CallDecision, PlanState
from guard.budgets import (
    CompiledBudget,
    add_exactly,
    exact_amount,
    is_amount,
    reported_amount,
    try_add,
)
from guard.decisions import Decision
from guard.offline import SIMULATED_PLAN_ID, simulated_token
from guard.plan import validate_plan
from guard.policy import validate_policy

POLICY = validate_policy({"version": 1, "default": "allow", "rules": []})


def refund_plan(maximum: float, *, max_calls: int = 1000, **step: Any) -> dict[str, Any]:
    """A version-2 plan: `refund` steps whose `amount` a budget sums."""
    return validate_plan(
        {
            "version": 2,
            "goal": "Refund customers",
            "user": "alice@acme.dev",
            "steps": [
                {
                    "tool": "refund",
                    "args": {},
                    "maxCalls": max_calls,
                    "required": False,
                    "after": [],
                    "additionalArgs": True,
                    "id": "refund",
                    **step,
                },
            ],
            "budgets": [{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": maximum}],
        }
    )


def plan_state(plan: dict[str, Any]) -> PlanState:
    token = simulated_token(plan=plan, policy=POLICY, role=None, groups=())
    return PlanState(SIMULATED_PLAN_ID, plan, token.claims.ph, token, report_arguments=False)


def decider() -> Decider:
    return Decider(
        lock=threading.Lock(),
        publish=lambda *args, **kwargs: None,
        wake_refresher=lambda: None,
        auto_refresh=False,
    )


def test_an_amount_is_a_finite_number_that_is_not_negative() -> None:
    assert exact_amount(500) == 500 and type(exact_amount(500)) is int
    assert exact_amount(0) == 0
    assert exact_amount(0.1) == Decimal("0.1")  # what was written, not the binary value
    assert exact_amount(1e300) == Decimal("1E+300")
    for value in (-1, -0.5, True, False, None, "100", [1], {"amount": 1}, float("nan")):
        assert exact_amount(value) is None, value
        assert not is_amount(value), value
    assert exact_amount(float("inf")) is None
    assert is_amount(3) and is_amount(2.5) and is_amount(0)


def test_an_amount_is_reported_as_the_call_gave_it() -> None:
    class Cents(int):
        pass

    assert reported_amount(0.1) == 0.1 and type(reported_amount(0.1)) is float
    assert type(reported_amount(Cents(5))) is int
    assert exact_amount(Cents(5)) == 5


def test_sums_are_exact_and_refuse_to_round() -> None:
    assert add_exactly(0, 7) == 7 and type(add_exactly(0, 7)) is int
    assert add_exactly(Decimal("0.1"), Decimal("0.2")) == Decimal("0.3")
    assert add_exactly(10**70, 1) == 10**70 + 1  # ints never round
    assert add_exactly(10**70, Decimal("0.1")) is None  # 71 significant digits
    assert add_exactly(Decimal("1E+300"), Decimal("0.1")) is None


def test_try_add_counts_every_budget_or_none() -> None:
    small = CompiledBudget(0, "small", "amount", 10, (0,))
    large = CompiledBudget(1, "large", "amount", 100, (0,))
    totals: list[int | Decimal] = [8, 0]

    assert try_add(totals, (large, small), {0: 5, 1: 5}) is small
    assert totals == [8, 0]  # the large budget had room, yet counted nothing
    assert try_add(totals, (large, small), {0: 2, 1: 2}) is None
    assert totals == [10, 2]


def test_amounts_like_0_1_and_0_2_fill_a_max_of_0_3_exactly() -> None:
    state, decide = plan_state(refund_plan(0.3)), decider().decide

    first = decide(state, "refund", {"amount": 0.1}, 0.0)
    second = decide(state, "refund", {"amount": 0.2}, 0.0)  # 0.1 + 0.2 > 0.3 in floats
    third = decide(state, "refund", {"amount": 0}, 0.0)
    over = decide(state, "refund", {"amount": 0.000001}, 0.0)

    assert [first.code, second.code, third.code] == [Decision.ALLOWED] * 3
    assert (first.amounts, second.amounts) == ({"refunds": 0.1}, {"refunds": 0.2})
    assert second.reason == "step 1 (refund) of the plan; the policy default allows this call"
    assert over.code is Decision.BUDGET_EXCEEDED
    assert "0.3 of its max 0.3" in over.reason and "0.300001" in over.reason
    assert state.budget_totals == [Decimal("0.3")]
    assert state.used == [3]  # the refused call took no call either


def test_a_sum_that_cannot_be_kept_exactly_blocks_the_call() -> None:
    state, decide = plan_state(refund_plan(2**53 - 1)), decider().decide

    assert decide(state, "refund", {"amount": 9 * 10**15}, 0.0).allowed
    blocked = decide(state, "refund", {"amount": 1e-50}, 0.0)  # 67 significant digits

    assert blocked.code is Decision.BUDGET_EXCEEDED
    assert "exactly" in blocked.reason
    assert state.budget_totals == [9 * 10**15]


def test_ints_stay_ints_until_a_float_amount_is_counted() -> None:
    state, decide = plan_state(refund_plan(500)), decider().decide

    decide(state, "refund", {"amount": 200}, 0.0)
    assert state.budget_totals == [200] and type(state.budget_totals[0]) is int
    decide(state, "refund", {"amount": 299.5}, 0.0)
    assert state.budget_totals == [Decimal("499.5")]
    assert decide(state, "refund", {"amount": 0.5}, 0.0).allowed
    assert decide(state, "refund", {"amount": 1}, 0.0).code is Decision.BUDGET_EXCEEDED


def test_a_call_without_an_amount_matches_no_budgeted_step() -> None:
    state, decide = plan_state(refund_plan(500)), decider().decide

    decisions = [
        decide(state, "refund", args, 0.0)
        for args in (
            {"amount": -100},  # would buy room
            {"amount": True},
            {"amount": "100"},
            {"amount": None},
            {"amount": [100]},
            {},
        )
    ]

    for decision in decisions:
        assert decision.code is Decision.NOT_IN_PLAN
        assert "amount must be a number, not negative (budget 'refunds'" in decision.reason
    assert state.budget_totals == [0] and state.used == [0]


def test_another_step_may_take_a_call_a_budgeted_step_does_not_match() -> None:
    plan = refund_plan(500)
    plan["steps"].append({**plan["steps"][0], "id": "check", "args": {"amount": {"eq": "all"}}})
    state, decide = plan_state(plan), decider().decide

    decision = decide(state, "refund", {"amount": "all"}, 0.0)

    assert (decision.code, decision.step, decision.amounts) == (Decision.ALLOWED, 1, None)
    assert state.budget_totals == [0]


def test_a_failed_call_keeps_its_amount() -> None:
    state, decide = plan_state(refund_plan(10)), decider().decide

    allowed = decide(state, "refund", {"amount": 6}, 0.0)
    assert allowed.step is not None
    state.fail_step(allowed.step)  # the tool raised: the guard allowed it all the same

    assert decide(state, "refund", {"amount": 6}, 0.0).code is Decision.BUDGET_EXCEEDED
    assert state.budget_totals == [6]


def run_threads(state: PlanState, amount: float, *, threads: int = 16, calls: int = 20) -> list:
    decide = decider().decide
    start = threading.Barrier(threads)
    results: list[list[CallDecision]] = [[] for _ in range(threads)]

    def work(mine: list[CallDecision]) -> None:
        start.wait()
        for _ in range(calls):
            mine.append(decide(state, "refund", {"amount": amount}, 0.0))

    workers = [threading.Thread(target=work, args=(mine,)) for mine in results]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [decision for mine in results for decision in mine]


def test_sixteen_threads_never_pass_an_integer_budget() -> None:
    state = plan_state(refund_plan(100))

    decisions = run_threads(state, 3)

    allowed = [decision for decision in decisions if decision.allowed]
    assert len(allowed) == 33  # 33 * 3 = 99; a 34th would make 102
    assert sum(decision.amounts["refunds"] for decision in allowed) == 99
    assert state.budget_totals == [99]
    assert {decision.code for decision in decisions if not decision.allowed} == {
        Decision.BUDGET_EXCEEDED
    }


def test_sixteen_threads_never_pass_a_decimal_budget() -> None:
    state = plan_state(refund_plan(7.7))

    decisions = run_threads(state, 0.1)

    allowed = [decision for decision in decisions if decision.allowed]
    assert len(allowed) == 77  # exactly 7.7: float sums would stop short or run over
    assert state.budget_totals == [Decimal("7.7")]
    assert len(decisions) - len(allowed) == 16 * 20 - 77


def test_sixteen_threads_share_maxcalls_and_the_budget() -> None:
    state = plan_state(refund_plan(1000, max_calls=50))

    decisions = run_threads(state, 1)

    codes = [decision.code for decision in decisions]
    assert codes.count(Decision.ALLOWED) == 50
    assert codes.count(Decision.MAX_CALLS_EXCEEDED) == 16 * 20 - 50
    assert state.budget_totals == [50] and state.used == [50]


written_amounts = st.one_of(
    st.integers(min_value=0, max_value=10**6),
    st.decimals(min_value=0, max_value=1000, places=3, allow_nan=False).map(float),
)


@given(
    maximum=st.decimals(min_value="0.001", max_value=5000, places=2).map(float),
    amounts=st.lists(written_amounts, max_size=30),
)
def test_a_budget_admits_exactly_what_the_written_amounts_allow(
    maximum: float, amounts: list[float]
) -> None:
    # The oracle: the decimal each JSON number was written as, summed as fractions.
    state, decide = plan_state(refund_plan(maximum)), decider().decide
    total, limit = Fraction(0), Fraction(repr(maximum))

    for amount in amounts:
        decision = decide(state, "refund", {"amount": amount}, 0.0)
        admitted = total + Fraction(repr(amount)) <= limit
        assert decision.allowed is admitted, (amount, total, limit)
        if admitted:
            total += Fraction(repr(amount))
    assert Fraction(str(state.budget_totals[0])) == total
