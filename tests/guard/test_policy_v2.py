"""Policy version 2 (docs/decisions/0066): every operator in a rule's ``args``,
``additionalArgs`` and ``maxSum`` on allow rules, read at issuance (`evaluate_plan`,
`plan_argument_warnings`) and at call time (`CompiledPolicy`); version 1 as it was."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from guard.constraints import compile_constraint
from guard.eq_index import EqIndex
from guard.errors import DocumentInvalid
from guard.plan import validate_plan
from guard.policy import policy_hash, policy_json_schema, validate_policy
from guard.policy_evaluation import (
    POLICY_ARGUMENT_OVERLAPS,
    POLICY_ARGUMENT_UNDECIDABLE,
    POLICY_DENY_OVERLAPS,
    POLICY_DENY_UNDECIDABLE,
    UNPINNED_POLICY_ARGUMENT,
    CompiledPolicy,
    evaluate_plan,
    plan_argument_warnings,
    step_alone,
    step_deny_relation,
    step_rule_relation,
)
from guard.policy_findings import ALLOW_SHADOWED, policy_findings
from guard.relation import Relation, relation_budget

from .strategies import constraints, wild_values
from .strategies_v2 import shape_constraints, v2_plans

# --- documents ----------------------------------------------------------------------------


def policy(*rules: dict[str, Any], default: str = "deny", version: int = 2) -> dict[str, Any]:
    return validate_policy({"version": version, "default": default, "rules": list(rules)})


def step(tool: str, args: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A version-2 step as `validate_plan` normalises it (every default filled)."""
    normalised: dict[str, Any] = {
        "tool": tool,
        "maxCalls": 20,
        "required": False,
        "after": [],
        "additionalArgs": True,
    }
    if args:
        normalised["args"] = args
    normalised.update(fields)
    return normalised


def plan(*steps: dict[str, Any], budgets: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {
        "version": 2,
        "goal": "g",
        "user": "alice@acme.dev",
        "steps": list(steps),
        "budgets": list(budgets),
    }


def budget(steps: list[str], maximum: float, arg: str = "amount", id: str = "refunds") -> dict:
    return {"id": id, "arg": arg, "steps": steps, "max": maximum}


def error_paths(document: object) -> list[str]:
    with pytest.raises(DocumentInvalid) as raised:
        validate_policy(document)
    return [error.path for error in raised.value.errors]


def denials(policy_document: dict[str, Any], plan_document: dict[str, Any]) -> list[str]:
    return [
        denial.error().path
        for denial in evaluate_plan(policy_document, plan_document, role=None, groups=())
    ]


def warnings(policy_document: dict[str, Any], plan_document: dict[str, Any]) -> list[tuple]:
    return [
        (f"plan.{warning.path}", warning.code, warning.rule)
        for warning in plan_argument_warnings(policy_document, plan_document, role=None, groups=())
    ]


def decide(policy_document: dict[str, Any], tool: str, args: object) -> bool:
    compiled = CompiledPolicy(policy_document, role=None, groups=())
    verdict = compiled.decide(tool, args)
    assert verdict == compiled.decide_by_scan(tool, args)
    return verdict.allowed


REFUND = {"effect": "allow", "tools": ["refund"], "maxSum": {"amount": 1000}}


# --- validation ---------------------------------------------------------------------------


def test_a_version_2_rule_may_use_every_operator() -> None:
    args = {
        "path": {"subpath": "/srv/repo"},
        "host": {"cidr": ["10.0.0.0/8"]},
        "command": {"argv": {"cmd": ["git"], "maxArgs": 4}},
        "n": {"type": "integer"},
        "title": {"maxLength": 80},
        "repo": {"glob": "acme/*"},
    }
    document = policy({"effect": "allow", "tools": ["t"], "args": args})
    assert document["version"] == 2
    assert document["rules"][0]["args"] == args


def test_a_version_1_rule_refuses_the_new_operators_and_fields_as_before() -> None:
    rule = {
        "effect": "allow",
        "tools": ["t"],
        "args": {"n": {"type": "integer"}},
        "additionalArgs": False,
        "maxSum": {"amount": 10},
    }
    assert error_paths({"version": 1, "default": "deny", "rules": [rule]}) == [
        "rules[0].additionalArgs",
        "rules[0].maxSum",
        "rules[0].args.n.type",
    ]


def test_a_version_1_policy_normalises_and_hashes_as_before() -> None:
    document = {
        "version": 1,
        "default": "deny",
        "rules": [
            {
                "effect": "allow",
                "tools": ["github_*"],
                "args": {"repo": {"glob": "acme/*"}, "n": {"lte": 3}},
                "maxCalls": 5,
                "name": "r",
            },
            {"effect": "deny", "tools": ["x"], "roles": ["a"]},
            {"effect": "review", "tools": ["deploy"], "groups": ["g"], "description": "d"},
        ],
    }
    normalised = validate_policy(document)
    assert normalised == document
    # polh of this document under the code before version 2 existed
    assert policy_hash(normalised) == (
        "5500e43483cb04c756268ded68ee3fdfc10b617e9a176775906473005c49b461"
    )


def test_an_unknown_version_names_both_known_ones() -> None:
    with pytest.raises(DocumentInvalid) as raised:
        validate_policy({"version": 3, "default": "deny"})
    ((error),) = raised.value.errors
    assert (error.path, error.detail) == ("version", "must be the integer 1 or 2")


def test_additional_args_and_max_sum_are_kept_on_allow_and_review_rules() -> None:
    rules = [
        {"effect": "allow", "tools": ["t"], "additionalArgs": False, "maxSum": {"amount": 1.5}},
        {"effect": "review", "tools": ["u"], "additionalArgs": True, "maxSum": {"n": 3}},
    ]
    assert policy(*rules)["rules"] == rules


@pytest.mark.parametrize("field", ["additionalArgs", "maxSum"])
def test_a_deny_rule_refuses_additional_args_and_max_sum_with_the_path(field: str) -> None:
    value = False if field == "additionalArgs" else {"amount": 10}
    rule = {"effect": "deny", "tools": ["t"], "args": {"n": {"eq": 1}}, field: value}
    allow: dict[str, Any] = {"effect": "allow", "tools": ["t"]}
    document = {"version": 2, "default": "allow", "rules": [allow, rule]}
    with pytest.raises(DocumentInvalid) as raised:
        validate_policy(document)
    ((error),) = raised.value.errors
    assert error.path == f"rules[1].{field}"
    assert "allow and review rules only" in error.detail


@pytest.mark.parametrize(
    ("field", "value", "paths"),
    [
        ("additionalArgs", 0, ["rules[0].additionalArgs"]),
        ("additionalArgs", "false", ["rules[0].additionalArgs"]),
        ("maxSum", [], ["rules[0].maxSum"]),
        ("maxSum", {}, ["rules[0].maxSum"]),
        ("maxSum", {"amount": 0}, ["rules[0].maxSum.amount"]),
        ("maxSum", {"amount": -5}, ["rules[0].maxSum.amount"]),
        ("maxSum", {"amount": True}, ["rules[0].maxSum.amount"]),
        ("maxSum", {"amount": "10"}, ["rules[0].maxSum.amount"]),
        ("maxSum", {"amount": 2**60}, ["rules[0].maxSum.amount"]),
        ("maxSum", {"": 10, "ok": 1, "n": None}, ['rules[0].maxSum[""]', "rules[0].maxSum.n"]),
        ("maxSum", {"a" * 201: 10}, [f"rules[0].maxSum.{'a' * 201}"]),
    ],
)
def test_bad_additional_args_and_max_sum_are_refused_at_their_paths(
    field: str, value: object, paths: list[str]
) -> None:
    rule = {"effect": "allow", "tools": ["t"], field: value}
    assert error_paths({"version": 2, "default": "deny", "rules": [rule]}) == paths


def test_a_version_2_operand_error_carries_its_path() -> None:
    rule = {"effect": "allow", "tools": ["t"], "args": {"path": {"subpath": "/srv/repo/"}}}
    assert error_paths({"version": 2, "default": "deny", "rules": [rule]}) == [
        "rules[0].args.path.subpath"
    ]


SCHEMA = Draft202012Validator(policy_json_schema())


def v2(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"version": 2, "default": "deny", "rules": list(rules)}


@pytest.mark.parametrize(
    ("document", "valid"),
    [
        (v2({"effect": "allow", "tools": ["t"], "args": {"n": {"type": "integer"}}}), True),
        (v2({"effect": "allow", "tools": ["t"], "args": {"p": {"subpath": "/srv"}}}), True),
        (v2({"effect": "allow", "tools": ["t"], "additionalArgs": False}), True),
        (v2({"effect": "review", "tools": ["t"], "maxSum": {"amount": 0.5}}), True),
        (v2({"effect": "deny", "tools": ["t"], "additionalArgs": False}), False),
        (v2({"effect": "deny", "tools": ["t"], "maxSum": {"amount": 5}}), False),
        (v2({"effect": "allow", "tools": ["t"], "maxSum": {"amount": 0}}), False),
        (v2({"effect": "allow", "tools": ["t"], "maxSum": {}}), False),
        (v2({"effect": "allow", "tools": ["t"], "additionalArgs": "no"}), False),
        (v2({"effect": "allow", "tools": ["t"], "args": {"n": {"type": "float"}}}), False),
        ({**v2({"effect": "allow", "tools": ["t"], "maxSum": {"a": 1}}), "version": 1}, False),
        (
            {"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": ["t"]}]},
            True,
        ),
    ],
)
def test_the_schema_and_validate_policy_agree_on_version_2(document: object, valid: bool) -> None:
    assert SCHEMA.is_valid(document) is valid
    try:
        validate_policy(document)
    except DocumentInvalid:
        assert not valid
    else:
        assert valid


def test_the_schema_names_a_bad_version_2_rule_at_its_path() -> None:
    document = v2({"effect": "allow", "tools": ["t"]}, {"effect": "permit", "tools": ["t"]})
    (error,) = SCHEMA.iter_errors(document)
    assert list(error.absolute_path) == ["rules", 1, "effect"]
    assert policy_json_schema(version=2)["properties"]["version"]["const"] == 2


# --- call time ----------------------------------------------------------------------------


def test_a_closed_allow_rule_admits_only_calls_whose_every_argument_it_pins() -> None:
    document = policy(
        {
            "effect": "allow",
            "tools": ["refund"],
            "args": {"order": {"glob": "o-*"}, "amount": {"lte": 100}},
            "additionalArgs": False,
        }
    )
    assert decide(document, "refund", {"order": "o-1", "amount": 5})
    assert not decide(document, "refund", {"order": "o-1", "amount": 5, "note": "x"})
    assert not decide(document, "refund", {"order": "o-1", "amount": 500})
    assert not decide(document, "refund", {"order": "o-1"})
    assert not decide(document, "refund", ["o-1", 5])


def test_a_closed_allow_rule_without_args_admits_only_calls_without_arguments() -> None:
    document = policy({"effect": "allow", "tools": ["ping"], "additionalArgs": False})
    assert decide(document, "ping", {})
    assert not decide(document, "ping", {"host": "x"})


def test_an_open_allow_rule_admits_arguments_it_does_not_pin() -> None:
    document = policy(
        {"effect": "allow", "tools": ["refund"], "args": {"amount": {"lte": 100}}},
        {"effect": "allow", "tools": ["other"], "additionalArgs": True},
    )
    assert decide(document, "refund", {"amount": 5, "note": "x"})
    assert decide(document, "other", {"anything": 1})


def test_a_closed_rule_is_passed_over_for_the_next_rule() -> None:
    document = policy(
        {"effect": "allow", "tools": ["t"], "args": {"a": {"eq": 1}}, "additionalArgs": False},
        {"effect": "allow", "tools": ["t"], "args": {"b": {"eq": 2}}},
    )
    compiled = CompiledPolicy(document, role=None, groups=())
    assert compiled.decide("t", {"a": 1}).rule == 0
    assert compiled.decide("t", {"a": 1, "b": 2}).rule == 1
    assert not compiled.decide("t", {"a": 1, "c": 3}).allowed


@given(
    st.dictionaries(
        st.sampled_from(["k", "a", "b", "x"]),
        st.one_of(st.sampled_from(["v0", "v1", "v3", 5, 50, 10.0]), wild_values),
        max_size=3,
    ),
)
def test_closed_rules_read_the_same_through_the_index(call: dict[str, Any]) -> None:
    # Enough rules pinning `k` with eq for the call-time index to be built.
    rules: list[dict[str, Any]] = [
        {
            "effect": "allow",
            "tools": ["t"],
            "args": {"k": {"eq": f"v{index}"}, "a": {"lte": 10}},
            "additionalArgs": index % 2 == 0,
        }
        for index in range(EqIndex.MIN_ENTRIES + 2)
    ]
    document = policy(*rules)
    compiled = CompiledPolicy(document, role=None, groups=())
    assert compiled.decide("t", call) == compiled.decide_by_scan("t", call)
    expected = next(
        (
            index
            for index, rule in enumerate(rules)
            if call.get("k") == rule["args"]["k"]["eq"]
            and isinstance(call.get("a"), int | float)
            and not isinstance(call.get("a"), bool)
            and call["a"] <= 10
            and (rule["additionalArgs"] or set(call) <= {"k", "a"})
        ),
        None,
    )
    assert compiled.decide("t", call).rule == expected


DENY_SUBPATH = policy(
    {"effect": "deny", "tools": ["read"], "args": {"path": {"subpath": "/etc"}}},
    {"effect": "allow", "tools": ["read"]},
)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/srv/repo/readme", True),
        ("/etc/passwd", False),
        ("/etc", False),
        ("/srv/../etc/passwd", False),
        ("//etc/passwd", False),
        ("/srv/%2e%2e/etc/passwd", False),
        ("relative/etc", False),
        (7, False),
        (None, False),
    ],
)
def test_a_deny_rule_with_a_new_operator_fails_closed(path: object, allowed: bool) -> None:
    assert decide(DENY_SUBPATH, "read", {"path": path}) is allowed


def test_a_deny_rule_with_a_new_operator_matches_a_missing_argument() -> None:
    assert not decide(DENY_SUBPATH, "read", {})


@pytest.mark.parametrize(
    ("constraint", "value", "allowed"),
    [
        ({"maxLength": 5}, "abcdefg", True),
        ({"maxLength": 5}, "abc", False),
        ({"maxLength": 5}, 12345678, False),
        ({"type": "integer"}, "text", True),
        ({"type": "integer"}, 3, False),
        ({"type": "integer"}, "3", False),  # a tool may coerce it
        ({"cidr": ["10.0.0.0/8"]}, "192.168.0.1", True),
        ({"cidr": ["10.0.0.0/8"]}, "10.1.2.3", False),
        ({"cidr": ["10.0.0.0/8"]}, "::ffff:10.1.2.3", False),
        ({"cidr": ["10.0.0.0/8"]}, "010.1.2.3", False),
    ],
)
def test_deny_rules_of_every_new_operator_fail_closed(
    constraint: dict[str, Any], value: object, allowed: bool
) -> None:
    document = policy(
        {"effect": "deny", "tools": ["t"], "args": {"v": constraint}},
        {"effect": "allow", "tools": ["t"]},
    )
    assert decide(document, "t", {"v": value}) is allowed


# --- issuance: closed steps ---------------------------------------------------------------


def test_a_closed_step_leaving_out_an_argument_an_allow_rule_needs_is_refused() -> None:
    document = policy({"effect": "allow", "tools": ["push"], "args": {"branch": {"eq": "dev"}}})
    closed = plan(step("push", {"repo": {"eq": "acme/app"}}, additionalArgs=False))
    open_step = plan(step("push", {"repo": {"eq": "acme/app"}}))
    assert denials(document, closed) == ["plan.steps[0].args.branch"]
    (denial,) = evaluate_plan(document, closed, role=None, groups=())
    assert "leaves branch out (additionalArgs false)" in denial.reason
    assert denials(document, open_step) == []
    assert warnings(document, open_step) == [
        ("plan.steps[0].args.branch", UNPINNED_POLICY_ARGUMENT, 0)
    ]


def test_a_closed_step_leaving_out_an_argument_a_deny_rule_constrains_is_inside_it() -> None:
    document = policy(
        {"effect": "deny", "tools": ["push"], "args": {"branch": {"eq": "main"}}},
        {"effect": "allow", "tools": ["push"]},
    )
    closed = plan(step("push", {"repo": {"eq": "acme/app"}}, additionalArgs=False))
    open_step = plan(step("push", {"repo": {"eq": "acme/app"}}))
    assert denials(document, closed) == ["plan.steps[0].args.branch"]
    assert denials(document, open_step) == []
    assert warnings(document, open_step) == [("plan.steps[0].args.branch", POLICY_DENY_OVERLAPS, 0)]
    # And the guard refuses every call the closed step lets through: the branch is missing.
    assert not decide(document, "push", {"repo": "acme/app"})


# --- issuance: closed rules ---------------------------------------------------------------

CLOSED = policy(
    {
        "effect": "allow",
        "tools": ["refund"],
        "args": {"order": {"glob": "o-*"}, "amount": {"lte": 1000}},
        "additionalArgs": False,
    }
)


def test_a_closed_rule_admits_every_call_of_a_closed_step_naming_a_subset() -> None:
    closed = plan(step("refund", {"order": {"eq": "o-7"}}, id="refund", additionalArgs=False))
    budgeted = plan(
        step("refund", {"order": {"eq": "o-7"}}, id="refund", additionalArgs=False),
        budgets=(budget(["refund"], 500),),
    )
    assert denials(CLOSED, closed) == ["plan.steps[0].args.amount"]  # absent amount
    assert denials(CLOSED, budgeted) == []
    assert warnings(CLOSED, budgeted) == []


def test_a_closed_rule_against_an_open_step_warns_at_the_steps_additional_args() -> None:
    open_step = plan(
        step("refund", {"order": {"eq": "o-7"}, "amount": {"lte": 10}}, id="refund"),
    )
    assert denials(CLOSED, open_step) == []
    assert warnings(CLOSED, open_step) == [
        ("plan.steps[0].additionalArgs", POLICY_ARGUMENT_OVERLAPS, 0)
    ]


def test_a_closed_rule_admits_no_call_of_a_step_pinning_an_argument_it_does_not_name() -> None:
    extra = plan(
        step(
            "refund",
            {"order": {"eq": "o-7"}, "amount": {"lte": 10}, "note": {"eq": "x"}},
            additionalArgs=False,
        )
    )
    assert denials(CLOSED, extra) == ["plan.steps[0].args.note"]
    (denial,) = evaluate_plan(CLOSED, extra, role=None, groups=())
    assert "rules[0] requires no note (additionalArgs false)" in denial.reason


# --- issuance: budgets and maxSum ---------------------------------------------------------


def refund_plan(maximum: float | None, **fields: Any) -> dict[str, Any]:
    budgets = () if maximum is None else (budget(["refund"], maximum),)
    return plan(step("refund", id="refund", **fields), budgets=budgets)


def test_a_step_a_max_sum_rule_admits_is_issued_under_a_budget_within_the_ceiling() -> None:
    document = policy(REFUND)
    assert denials(document, refund_plan(1000)) == []
    assert denials(document, refund_plan(999.5)) == []


def test_a_budget_over_the_ceiling_is_refused_naming_step_and_rule() -> None:
    document = policy({"effect": "allow", "tools": ["other"]}, REFUND)
    (denial,) = evaluate_plan(document, refund_plan(1000.5), role=None, groups=())
    assert (denial.step, denial.rule, denial.error().path) == (0, 1, "plan.steps[0].args.amount")
    assert "caps the sum of amount at 1000 (maxSum)" in denial.reason
    assert "'refunds' lets this step spend 1000.5" in denial.error().detail


def test_a_step_no_budget_covers_is_refused_by_a_max_sum_rule() -> None:
    document = policy(REFUND)
    (denial,) = evaluate_plan(document, refund_plan(None), role=None, groups=())
    assert denial.error().path == "plan.steps[0].args.amount"
    assert "no budget of the plan over amount covers this step" in denial.reason
    # A budget over another argument, or covering another step, does not count.
    other_argument = plan(step("refund", id="refund"), budgets=(budget(["refund"], 10, arg="fee"),))
    other_step = plan(
        step("refund", id="refund"), step("refund", id="second"), budgets=(budget(["second"], 10),)
    )
    assert denials(document, other_argument) == ["plan.steps[0].args.amount"]
    assert denials(document, other_step) == ["plan.steps[0].args.amount"]


def test_the_tightest_budget_covering_the_step_counts() -> None:
    document = policy(REFUND)
    two = plan(
        step("refund", id="refund"),
        budgets=(budget(["refund"], 5000), budget(["refund"], 800, id="tight")),
    )
    assert denials(document, two) == []


def test_a_lowered_ceiling_refuses_the_same_plan() -> None:
    issued = refund_plan(800)
    assert denials(policy(REFUND), issued) == []
    lowered = policy({**REFUND, "maxSum": {"amount": 500}})
    assert denials(lowered, issued) == ["plan.steps[0].args.amount"]


def test_max_sum_reads_only_rules_that_admit_some_call_of_the_step() -> None:
    document = policy(
        {
            "effect": "allow",
            "tools": ["refund"],
            "args": {"currency": {"eq": "EUR"}},
            "maxSum": {"amount": 10},
        },
        {"effect": "allow", "tools": ["refund"], "args": {"currency": {"eq": "USD"}}},
    )
    usd = plan(step("refund", {"currency": {"eq": "USD"}}, id="refund"))
    eur = plan(step("refund", {"currency": {"eq": "EUR"}}, id="refund"))
    assert denials(document, usd) == []
    assert denials(document, eur) == ["plan.steps[0].args.amount"]


def test_a_review_rule_with_max_sum_holds_its_steps_alike() -> None:
    document = policy({**REFUND, "effect": "review"})
    assert denials(document, refund_plan(2000)) == ["plan.steps[0].args.amount"]
    assert denials(document, refund_plan(100)) == []


def test_with_a_default_that_allows_a_disjoint_max_sum_rule_refuses_nothing() -> None:
    document = policy({**REFUND, "args": {"currency": {"eq": "EUR"}}}, default="allow")
    usd = plan(step("refund", {"currency": {"eq": "USD"}}, id="refund"))
    assert denials(document, usd) == []


@pytest.mark.parametrize(
    ("rule", "maximum", "pin", "expected"),
    [
        ({"lte": 1000}, 500, None, []),
        ({"lte": 1000}, 2000, None, [POLICY_ARGUMENT_OVERLAPS]),
        ({"gte": 0}, 2000, None, []),
        ({"type": "number"}, 2000, None, []),
        ({"type": "integer"}, 2000, None, [POLICY_ARGUMENT_OVERLAPS]),
        ({"in": [1, 2, 3]}, 2000, None, [POLICY_ARGUMENT_OVERLAPS]),
        ({"lte": 1000}, 2000, {"lte": 900}, []),
        ({"lte": 1000}, 2000, {"gte": 100}, [POLICY_ARGUMENT_OVERLAPS]),
        ({"lte": 1000}, 600, {"gte": 100}, []),
        ({"in": [5, 7000]}, 2000, {"in": [5, 7000]}, []),
    ],
)
def test_a_budgeted_argument_is_a_number_from_0_to_the_budget(
    rule: dict[str, Any], maximum: float, pin: dict[str, Any] | None, expected: list[str]
) -> None:
    document = policy({"effect": "allow", "tools": ["refund"], "args": {"amount": rule}})
    args = None if pin is None else {"amount": pin}
    budgeted = plan(step("refund", args, id="refund"), budgets=(budget(["refund"], maximum),))
    assert denials(document, budgeted) == []
    assert [code for _, code, _ in warnings(document, budgeted)] == expected


@pytest.mark.parametrize(
    ("rule", "maximum"),
    [({"gte": 5000}, 2000), ({"lte": -1}, 2000), ({"in": [3000, -4]}, 2000), ({"eq": "x"}, 9)],
)
def test_a_budgeted_argument_outside_a_rule_is_refused(
    rule: dict[str, Any], maximum: float
) -> None:
    document = policy({"effect": "allow", "tools": ["refund"], "args": {"amount": rule}})
    budgeted = plan(step("refund", id="refund"), budgets=(budget(["refund"], maximum),))
    assert denials(document, budgeted) == ["plan.steps[0].args.amount"]
    (denial,) = evaluate_plan(document, budgeted, role=None, groups=())
    assert f"amount from 0 within a budget of {maximum}" in denial.reason


def test_a_deny_rule_reads_a_budgeted_argument_as_its_numbers() -> None:
    document = policy(
        {"effect": "deny", "tools": ["refund"], "args": {"amount": {"gte": 10_000}}},
        {"effect": "allow", "tools": ["refund"]},
    )
    small = plan(step("refund", id="refund"), budgets=(budget(["refund"], 500),))
    large = plan(step("refund", id="refund"), budgets=(budget(["refund"], 50_000),))
    assert denials(document, small) == []
    assert warnings(document, small) == []
    assert warnings(document, large) == [("plan.steps[0].args.amount", POLICY_DENY_OVERLAPS, 0)]


# --- the relation is the one of every operator --------------------------------------------


def test_a_new_operator_pinned_disjoint_from_every_rule_is_refused() -> None:
    document = policy({"effect": "allow", "tools": ["read"], "args": {"path": {"subpath": "/srv"}}})
    inside = plan(step("read", {"path": {"subpath": "/srv/repo"}}))
    outside = plan(step("read", {"path": {"subpath": "/etc"}}))
    assert denials(document, inside) == []
    assert warnings(document, inside) == []
    assert denials(document, outside) == ["plan.steps[0].args.path"]


def test_a_step_inside_a_deny_rules_new_operator_is_refused() -> None:
    document = policy(
        {"effect": "deny", "tools": ["fetch"], "args": {"ip": {"cidr": ["10.0.0.0/8"]}}},
        {"effect": "allow", "tools": ["fetch"]},
    )
    inside = plan(step("fetch", {"ip": {"cidr": ["10.1.0.0/16"]}}))
    outside = plan(step("fetch", {"ip": {"cidr": ["192.168.0.0/16"]}}))
    assert denials(document, inside) == ["plan.steps[0].args.ip"]
    assert denials(document, outside) == []


# --- the impact preview judges a step alone, with its budgets -----------------------------


def test_step_alone_keeps_the_budgets_covering_the_step() -> None:
    whole = plan(
        step("read", id="read"),
        step("refund", id="refund"),
        budgets=(budget(["read", "refund"], 300), budget(["read"], 5, arg="n", id="reads")),
    )
    assert step_alone(whole, 1) == {
        "steps": [whole["steps"][1]],
        "budgets": [budget(["refund"], 300)],
    }
    assert step_alone(plan(step("x")), 0) == {"steps": [step("x")]}
    document = policy(REFUND)
    assert denials(document, step_alone(whole, 1)) == []
    lowered = policy({**REFUND, "maxSum": {"amount": 100}})
    assert denials(lowered, step_alone(whole, 1)) == ["plan.steps[0].args.amount"]


# --- version 1 ----------------------------------------------------------------------------


def test_a_version_1_plan_against_a_version_2_policy_reads_as_before() -> None:
    document = policy(
        {"effect": "allow", "tools": ["push"], "args": {"branch": {"eq": "dev"}}},
        REFUND,
    )
    v1 = {
        "version": 1,
        "goal": "g",
        "user": "alice@acme.dev",
        "steps": [
            {"tool": "push", "args": {"branch": {"eq": "main"}}, "maxCalls": 20, "required": False},
            {"tool": "refund", "maxCalls": 20, "required": False},
        ],
    }
    assert denials(document, v1) == ["plan.steps[0].args.branch", "plan.steps[1].args.amount"]


# --- findings -----------------------------------------------------------------------------


def test_a_closed_allow_rule_leaving_out_what_a_deny_constrains_is_shadowed() -> None:
    deny = {"effect": "deny", "tools": ["push"], "args": {"force": {"eq": False}}}
    closed = {"effect": "allow", "tools": ["push"], "args": {"repo": {"glob": "acme/*"}}}
    document = policy(deny, {**closed, "additionalArgs": False}, closed)
    (finding,) = policy_findings(document)
    assert (finding.rule, finding.code, finding.by) == (1, ALLOW_SHADOWED, (0,))
    # Every call it admits lacks force, which the deny matches (it fails closed) ...
    assert not decide(document, "push", {"repo": "acme/app"})
    # ... while the open rule admits a call passing force true.
    assert decide(document, "push", {"repo": "acme/app", "force": True})


def test_a_deny_with_a_new_operator_shadows_an_allow_rule_inside_it() -> None:
    deny = {"effect": "deny", "tools": ["read"], "args": {"path": {"subpath": "/etc"}}}
    inside = {"effect": "allow", "tools": ["read"], "args": {"path": {"subpath": "/etc/ssl"}}}
    outside = {"effect": "allow", "tools": ["read"], "args": {"path": {"subpath": "/srv"}}}
    findings = policy_findings(policy(deny, inside, outside))
    assert [(finding.rule, finding.code) for finding in findings] == [(1, ALLOW_SHADOWED)]


# --- held to brute force -----------------------------------------------------------------

NAMES = ("a", "b", "amount", "z")
UNIVERSE: dict[str, list[Any]] = {
    "a": ["x", "xy", "y", "", 1, 5, None],
    "b": ["x", "xy", "y", "", 1, 5, None],
    "amount": [0, 1, 250, 300.5, 500, 1500, -1, "10", None],
    "z": ["x", 3],
}
TEXT_OR_NUMBER = [
    {"eq": "x"},
    {"in": ["x", 1]},
    {"glob": "x*"},
    {"lte": 3},
    {"type": "string"},
    {"maxLength": 0},
]
AMOUNTS = [
    {"lte": 500},
    {"gte": 1},
    {"in": [0, 250]},
    {"type": "integer"},
    {"eq": "10"},
    {"lte": -5},
    {"gte": 300},
]
_ABSENT = object()


@st.composite
def pinned(draw: st.DrawFn, names: tuple[str, ...]) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(names), unique=True))
    return {
        name: draw(st.sampled_from(AMOUNTS if name == "amount" else TEXT_OR_NUMBER))
        for name in chosen
    }


def admitted_by_step(
    call: dict[str, Any], args: dict[str, Any], closed: bool, ceiling: float | None
) -> bool:
    """What the guard lets a call pass under the step (guard.plan, guard.budgets): every
    pinned argument present and satisfied, a budgeted amount a number from 0 to the
    budget, and for a closed step no other argument."""
    for name, constraint in args.items():
        if name not in call or not compile_constraint(constraint)(call[name]):
            return False
    if ceiling is not None:
        amount = call.get("amount")
        if not isinstance(amount, int | float) or isinstance(amount, bool):
            return False
        if not 0 <= amount <= ceiling:
            return False
    if closed:
        named = set(args) | ({"amount"} if ceiling is not None else set())
        return set(call) <= named
    return True


def calls() -> list[dict[str, Any]]:
    choices = [[_ABSENT, *UNIVERSE[name]] for name in NAMES]
    return [
        {name: value for name, value in zip(NAMES, values, strict=True) if value is not _ABSENT}
        for values in itertools.product(*choices)
    ]


CALLS = calls()


@settings(max_examples=150)
@given(
    pinned(("a", "b", "amount")),
    st.booleans(),
    st.sampled_from([None, 1, 500, 2000]),
    pinned(("a", "b", "amount")),
    st.booleans(),
)
def test_closed_and_budgeted_relations_hold_against_every_sampled_call(
    step_args: dict[str, Any],
    closed: bool,
    ceiling: float | None,
    rule_args: dict[str, Any],
    rule_closed: bool,
) -> None:
    budgets = None if ceiling is None else {"amount": ceiling}
    allow: dict[str, Any] = {"effect": "allow", "tools": ["t"], "args": rule_args}
    if rule_closed:
        allow["additionalArgs"] = False
    if not rule_args:
        del allow["args"]
    allows = CompiledPolicy(policy(allow), role=None, groups=())
    denies = CompiledPolicy(
        policy(
            {"effect": "deny", "tools": ["t"], "args": rule_args or {"z": {"eq": 3}}},
            default="allow",
        ),
        role=None,
        groups=(),
    )
    admitted = [call for call in CALLS if admitted_by_step(call, step_args, closed, ceiling)]
    relation, _ = step_rule_relation(
        step_args, rule_args, closed=closed, budgets=budgets, rule_closed=rule_closed
    )
    passed = [allows.decide("t", call).allowed for call in admitted]
    if relation is Relation.INSIDE:
        assert all(passed)
    if relation is Relation.DISJOINT:
        assert not any(passed)
    deny_relation, _ = step_deny_relation(
        step_args, rule_args or {"z": {"eq": 3}}, closed=closed, budgets=budgets
    )
    refused = [not denies.decide("t", call).allowed for call in admitted]
    if deny_relation is Relation.INSIDE:
        assert all(refused)
    if deny_relation is Relation.DISJOINT:
        assert not any(refused)


@st.composite
def plans_and_policies(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A validated version-2 plan, and a version-2 policy whose rules concern its tools and
    constrain its arguments (closed or not, with maxSum or not)."""
    plan_document = validate_plan(draw(v2_plans(max_steps=4)))
    tools = sorted({step["tool"] for step in plan_document["steps"]})
    names = sorted({name for step in plan_document["steps"] for name in step["args"]})
    names += ["amount", "n"]
    rules = []
    for _ in range(draw(st.integers(0, 4))):
        effect = draw(st.sampled_from(["allow", "deny", "review"]))
        rule: dict[str, Any] = {
            "effect": effect,
            "tools": [draw(st.sampled_from([*tools, "*"]))],
        }
        args = draw(
            st.dictionaries(
                st.sampled_from(names),
                constraints() | shape_constraints | st.sampled_from(AMOUNTS),
                max_size=2,
            )
        )
        if args:
            rule["args"] = args
        if effect != "deny" and draw(st.booleans()):
            rule["additionalArgs"] = draw(st.booleans())
        if effect != "deny" and draw(st.booleans()):
            rule["maxSum"] = {"amount": draw(st.sampled_from([1, 500, 10**6]))}
        rules.append(rule)
    return plan_document, policy(*rules, default=draw(st.sampled_from(["allow", "deny"])))


@settings(max_examples=150)
@given(plans_and_policies())
def test_each_step_alone_with_its_budgets_is_judged_as_in_its_plan(
    drawn: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    plan_document, policy_document = drawn
    # One budget of work large enough for every relation here: whole and alone alike.
    with relation_budget(10**9):
        whole = evaluate_plan(policy_document, plan_document, role=None, groups=())
        whole_warnings = plan_argument_warnings(
            policy_document, plan_document, role=None, groups=(), denials=whole
        )
        for index in range(len(plan_document["steps"])):
            alone = step_alone(plan_document, index)
            denied = evaluate_plan(policy_document, alone, role=None, groups=())
            assert [replace(denial, step=index) for denial in denied] == [
                denial for denial in whole if denial.step == index
            ]
            warned = plan_argument_warnings(
                policy_document, alone, role=None, groups=(), denials=denied
            )
            assert [replace(warning, step=index) for warning in warned] == [
                warning for warning in whole_warnings if warning.step == index
            ]


# --- plangate check -----------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def test_plangate_check_prints_undecidable_pairs_as_warnings(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.json"
    plan_file = tmp_path / "plan.json"
    policy_file.write_text(
        json.dumps(
            {
                "version": 2,
                "default": "deny",
                "rules": [
                    {"effect": "allow", "tools": ["fetch"], "args": {"url": {"regex": "(?i)h.*"}}},
                    {"effect": "deny", "tools": ["read"], "args": {"path": {"glob": "*secret*"}}},
                    {"effect": "allow", "tools": ["read"]},
                ],
            }
        )
    )
    url = {"url": {"scheme": ["https"], "host": ["acme.dev"]}}
    plan_file.write_text(
        json.dumps(
            {
                "version": 2,
                "goal": "g",
                "user": "alice@acme.dev",
                "steps": [
                    {"tool": "fetch", "args": {"url": url}},
                    {"tool": "read", "args": {"path": {"subpath": "/srv/repo"}}},
                ],
            }
        )
    )
    check = [sys.executable, "-m", "guard.cli", "check", "--plan", str(plan_file)]
    check += ["--policy", str(policy_file), "read", '{"path": "/srv/repo/readme"}']

    text = subprocess.run(check, capture_output=True, text=True, cwd=ROOT)
    as_json = subprocess.run([*check, "--json"], capture_output=True, text=True, cwd=ROOT)

    assert text.returncode == 0, text.stderr
    assert "decision: allowed" in text.stdout
    assert "warning: plan.steps[0].args.url: fetch: some calls may be refused" in text.stdout
    assert "warning: plan.steps[1].args.path: read: some calls may be refused" in text.stdout
    warned = [
        (warning["path"], warning["code"])
        for warning in json.loads(as_json.stdout)["plan"]["warnings"]
    ]
    assert warned == [
        ("plan.steps[0].args.url", POLICY_ARGUMENT_UNDECIDABLE),
        ("plan.steps[1].args.path", POLICY_DENY_UNDECIDABLE),
    ]
