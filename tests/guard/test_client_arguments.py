"""Call arguments the guard cannot decide on, and deny rules that pin arguments, end to end:
the control plane signs the policy into the token, the guard decides each call locally."""

from __future__ import annotations

import math

import pytest

from guard.decisions import Decision
from policies.services import policy_set
from tests.conftest import plan_document

PAY_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "deny", "tools": ["pay"], "args": {"amount": {"gte": 1000}}},
        {"effect": "deny", "tools": ["pay"], "args": {"to": {"regex": "(?i)mallory@.*"}}},
        {"effect": "allow", "tools": ["pay"]},
    ],
}


@pytest.fixture
def pay_guard(make_any_guard, team):
    policy_set(team=team, slug="default", document=PAY_POLICY)
    guard = make_any_guard()
    guard.declare(plan_document(steps=[{"tool": "pay", "maxCalls": 100}]))
    return guard


@pytest.mark.parametrize(
    "args",
    [
        {"amount": math.nan, "to": "bob@acme.dev"},
        {"amount": math.inf, "to": "bob@acme.dev"},
        {"amount": 10, "to": "bob@acme.dev", "split": [1.5, -math.inf]},
        {"amount": 10, "to": "bob@acme.dev", "meta": {"fx": math.nan}},
    ],
)
def test_a_non_finite_number_in_the_arguments_is_invalid_arguments(pay_guard, args):
    decision = pay_guard.check("pay", args)

    assert decision.code == Decision.INVALID_ARGUMENTS
    assert "not finite" in decision.reason or "not a finite number" in decision.reason
    assert pay_guard.status().steps[0].used == 0


@pytest.mark.parametrize("amount", [5000, "5000", [5000], True, None, {"value": 5000}], ids=repr)
def test_a_deny_on_an_amount_blocks_every_spelling_of_a_large_one(pay_guard, amount):
    decision = pay_guard.check("pay", {"amount": amount, "to": "bob@acme.dev"})

    assert decision.code == Decision.POLICY_DENIED
    assert decision.rule == 0


def test_a_deny_blocks_a_call_that_leaves_the_pinned_argument_out(pay_guard):
    assert pay_guard.check("pay", {"to": "bob@acme.dev"}).code == Decision.POLICY_DENIED


def test_a_case_insensitive_deny_is_written_as_an_re2_regex(pay_guard):
    for to in ("mallory@evil.test", "MALLORY@evil.test", "Mallory@x"):
        decision = pay_guard.check("pay", {"amount": 1, "to": to})
        assert (decision.code, decision.rule) == (Decision.POLICY_DENIED, 1)


def test_calls_provably_outside_every_deny_rule_are_allowed(pay_guard):
    decision = pay_guard.check("pay", {"amount": 999.5, "to": "bob@acme.dev", "note": "rent"})

    assert decision.allowed
    assert decision.rule == 2
