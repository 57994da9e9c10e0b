"""What deciding a call of each tool needs is resolved once per token (guard.agent.tool_calls):
the decisions stay those of a plain reading of the plan and the policy, token by token."""

from __future__ import annotations

import math
import threading
from typing import Any

from guard.agent.decider import Decider
from guard.agent.session import PlanState
from guard.decisions import Decision
from guard.offline import SIMULATED_PLAN_ID, simulated_token
from guard.plan import validate_plan
from guard.policy import validate_policy

PLAN = validate_plan(
    {
        "version": 1,
        "goal": "Pay two invoices",
        "user": "alice@acme.dev",
        "steps": [
            {"tool": "read", "maxCalls": 2},
            {"tool": "pay", "args": {"to": {"eq": "acme"}}, "maxCalls": 1},
            {"tool": "pay", "maxCalls": 1},
        ],
    }
)
POLICY = validate_policy(
    {
        "version": 1,
        "default": "deny",
        "rules": [
            {"effect": "deny", "tools": ["pay"], "args": {"amount": {"gte": 1000}}},
            {"effect": "allow", "tools": ["pay", "read"], "name": "first"},
        ],
    }
)


def plan_state(policy: dict[str, Any] = POLICY) -> PlanState:
    token = simulated_token(plan=PLAN, policy=policy, role=None, groups=())
    return PlanState(SIMULATED_PLAN_ID, PLAN, token.claims.ph, token, report_arguments=False)


def decider() -> Decider:
    return Decider(
        lock=threading.Lock(),
        publish=lambda *args, **kwargs: None,
        wake_refresher=lambda: None,
        auto_refresh=False,
    )


def test_a_token_holds_the_plans_tools_once_installed() -> None:
    state = plan_state()

    assert state.token.calls is not None
    assert set(state.token.calls) == {"read", "pay"}
    assert state.token.calls["read"].steps == (0,)  # no step pins an argument
    assert state.token.calls["pay"].steps is None  # step 1 pins `to`: matched per call


def test_calls_are_decided_in_plan_order_against_budgets_and_the_policy() -> None:
    state, decide = plan_state(), decider().decide

    first = decide(state, "read", {}, 0.0)
    again = decide(state, "read", {"page": 2}, 0.0)
    spent = decide(state, "read", {}, 0.0)
    pinned = decide(state, "pay", {"to": "acme", "amount": 10}, 0.0)
    free = decide(state, "pay", {"to": "acme", "amount": 10}, 0.0)
    denied = decide(state, "pay", {"to": "bob", "amount": 5000}, 0.0)
    unknown = decide(state, "delete", {}, 0.0)
    nan = decide(state, "pay", {"amount": math.nan}, 0.0)
    not_a_name = decide(state, ["pay"], {"amount": 1.5}, 0.0)

    assert first is again  # one decision object per step and rule, shared
    assert (first.code, first.step, first.rule) == (Decision.ALLOWED, 0, 1)
    assert spent.code is Decision.MAX_CALLS_EXCEEDED
    assert (pinned.step, free.step) == (1, 2)
    assert (denied.code, denied.step, denied.rule) == (Decision.POLICY_DENIED, 2, 0)
    assert "policy version 0" in denied.reason
    assert unknown.code is Decision.NOT_IN_PLAN
    assert nan.code is Decision.INVALID_ARGUMENTS and "'amount'" in nan.reason
    assert not_a_name.reason == "the tool name must be a string"
    assert state.used == [2, 1, 1]


def test_a_new_token_decides_under_its_own_policy() -> None:
    state, decide = plan_state(), decider().decide
    before = decide(state, "read", {}, 0.0)
    renamed = {
        **POLICY,
        "rules": [POLICY["rules"][0], {**POLICY["rules"][1], "name": "second"}],
    }
    token = simulated_token(plan=PLAN, policy=renamed, role=None, groups=())

    state.install(token)
    after = decide(state, "read", {}, 0.0)

    assert token.calls is not None
    assert (before.rule, after.rule) == (1, 1)
    assert 'rule "first"' in before.reason
    assert 'rule "second"' in after.reason
