"""Version-2 plans and policies against bypasses (docs/decisions/0066): values the issue
says must be blocked, held to the matcher, the deny reading and the guard's decisions."""

from __future__ import annotations

from typing import Any

import pytest

from guard import paths, urls
from guard.constraints import compile_constraint
from guard.decisions import Decision
from guard.deny import compile_exclusion
from guard.errors import DocumentInvalid
from guard.offline import call_decide, simulated_token
from guard.plan import validate_plan
from guard.policy import validate_policy
from guard.relation import constraint_relation, deny_relation

ALLOW = validate_policy({"version": 1, "default": "allow", "rules": []})


def decisions(document: dict[str, Any], calls: list[tuple[str, Any]]) -> list[Decision]:
    plan = validate_plan(document)
    token = simulated_token(plan=plan, policy=ALLOW, role=None, groups=())
    return [Decision(made.code) for made in call_decide(token, calls)]


def v2(steps: list[dict[str, Any]], budgets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {"version": 2, "goal": "g", "user": "u@acme.dev", "steps": steps}
    if budgets is not None:
        document["budgets"] = budgets
    return document


def test_a_url_deny_of_a_host_matches_it_on_every_port():
    deny = {"scheme": ["https", "wss"], "host": ["evil.test", "*.evil.test"]}
    excluded = urls.compile_excluder(deny)
    for value in (
        "https://evil.test:8443/",
        "https://EVIL.test:1/x",
        "https://a.evil.test.:65535/",
        "wss://evil.test:443/",
        "https://evil.test:0/",
    ):
        assert not excluded(value), value


@pytest.mark.parametrize(
    "amount",
    [-1, -0.5, True, False, float("nan"), float("inf"), "5", "1e2", None, [1], {"a": 1}],
)
def test_a_budgeted_step_refuses_an_amount_that_is_not_one(amount):
    document = v2(
        [{"id": "pay", "tool": "pay"}],
        budgets=[{"id": "money", "arg": "amount", "max": 100, "steps": ["pay"]}],
    )
    assert decisions(document, [("pay", {"amount": amount})]) != [Decision.ALLOWED]


def test_a_budget_is_not_passed_by_tiny_or_huge_amounts():
    document = v2(
        [{"id": "pay", "tool": "pay"}],
        budgets=[{"id": "money", "arg": "amount", "max": 1, "steps": ["pay"]}],
    )
    calls = [("pay", {"amount": 1}), ("pay", {"amount": 5e-324}), ("pay", {"amount": 0.0})]
    assert decisions(document, calls)[:2] == [Decision.ALLOWED, Decision.BUDGET_EXCEEDED]
    huge = [("pay", {"amount": 0.5}), ("pay", {"amount": 10**4000}), ("pay", {"amount": 0.5})]
    expected = [Decision.ALLOWED, Decision.BUDGET_EXCEEDED, Decision.ALLOWED]
    assert decisions(document, huge) == expected
    tenths = [("pay", {"amount": 0.1})] * 11
    assert decisions(document, tenths).count(Decision.ALLOWED) == 10


def test_a_closed_step_refuses_an_extra_argument():
    document = v2([{"tool": "read", "args": {"path": {"eq": "/a"}}, "additionalArgs": False}])
    assert decisions(document, [("read", {"path": "/a"})]) == [Decision.ALLOWED]
    extra = decisions(document, [("read", {"path": "/a", "recursive": True})])
    assert extra != [Decision.ALLOWED]


def test_a_step_after_another_is_refused_until_that_one_is_complete():
    document = v2(
        [
            {"id": "a", "tool": "a", "required": True, "maxCalls": 2},
            {"id": "b", "tool": "b", "after": ["a"]},
        ]
    )
    assert decisions(document, [("b", {})]) == [Decision.OUT_OF_ORDER]


@pytest.mark.parametrize("key", ["budgets", "after", "id", "additionalArgs"])
def test_a_version_1_plan_with_version_2_keys_is_invalid(key):
    step: dict[str, Any] = {"tool": "t"}
    document: dict[str, Any] = {"version": 1, "goal": "g", "user": "u@acme.dev", "steps": [step]}
    if key == "budgets":
        document["budgets"] = []
    else:
        step[key] = {"after": [], "id": "s", "additionalArgs": False}[key]
    with pytest.raises(DocumentInvalid):
        validate_plan(document)


@pytest.mark.parametrize(
    "value",
    ["/srv/app/../etc/passwd", "/srv/app/%2e%2e/x", "/srv/app/\x00/x", "/srv/app\\..\\x"],
)
def test_subpath_refuses_traversal(value):
    assert not paths.compile_matcher("/srv/app")(value)


CROSS_VALUES: list[Any] = [
    "https://evil.test/", "https://evil.test:8443/", "https://EVIL.test/", "http://evil.test/",
    "https://a.evil.test/", "https://acme.dev/repos/acme/x", "https://acme.dev/", "/srv/app/x",
    "/srv/app", "/srv/APP/x", "/srv/app/../etc", "/etc/passwd", "10.0.0.1", "10.0.0.300",
    "192.168.1.1", "::1", "", "a", "abcdef", "x" * 20, "rm -rf /", 5, 5.5, -1, True, None, [],
    {}, ["git", "status"], ["rm", "-rf", "/"], ["git", "push", "--force"],
]  # fmt: skip
CROSS_CONSTRAINTS: list[dict[str, Any]] = [
    {"url": {"scheme": ["https"], "host": ["evil.test", "*.evil.test"]}},
    {"url": {"scheme": ["https"], "host": ["acme.dev"], "pathPrefix": "/repos/acme/"}},
    {"subpath": "/srv/app"}, {"subpath": "/"}, {"cidr": ["10.0.0.0/8"]},
    {"cidr": ["0.0.0.0/0", "::/0"]}, {"argv": {"cmd": ["git"], "subcommands": ["status", "push"]}},
    {"type": "string"}, {"type": "integer"}, {"type": "array"}, {"type": "number"},
    {"type": "boolean"}, {"maxLength": 5}, {"maxLength": 0}, {"maxLength": 30},
    {"glob": "https://*"}, {"glob": "/srv/*"}, {"regex": "^https://evil"},
    {"regex": "^/srv/app(/.*)?$"}, {"eq": "https://evil.test/"},
    {"in": ["/srv/app/x", "10.0.0.1", 5]},
    {"eq": ["git", "status"]},
]  # fmt: skip


@pytest.mark.parametrize("rule", CROSS_CONSTRAINTS, ids=str)
def test_cross_operator_relations_have_no_counterexample(rule):
    excluded = compile_exclusion(rule)
    admitted_by_rule = compile_constraint(rule)
    for step in CROSS_CONSTRAINTS:
        admitted_by_step = compile_constraint(step)
        allow, deny = constraint_relation(step, rule), deny_relation(step, rule)
        for value in CROSS_VALUES:
            if not admitted_by_step(value):
                continue
            assert not (allow == "inside" and not admitted_by_rule(value)), (step, value)
            assert not (allow == "disjoint" and admitted_by_rule(value)), (step, value)
            assert not (deny == "inside" and excluded(value)), (step, value)
            assert not (deny == "disjoint" and not excluded(value)), (step, value)
