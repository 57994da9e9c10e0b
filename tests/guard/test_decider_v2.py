"""How the guard decides a call of a version-2 plan (docs/decisions/0066, sections 4 and 5):
order, closed arguments, budgets and which code wins; version-1 plans as before."""

from __future__ import annotations

import json
import threading
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.agent.decider import Decider
from guard.agent.session import CallDecision, PlanState
from guard.cli import main
from guard.decisions import Decision
from guard.offline import SIMULATED_PLAN_ID, call_decide, simulated_token
from guard.plan import validate_plan
from guard.policy import validate_policy
from tests.conftest import POLICY

ALLOW = validate_policy({"version": 1, "default": "allow", "rules": []})
DENY_BIG_REFUNDS = validate_policy(
    {
        "version": 1,
        "default": "allow",
        "rules": [{"effect": "deny", "tools": ["refund"], "args": {"amount": {"gte": 1000}}}],
    }
)


def step(tool: str, step_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """A normalised version-2 step."""
    normalised = {
        "tool": tool,
        "args": {},
        "maxCalls": 20,
        "required": False,
        "after": [],
        "additionalArgs": True,
        **fields,
    }
    if step_id is not None:
        normalised["id"] = step_id
    return normalised


def plan(*steps: dict[str, Any], budgets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A version-2 plan, validated (its steps are written normalised already)."""
    document = {
        "version": 2,
        "goal": "Refund a customer",
        "user": "alice@acme.dev",
        "steps": list(steps),
        "budgets": budgets or [],
    }
    validated = validate_plan(document)
    assert validated == document
    return validated


def plan_state(document: dict[str, Any], policy: dict[str, Any] = ALLOW) -> PlanState:
    token = simulated_token(plan=document, policy=policy, role=None, groups=())
    return PlanState(SIMULATED_PLAN_ID, document, token.claims.ph, token, report_arguments=False)


class Session:
    """A plan state and a decider sharing one lock, as in the guard."""

    def __init__(self, document: dict[str, Any], policy: dict[str, Any] = ALLOW) -> None:
        self.lock = threading.Lock()
        self.state = plan_state(document, policy)
        self.decider = Decider(
            lock=self.lock,
            publish=lambda *args, **kwargs: None,
            wake_refresher=lambda: None,
            auto_refresh=False,
        )

    def decide(self, tool: str, **args: Any):
        return self.decider.decide(self.state, tool, args, 0.0)

    def complete(self, step: int) -> None:
        with self.lock:
            self.state.complete_step(step)


READ_THEN_WRITE = plan(
    step("read", "read"),
    step("approve", "approve"),
    step("write", "write", after=["read", "approve"]),
)


def test_a_step_waits_until_each_step_of_its_after_has_completed() -> None:
    session = Session(READ_THEN_WRITE)

    early = session.decide("write")
    read = session.decide("read")
    while_read_runs = session.decide("write")
    session.complete(read.step)
    still_waiting = session.decide("write")
    session.complete(session.decide("approve").step)
    in_order = session.decide("write")

    assert early.code is Decision.OUT_OF_ORDER and early.step == 2
    assert "1 (read, id 'read'), 2 (approve, id 'approve')" in early.reason
    assert "Guard.completed(decision)" in early.reason  # for an app calling check alone
    assert while_read_runs.code is Decision.OUT_OF_ORDER  # an allowed call has not returned
    assert still_waiting.code is Decision.OUT_OF_ORDER
    assert "2 (approve, id 'approve')" in still_waiting.reason
    assert "1 (read" not in still_waiting.reason
    assert (in_order.code, in_order.step) == (Decision.ALLOWED, 2)
    assert session.state.used == [1, 1, 1]  # blocked calls counted nothing


def test_a_closed_step_blocks_an_argument_it_does_not_name() -> None:
    session = Session(
        plan(
            step("pay", "pay", args={"to": {"eq": "acme"}}, additionalArgs=False),
            budgets=[{"id": "spend", "arg": "amount", "steps": ["pay"], "max": 100}],
        )
    )

    named = session.decide("pay", to="acme", amount=10)  # a budget's argument is named
    extra = session.decide("pay", to="acme", amount=10, memo="hi", cc="x")

    assert named.code is Decision.ALLOWED
    assert extra.code is Decision.UNEXPECTED_ARGUMENT and extra.step == 0
    assert "'memo', 'cc' unexpected" in extra.reason and "'amount', 'to'" in extra.reason
    assert session.state.budget_totals == [10] and session.state.used == [1]


def test_a_closed_step_without_pins_takes_only_calls_without_arguments() -> None:
    session = Session(plan(step("status", "status", additionalArgs=False)))
    assert session.state.token.calls is not None
    entry = session.state.token.calls["status"]

    assert entry.steps is None and entry.unpinned == (0,)  # never the version-1 fast path
    assert session.decide("status").allowed
    assert session.decide("status", verbose=True).code is Decision.UNEXPECTED_ARGUMENT


def test_an_open_step_takes_a_call_a_closed_step_refuses() -> None:
    session = Session(plan(step("search", "strict", additionalArgs=False), step("search", "loose")))

    decision = session.decide("search", q="x")

    assert (decision.code, decision.step) == (Decision.ALLOWED, 1)


def test_the_first_matching_steps_first_failing_check_gives_the_code() -> None:
    session = Session(
        plan(
            step("read", "read"),
            step("refund", "small", after=["read"], maxCalls=1, additionalArgs=False),
            step("refund", "other", maxCalls=1),
            budgets=[{"id": "small", "arg": "amount", "steps": ["small"], "max": 10}],
        )
    )

    # step 2 closed (an extra argument) and step 3 with calls left: step 3 takes it.
    assert session.decide("refund", amount=5, note="x").step == 2
    # step 2 closed, step 3 spent: the first matching step's check decides.
    unexpected = session.decide("refund", amount=5, note="x")
    # step 2 out of order (and over budget), step 3 spent.
    out_of_order = session.decide("refund", amount=50)
    session.complete(session.decide("read").step)
    over_budget = session.decide("refund", amount=50)
    allowed = session.decide("refund", amount=10)
    spent = session.decide("refund", amount=50)  # spent and over budget

    assert unexpected.code is Decision.UNEXPECTED_ARGUMENT and unexpected.step == 1
    assert "nor can the other matching steps: step 3: it has used its maxCalls" in (
        unexpected.reason
    )
    assert out_of_order.code is Decision.OUT_OF_ORDER and out_of_order.step == 1
    assert over_budget.code is Decision.BUDGET_EXCEEDED and over_budget.step == 1
    assert "budget 'small' has counted 0 of its max 10; amount 50" in over_budget.reason
    assert (allowed.code, allowed.step, allowed.amounts) == (Decision.ALLOWED, 1, {"small": 10})
    assert spent.code is Decision.MAX_CALLS_EXCEEDED and spent.step == 1


def test_a_step_over_budget_leaves_the_call_to_the_next_matching_step() -> None:
    session = Session(
        plan(
            step("refund", "small"),
            step("refund", "large"),
            budgets=[
                {"id": "small", "arg": "amount", "steps": ["small"], "max": 100},
                {"id": "all", "arg": "amount", "steps": ["small", "large"], "max": 1000},
            ],
        )
    )

    first = session.decide("refund", amount=80)
    second = session.decide("refund", amount=80)
    third = session.decide("refund", amount=900)

    assert (first.step, first.amounts) == (0, {"small": 80, "all": 80})
    assert (second.step, second.amounts) == (1, {"all": 80})
    assert third.code is Decision.BUDGET_EXCEEDED and third.step == 0
    assert "budget 'small'" in third.reason and "step 2: budget 'all'" in third.reason
    assert session.state.budget_totals == [80, 160]


def test_the_policy_still_decides_and_counts_nothing_when_it_denies() -> None:
    session = Session(
        plan(
            step("refund", "refund"),
            budgets=[{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 5000}],
        ),
        DENY_BIG_REFUNDS,
    )

    denied = session.decide("refund", amount=2000)

    assert (denied.code, denied.step, denied.rule) == (Decision.POLICY_DENIED, 0, 0)
    assert denied.amounts is None
    assert session.state.budget_totals == [0] and session.state.used == [0]


def test_a_budgeted_decision_is_one_per_call_and_an_unbudgeted_one_is_shared() -> None:
    session = Session(
        plan(
            step("read", "read"),
            step("refund", "refund"),
            budgets=[{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 50}],
        )
    )

    reads = [session.decide("read", page=page) for page in (1, 2)]
    refunds = [session.decide("refund", amount=amount) for amount in (5, 7)]

    assert reads[0] is reads[1] and reads[0].amounts is None
    assert refunds[0] is not refunds[1]
    assert [decision.amounts for decision in refunds] == [{"refunds": 5}, {"refunds": 7}]


def test_steps_narrowed_by_a_pinned_value_decide_as_when_each_is_tried() -> None:
    # Nine steps pin `to` with eq, so the plan narrows them by one look-up (an EqIndex);
    # the step taken, the amounts and the refusals are those of trying each step in turn.
    payees = [f"p{index}" for index in range(9)]
    session = Session(
        plan(
            *(
                step("pay", f"s{index}", args={"to": {"eq": payee}}, maxCalls=1)
                for index, payee in enumerate(payees)
            ),
            step("pay", "bare", additionalArgs=False),
            budgets=[{"id": "p4", "arg": "amount", "steps": ["s4"], "max": 10}],
        )
    )
    assert session.state.compiled.narrowing("pay") is not None

    no_amount = session.decide("pay", to="p4")
    taken = session.decide("pay", to="p4", amount=6)
    spent = session.decide("pay", to="p4", amount=1)
    other = session.decide("pay", to="p7", amount=-1)
    bare = session.decide("pay")

    assert (taken.code, taken.step, taken.amounts) == (Decision.ALLOWED, 4, {"p4": 6})
    assert type(taken) is CallDecision
    with pytest.raises(AttributeError):
        taken.amounts = {}  # type: ignore[misc]
    assert (spent.code, spent.step) == (Decision.MAX_CALLS_EXCEEDED, 4)
    assert "step 10: it takes only the arguments it names" in spent.reason
    assert (no_amount.code, no_amount.step) == (Decision.UNEXPECTED_ARGUMENT, 9)
    assert (other.code, other.step, other.amounts) == (Decision.ALLOWED, 7, None)
    assert (bare.code, bare.step) == (Decision.ALLOWED, 9)
    assert session.state.budget_totals == [6]


def test_arguments_of_another_mapping_type_are_decided_as_a_dict() -> None:
    document = plan(
        step("refund", "refund", args={"to": {"eq": "bob"}}, additionalArgs=False),
        budgets=[{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 10}],
    )
    calls: list[dict[str, Any]] = [
        {"to": "bob", "amount": 4},
        {"to": "bob", "amount": 4, "memo": "x"},
        {"to": "bob"},
        {"to": "bob", "amount": 7},
        {"to": "bob", "amount": 6},
    ]
    as_dicts, as_proxies = Session(document), Session(document)

    from_dicts = [as_dicts.decide("refund", **args) for args in calls]
    from_proxies = [
        as_proxies.decider.decide(as_proxies.state, "refund", MappingProxyType(args), 0.0)
        for args in calls
    ]

    assert from_proxies == from_dicts
    assert [decision.code for decision in from_dicts] == [
        Decision.ALLOWED,
        Decision.UNEXPECTED_ARGUMENT,
        Decision.NOT_IN_PLAN,
        Decision.BUDGET_EXCEEDED,
        Decision.ALLOWED,
    ]
    assert as_proxies.state.budget_totals == as_dicts.state.budget_totals == [10]


def test_a_refreshed_token_keeps_the_budget_totals_and_the_order() -> None:
    document = plan(
        step("read", "read"),
        step("refund", "refund", after=["read"]),
        budgets=[{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 100}],
    )
    session = Session(document)
    session.complete(session.decide("read").step)
    assert session.decide("refund", amount=60).allowed

    session.state.install(simulated_token(plan=document, policy=ALLOW, role=None, groups=()))

    assert session.decide("refund", amount=40).allowed
    assert session.decide("refund", amount=1).code is Decision.BUDGET_EXCEEDED
    assert session.state.budget_totals == [100]


def test_offline_calls_complete_so_a_later_call_is_in_order() -> None:
    document = plan(step("read", "read"), step("write", "write", after=["read"]))
    token = simulated_token(plan=document, policy=ALLOW, role=None, groups=())

    alone = call_decide(token, [("write", {})])
    after_read = call_decide(token, [("read", {}), ("write", {})])

    assert alone[-1].code is Decision.OUT_OF_ORDER
    assert [decision.code for decision in after_read] == [Decision.ALLOWED, Decision.ALLOWED]


# --- version 1 ------------------------------------------------------------------------------

V1 = validate_plan(
    {
        "version": 1,
        "goal": "Pay an invoice",
        "user": "alice@acme.dev",
        "steps": [
            {"tool": "read", "maxCalls": 2},
            {"tool": "pay", "args": {"to": {"eq": "acme"}}, "maxCalls": 1},
        ],
    }
)


def test_a_version_1_plan_keeps_its_fast_path_and_shared_decisions() -> None:
    session = Session(V1)
    calls = session.state.token.calls
    assert calls is not None

    assert session.state.compiled.version2 is False
    assert calls["read"].steps == (0,) and calls["read"].version2 is False
    first, again = session.decide("read"), session.decide("read", extra=1)
    spent = session.decide("read")
    paid = session.decide("pay", to="acme", amount=10**9, memo="x")

    assert first is again and first.amounts is None
    assert spent.code is Decision.MAX_CALLS_EXCEEDED
    assert spent.reason == "every matching step has used its maxCalls: step 1 (2 calls)"
    assert paid.allowed and paid.amounts is None
    assert session.state.budget_totals == []


def test_a_version_2_plan_without_order_budgets_or_closed_steps_decides_alike() -> None:
    as_v2 = plan(*(step(**v1_step) for v1_step in V1["steps"]))
    calls: list[tuple[str, dict[str, Any]]] = [("read", {}), ("read", {"x": 1}), ("read", {})]
    calls += [("pay", {"to": "bob"})]
    calls += [("pay", {"to": "acme"}), ("pay", {"to": "acme"}), ("mail", {})]

    version_1 = Session(V1)
    version_2 = Session(as_v2)

    codes_1 = [version_1.decide(tool, **args).code for tool, args in calls]
    codes_2 = [version_2.decide(tool, **args).code for tool, args in calls]
    assert codes_1 == codes_2
    assert codes_2[2] is Decision.MAX_CALLS_EXCEEDED and codes_2[5] is Decision.MAX_CALLS_EXCEEDED


# --- through a signed token, a Guard and an AsyncGuard -------------------------------------

SIGNED_V2 = {
    "version": 2,
    "goal": "Mail the open issues to Bob",
    "user": "alice@acme.dev",
    "steps": [
        {"id": "list", "tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}},
        {
            "id": "mail",
            "tool": "send_email",
            "args": {"to": {"eq": "bob@acme.dev"}},
            "after": ["list"],
            "additionalArgs": False,
        },
    ],
    "budgets": [{"id": "pages", "arg": "pages", "steps": ["mail"], "max": 2.5}],
}


def test_a_signed_version_2_plan_is_enforced_offline(make_any_guard) -> None:
    guard = make_any_guard()
    guard.declare(SIGNED_V2)
    mail = {"to": "bob@acme.dev", "pages": 1.5}

    early = guard.check("send_email", mail)
    listed = guard.call("github_list_issues", {"repo": "acme/public-app"}, lambda **args: [])
    sent = guard.check("send_email", mail)
    extra = guard.check("send_email", {**mail, "bcc": "eve@evil.test"})
    over = guard.check("send_email", {**mail, "pages": 1.01})
    assert guard.refresh()
    after_refresh = guard.check("send_email", {**mail, "pages": 1})
    full = guard.check("send_email", {**mail, "pages": 0.1})

    assert early.code is Decision.OUT_OF_ORDER
    assert listed == []
    assert (sent.code, sent.step, sent.amounts) == (Decision.ALLOWED, 1, {"pages": 1.5})
    assert sent.rule == 2  # the policy still decides: its send_email rule
    assert extra.code is Decision.UNEXPECTED_ARGUMENT and "'bcc'" in extra.reason
    assert over.code is Decision.BUDGET_EXCEEDED
    assert after_refresh.allowed and after_refresh.amounts == {"pages": 1}
    assert full.code is Decision.BUDGET_EXCEEDED
    assert "counted 2.5 of its max 2.5" in full.reason


def test_plangate_test_runs_a_cases_before_calls_in_order(tmp_path, capsys) -> None:
    cases = {
        "version": 1,
        "plans": {"mail": SIGNED_V2},
        "cases": [
            {
                "name": "mail waits for the list",
                "plan": "mail",
                "call": {"tool": "send_email", "args": {"to": "bob@acme.dev", "pages": 1}},
                "expect": {"decision": "out_of_order", "step": 1},
            },
            {
                "name": "mail after the list",
                "plan": "mail",
                "before": [{"tool": "github_list_issues", "args": {"repo": "acme/public-app"}}],
                "call": {"tool": "send_email", "args": {"to": "bob@acme.dev", "pages": 1}},
                "expect": {"decision": "allowed", "step": 1},
            },
            {
                "name": "the budget runs out",
                "plan": "mail",
                "before": [
                    {"tool": "github_list_issues", "args": {"repo": "acme/public-app"}},
                    {"tool": "send_email", "args": {"to": "bob@acme.dev", "pages": 2}},
                ],
                "call": {"tool": "send_email", "args": {"to": "bob@acme.dev", "pages": 0.6}},
                "expect": {"decision": "budget_exceeded", "step": 1},
            },
        ],
    }
    (tmp_path / "policy.json").write_text(json.dumps(POLICY))
    (tmp_path / "cases.json").write_text(json.dumps(cases))

    code = main(["test", str(tmp_path / "policy.json"), str(tmp_path / "cases.json"), "--json"])

    report = json.loads(capsys.readouterr().out)
    assert (code, report["passed"], report["failed"]) == (0, 3, 0), report


# --- against a plainly written oracle -------------------------------------------------------


@st.composite
def small_plans(draw: st.DrawFn) -> dict[str, Any]:
    """Version-2 plans over two tools and a few values, so that calls often match."""
    count = draw(st.integers(min_value=1, max_value=5))
    steps = []
    for index in range(count):
        earlier = [f"s{other}" for other in range(index)]
        steps.append(
            step(
                draw(st.sampled_from(["read", "pay"])),
                f"s{index}",
                args=draw(st.sampled_from([{}, {"to": {"in": ["x", "y"]}}, {"to": {"eq": "y"}}])),
                maxCalls=draw(st.integers(min_value=1, max_value=3)),
                after=draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else [],
                additionalArgs=draw(st.booleans()),
            )
        )
    budgets = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "arg": st.just("amount"),
                    "steps": st.lists(
                        st.sampled_from([f"s{index}" for index in range(count)]),
                        min_size=1,
                        unique=True,
                    ),
                    "max": st.sampled_from([1, 2.5, 0.3, 10]),
                }
            ),
            max_size=2,
        )
    )
    for index, budget in enumerate(budgets):
        budget["id"] = f"b{index}"
    return plan(*steps, budgets=budgets)


calls = st.tuples(
    st.sampled_from(["read", "pay"]),
    st.fixed_dictionaries(
        {},
        optional={
            "to": st.sampled_from(["x", "y", "z"]),
            "amount": st.sampled_from([0, 0.1, 0.2, 1, 2, -1, True, "1"]),
            "memo": st.just("hi"),
        },
    ),
    st.booleans(),  # whether the tool returns (completes its step) when allowed
)


def reference_decision(
    document: dict[str, Any],
    used: list[int],
    completed: set[str],
    totals: dict[str, Fraction],
    tool: str,
    args: dict[str, Any],
) -> tuple[str, int | None]:
    """0066 sections 4 and 5, read literally: (code, step)."""
    steps = document["steps"]
    covering = [[b for b in document["budgets"] if s["id"] in b["steps"]] for s in steps]

    def is_amount(value: Any) -> bool:
        return type(value) in (int, float) and value >= 0

    def pinned(constraint: dict[str, Any], value: Any) -> bool:
        return value == constraint["eq"] if "eq" in constraint else value in constraint["in"]

    def matches(index: int) -> bool:
        return (
            steps[index]["tool"] == tool
            and all(
                name in args and pinned(constraint, args[name])
                for name, constraint in steps[index]["args"].items()
            )
            and all(is_amount(args.get(budget["arg"])) for budget in covering[index])
        )

    def failure(index: int) -> str | None:
        current = steps[index]
        named = set(current["args"]) | {budget["arg"] for budget in covering[index]}
        if not current["additionalArgs"] and set(args) - named:
            return "unexpected_argument"
        if not set(current["after"]) <= completed:
            return "out_of_order"
        if used[index] >= current["maxCalls"]:
            return "max_calls_exceeded"
        for budget in covering[index]:
            amount = Fraction(repr(args[budget["arg"]]))
            if totals[budget["id"]] + amount > Fraction(repr(budget["max"])):
                return "budget_exceeded"
        return None

    matching = [index for index in range(len(steps)) if matches(index)]
    if not matching:
        return "not_in_plan", None
    for index in matching:
        if failure(index) is None:
            return "allowed", index
    return str(failure(matching[0])), matching[0]


@given(document=small_plans(), sequence=st.lists(calls, max_size=25))
def test_decisions_follow_a_plain_reading_of_the_decision(
    document: dict[str, Any], sequence: list[tuple[str, dict[str, Any], bool]]
) -> None:
    session = Session(document)
    used = [0] * len(document["steps"])
    completed: set[str] = set()
    totals = {budget["id"]: Fraction(0) for budget in document["budgets"]}

    for tool, args, returns in sequence:
        expected = reference_decision(document, used, completed, totals, tool, args)
        decision = session.decide(tool, **args)
        assert (decision.code.value, decision.step) == expected, decision.reason
        if decision.allowed:
            assert decision.step is not None
            index = decision.step
            used[index] += 1
            step_id = document["steps"][index]["id"]
            counted = {}
            for budget in document["budgets"]:
                if step_id in budget["steps"]:
                    totals[budget["id"]] += Fraction(repr(args[budget["arg"]]))
                    counted[budget["id"]] = args[budget["arg"]]
            assert decision.amounts == (counted or None)
            if returns:
                session.complete(index)
                completed.add(step_id)
    assert session.state.used == used
    assert [Fraction(str(total)) for total in session.state.budget_totals] == list(totals.values())
