"""Deny rules that pin arguments fail closed: a call passes a deny rule only when a pinned
argument is provably outside its constraint.

`provably_outside` below is the rule of docs/decisions/0016-deny-rules-fail-closed.md
written as plainly as possible, independently of guard.deny; the property tests
hold the compiled policy to it for every operator.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.eq_index import EqIndex
from guard.finite import non_finite_argument
from guard.plan import validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy, evaluate_plan

from .strategies import constraints, json_scalars, json_values, wild_values

# --- the rule, written plainly ----------------------------------------------------------


def json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def comparable(value: Any) -> bool:
    """Numbers finite, text valid Unicode, object keys strings."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return valid_text(value)
    return True


def differs(expected: Any, value: Any) -> bool:
    """`value` is provably not JSON-equal to `expected`."""
    if json_type(expected) != json_type(value) or not comparable(value):
        return False
    if isinstance(expected, list):
        if len(expected) != len(value):
            return True
        return any(differs(item, other) for item, other in zip(expected, value, strict=True))
    if isinstance(expected, dict):
        if any(not isinstance(key, str) for key in value):
            return False
        if set(expected) != set(value):
            return True
        return any(differs(expected[key], value[key]) for key in expected)
    if expected is None:
        return False
    if isinstance(expected, bool):
        return expected != value
    return expected != value  # numbers numerically, strings exactly


def glob_matches(pattern: str, value: str) -> bool:
    # The strategies' globs use only `*`, `?` and plain characters, which fnmatch reads
    # the same way (and `*` crosses `/` there too).
    return fnmatch.fnmatchcase(value, pattern)


def provably_outside(constraint: dict[str, Any], value: Any) -> bool:
    ((operator, operand),) = constraint.items()
    if operator == "eq":
        return differs(operand, value)
    if operator == "in":
        return all(differs(member, value) for member in operand)
    if operator in ("glob", "regex"):
        if not isinstance(value, str) or not valid_text(value):
            return False
        if operator == "glob":
            return not glob_matches(operand, value)
        return re.fullmatch(operand, value) is None
    is_finite_number = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and (not isinstance(value, float) or math.isfinite(value))
    )
    if not is_finite_number:
        return False
    return value > operand if operator == "lte" else value < operand


# --- helpers ------------------------------------------------------------------------------


def deny_policy(*args: dict[str, Any], default: str = "allow") -> CompiledPolicy:
    rules = [{"effect": "deny", "tools": ["pay"], "args": pinned} for pinned in args]
    document = validate_policy({"version": 1, "default": default, "rules": rules})
    return CompiledPolicy(document, role=None, groups=[])


def allowed(compiled: CompiledPolicy, args: Any) -> bool:
    return compiled.decide("pay", args).allowed


# --- the cases that failed open ------------------------------------------------------------

AMOUNT_AT_LEAST_1000 = {"amount": {"gte": 1000}}


@pytest.mark.parametrize(
    "amount",
    [
        5000,
        1000,
        1000.0,
        math.nan,
        math.inf,
        -math.inf,
        "5000",
        "999",
        [5000],
        [],
        True,
        False,
        None,
        {"value": 5000},
        2**80,
    ],
    ids=repr,
)
def test_a_deny_on_a_number_blocks_every_value_not_provably_below_it(amount: Any) -> None:
    compiled = deny_policy(AMOUNT_AT_LEAST_1000)

    decision = compiled.decide("pay", {"amount": amount, "to": "bob"})

    assert not decision.allowed
    assert decision.rule == 0


@pytest.mark.parametrize("amount", [999, 0, -5, 999.5, -(2**80)], ids=repr)
def test_a_deny_on_a_number_lets_finite_numbers_outside_it_pass(amount: float) -> None:
    assert allowed(deny_policy(AMOUNT_AT_LEAST_1000), {"amount": amount})


def test_a_missing_pinned_argument_counts_as_a_match_for_a_deny_rule() -> None:
    compiled = deny_policy(AMOUNT_AT_LEAST_1000)

    assert not allowed(compiled, {"to": "bob"})
    assert not allowed(compiled, {})
    assert not allowed(compiled, None)
    assert not allowed(compiled, ["amount", 5])


def test_a_deny_with_several_pinned_arguments_passes_when_any_one_is_outside() -> None:
    compiled = deny_policy({"amount": {"gte": 1000}, "currency": {"eq": "EUR"}})

    assert not allowed(compiled, {"amount": 5000, "currency": "EUR"})
    assert not allowed(compiled, {"amount": "5000", "currency": ["EUR"]})
    assert allowed(compiled, {"amount": 5000, "currency": "USD"})
    assert allowed(compiled, {"amount": 10, "currency": ["EUR"]})
    assert not allowed(compiled, {"amount": 5000})  # currency missing: may be EUR


SECRET_REPO = {"repo": {"eq": "acme/secret"}}


@pytest.mark.parametrize(
    "repo",
    ["acme/secret", ["acme/secret"], {"name": "acme/secret"}, 42, True, None, "acme/\ud800"],
    ids=repr,
)
def test_a_deny_on_a_string_blocks_values_of_other_types(repo: Any) -> None:
    assert not allowed(deny_policy(SECRET_REPO), {"repo": repo})


def test_eq_is_case_sensitive_and_a_case_insensitive_deny_is_an_re2_regex() -> None:
    exact = deny_policy(SECRET_REPO)
    any_case = deny_policy({"repo": {"regex": "(?i)acme/secret"}})

    # eq compares as JSON: "acme/SECRET" is another string, provably not "acme/secret".
    assert allowed(exact, {"repo": "acme/SECRET"})
    assert allowed(exact, {"repo": "acme/public"})
    for spelling in ("acme/secret", "acme/SECRET", "Acme/Secret"):
        assert not allowed(any_case, {"repo": spelling})
    assert allowed(any_case, {"repo": "acme/public"})
    assert not allowed(any_case, {"repo": ["acme/SECRET"]})


def test_allow_rules_and_plans_keep_the_strict_reading() -> None:
    """Only deny rules fail closed; an allow rule still admits only values that satisfy it."""
    document = validate_policy(
        {
            "version": 1,
            "default": "deny",
            "rules": [{"effect": "allow", "tools": ["pay"], "args": AMOUNT_AT_LEAST_1000}],
        }
    )
    compiled = CompiledPolicy(document, role=None, groups=[])

    assert compiled.decide("pay", {"amount": 5000}).allowed
    for amount in ("5000", [5000], True, math.nan):
        assert not compiled.decide("pay", {"amount": amount}).allowed


def test_the_issuance_check_ignores_deny_rules_with_args() -> None:
    document = validate_policy(
        {
            "version": 1,
            "default": "allow",
            "rules": [{"effect": "deny", "tools": ["pay"], "args": AMOUNT_AT_LEAST_1000}],
        }
    )
    plan = validate_plan(
        {"version": 1, "goal": "g", "user": "alice@acme.dev", "steps": [{"tool": "pay"}]}
    )

    assert evaluate_plan(document, plan, role=None, groups=[]) == []


# --- every operator, every value ------------------------------------------------------------


def related_values(constraint: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values near the constraint's operand: itself, its members, and other spellings of
    them (as text, wrapped in a list, the other case, NaN and infinities)."""
    ((_, operand),) = constraint.items()
    seeds = list(operand) if isinstance(operand, list) else [operand]
    spelt: list[Any] = []
    for seed in seeds:
        spelt += [seed, [seed], {"value": seed}, str(seed)]
        if isinstance(seed, str):
            spelt += [seed.upper(), seed.swapcase(), seed + "x", seed + "\ud800"]
        if isinstance(seed, int | float) and not isinstance(seed, bool):
            spelt += [seed + 1, seed - 1, -seed, float(seed), bool(seed)]
    spelt += [math.nan, math.inf, -math.inf, None, True, False, "", [], {}]
    return st.sampled_from(spelt)


# Six times the profile: the property that keeps deny rules closed, over wild values.
@settings(max_examples=6 * settings.default.max_examples)
@given(constraints(), st.data())
def test_a_deny_rule_never_admits_a_value_that_is_not_provably_outside_it(
    constraint: dict[str, Any], data: Any
) -> None:
    compiled = deny_policy({"x": constraint})
    value = data.draw(wild_values | json_values | related_values(constraint), label="value")

    decision = compiled.decide("pay", {"x": value})

    assert decision.allowed == provably_outside(constraint, value)


# Three times the profile: a security property, and each example is cheap.
@settings(max_examples=3 * settings.default.max_examples)
@given(constraints(), wild_values)
def test_a_deny_rule_never_admits_a_call_missing_its_argument(
    constraint: dict[str, Any], other: Any
) -> None:
    assert not allowed(deny_policy({"x": constraint}), {"y": other})


# Three times the profile: a security property, and each example is cheap.
@settings(max_examples=3 * settings.default.max_examples)
@given(
    st.lists(
        st.builds(lambda value: {"x": {"eq": value}}, json_scalars) | st.just({"y": {"gte": 0}}),
        min_size=EqIndex.MIN_ENTRIES,
        max_size=20,
    ),
    st.data(),
)
def test_many_deny_rules_narrowed_by_an_index_still_fail_closed(
    rules: list[dict[str, Any]], data: Any
) -> None:
    compiled = deny_policy(*rules)
    pinned = [rule["x"]["eq"] for rule in rules if "x" in rule]
    call = data.draw(
        st.fixed_dictionaries(
            {},
            optional={
                "x": st.sampled_from(pinned or [None]) | wild_values | json_scalars,
                "y": st.sampled_from([-1, 1, math.nan, "1"]),
            },
        ),
        label="call",
    )

    decision = compiled.decide("pay", call)

    def rule_matches(rule: dict[str, Any]) -> bool:
        return not any(
            name in call and provably_outside(constraint, call[name])
            for name, constraint in rule.items()
        )

    first = next((index for index, rule in enumerate(rules) if rule_matches(rule)), None)
    assert decision.allowed == (first is None)
    assert decision.rule == first


# --- non-finite numbers in call arguments ------------------------------------------------


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"amount": math.nan}, "argument 'amount' is not a finite number"),
        ({"amount": -math.inf}, "argument 'amount' is not a finite number"),
        ({"items": [1, {"price": math.inf}]}, "argument 'items' holds a number that is not"),
        ({"a": "x", "b": (1, 2, math.nan)}, "argument 'b' holds a number that is not finite"),
    ],
)
def test_a_non_finite_number_anywhere_in_the_arguments_is_named(
    args: dict[str, Any], problem: str
) -> None:
    assert (non_finite_argument(args) or "").startswith(problem)


def test_finite_and_cyclic_arguments_are_scanned_without_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)

    assert non_finite_argument({"a": 1.5, "b": "NaN", "c": [1, {"d": None}], "e": 2**90}) is None
    assert "nests deeper than" in (non_finite_argument({"loop": cyclic}) or "")


@given(json_values)
def test_json_values_never_hold_a_non_finite_number(value: Any) -> None:
    assert non_finite_argument({"x": value}) is None
