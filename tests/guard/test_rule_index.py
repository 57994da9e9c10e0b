"""The rule index narrows a tool's rules by glob, regex, bounds or equality; no call decision
may change by it: `CompiledPolicy.decide` equals a straight scan of the same rules."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.eq_index import EqIndex
from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy, PolicyDecision
from guard.rule_index import BoundIndex, PatternIndex, build_rule_index

NAMES = ("repo", "n", "x")
GLOBS = ("acme/*", "acme/?", "a[b-c]*", "*", "acme/a", "[!a]*", "*é", "?", "[]]*")
REGEXES = ("acme/.*", "a|b", "(?i)ACME/A", ".", "", "x\\d+", "[^a]*", "é.*", "\\Qa.b")
SCALARS = ("acme/a", "acme/b", "b", "", 1, 1.0, 2, -1, True, False, None, 1.5)

# Values chosen to sit on every edge a matcher cares about: near the bounds, matching one
# pattern or several, text no pattern can read (a lone surrogate), numbers that are no
# finite numbers, booleans where numbers are compared, containers, non-string keys.
call_values = st.one_of(
    st.sampled_from(
        [
            "acme/a",
            "acme/b",
            "acme/ab",
            "ab",
            "b",
            "a.b",
            "x12",
            "",
            "é",
            "aé",
            "line\nbreak",
            "\ud800",
            "acme/\udfff",
            0,
            1,
            1.0,
            2,
            -1,
            1.5,
            100,
            2**53,
            -(2**53),
            math.nan,
            math.inf,
            -math.inf,
            True,
            False,
            None,
            [1],
            ["acme/a"],
            {"a": 1},
            {1: "a"},
        ]
    ),
    st.integers(-3, 3),
    st.floats(-3, 3),
    st.text(alphabet="abcé/\n.", max_size=5),
)


def constraints(name_family: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    numbers = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 100])
    by_family = {
        "eq": st.builds(lambda value: {"eq": value}, st.sampled_from(SCALARS)),
        "in": st.builds(
            lambda members: {"in": members}, st.lists(st.sampled_from(SCALARS), min_size=1)
        ),
        "glob": st.builds(lambda pattern: {"glob": pattern}, st.sampled_from(GLOBS)),
        "regex": st.builds(lambda pattern: {"regex": pattern}, st.sampled_from(REGEXES)),
        "pattern": st.one_of(
            st.builds(lambda pattern: {"glob": pattern}, st.sampled_from(GLOBS)),
            st.builds(lambda pattern: {"regex": pattern}, st.sampled_from(REGEXES)),
        ),
        "lte": st.builds(lambda limit: {"lte": limit}, numbers),
        "gte": st.builds(lambda limit: {"gte": limit}, numbers),
    }
    if name_family is not None:
        return by_family[name_family]
    return st.one_of(*(by_family[family] for family in ("eq", "in", "glob", "regex", "lte", "gte")))


effects = st.sampled_from(["allow", "deny", "review"])
tool_globs = st.sampled_from([["pay"], ["p*"], ["other"], ["pay", "other"]])


@st.composite
def rules(draw: Any) -> list[dict[str, Any]]:
    """A policy's rules: a good share pinning `repo` (or `n`) with one operator family, so an
    index gets built, mixed with rules pinning anything (or nothing), shuffled."""
    family = draw(st.sampled_from(["pattern", "glob", "regex", "lte", "gte", "eq"]))
    indexed_name = "n" if family in ("lte", "gte") else "repo"

    def rule(args: dict[str, Any], effect: str, tools: list[str]) -> dict[str, Any]:
        document: dict[str, Any] = {"effect": effect, "tools": tools}
        if args:
            document["args"] = args
        return document

    indexed = draw(
        st.lists(
            st.builds(
                lambda constraint, extra, effect, tools: rule(
                    {**extra, indexed_name: constraint}, effect, tools
                ),
                constraints(family),
                st.dictionaries(st.sampled_from(NAMES), constraints(), max_size=2),
                effects,
                tool_globs,
            ),
            min_size=EqIndex.MIN_ENTRIES,
            max_size=24,
        )
    )
    mixed = draw(
        st.lists(
            st.builds(
                rule,
                st.dictionaries(st.sampled_from(NAMES), constraints(), max_size=3),
                effects,
                tool_globs,
            ),
            max_size=12,
        )
    )
    return draw(st.permutations([*indexed, *mixed]))


calls = st.one_of(
    st.dictionaries(st.sampled_from(NAMES), call_values, max_size=3),
    st.sampled_from([None, [], "repo", 1]),
)


def verdict(decision):
    """What a decision says: allowed or not, by which rule, and why."""
    return (decision.allowed, decision.rule, decision.reason)


@settings(max_examples=3 * settings.default.max_examples, deadline=None)
@given(rules(), st.sampled_from(["allow", "deny"]), st.lists(calls, min_size=1, max_size=12))
def test_an_indexed_decision_equals_a_scan_of_every_rule(
    policy_rules: list[dict[str, Any]], default: str, call_args: list[Any]
) -> None:
    document = validate_policy({"version": 1, "default": default, "rules": policy_rules})
    compiled = CompiledPolicy(document, role=None, groups=[])

    for args in call_args:
        for tool in ("pay", "other"):
            indexed = compiled.decide(tool, args)
            resolved = by_tool_decision(compiled, tool, args)
            scanned = compiled.decide_by_scan(tool, args)
            assert verdict(indexed) == verdict(scanned)
            assert resolved == indexed


def by_tool_decision(compiled: CompiledPolicy, tool: str, args: Any) -> PolicyDecision:
    """The verdict as the guard reads it from `tool_decision`, resolved once per tool."""
    resolved = compiled.tool_decision(tool)
    forms = [resolved.fixed is not None, resolved.test is not None, resolved.decide is not None]
    assert forms.count(True) == 1
    if resolved.fixed is not None:
        return resolved.fixed
    if resolved.test is not None:
        return resolved.passed if resolved.test(args) else resolved.otherwise  # type: ignore[return-value]
    assert resolved.decide is not None
    return resolved.decide(args)


few_rules = st.lists(
    st.builds(
        lambda args, effect, tools: {
            "effect": effect,
            "tools": tools,
            **({"args": args} if args else {}),
        },
        st.dictionaries(st.sampled_from(NAMES), constraints(), max_size=2),
        effects,
        tool_globs,
    ),
    max_size=5,
)


@settings(max_examples=3 * settings.default.max_examples, deadline=None)
@given(few_rules, st.sampled_from(["allow", "deny"]), st.lists(calls, min_size=1, max_size=12))
def test_a_tools_verdict_resolved_once_equals_a_scan_of_every_rule(
    policy_rules: list[dict[str, Any]], default: str, call_args: list[Any]
) -> None:
    """Too few rules for an index: the verdict is fixed, one rule's test, or a short scan
    (`CompiledPolicy.tool_decision`); each gives what a scan of every rule gives."""
    document = validate_policy({"version": 1, "default": default, "rules": policy_rules})
    compiled = CompiledPolicy(document, role=None, groups=[])

    for args in call_args:
        for tool in ("pay", "other", "unnamed"):
            resolved = by_tool_decision(compiled, tool, args)
            scanned = compiled.decide_by_scan(tool, args)
            assert verdict(resolved) == verdict(scanned)
            assert compiled.decide(tool, args) == resolved


def test_a_tool_with_one_rule_pinning_arguments_is_decided_by_that_rules_test() -> None:
    document = validate_policy(
        {
            "version": 1,
            "default": "deny",
            "rules": [
                {"effect": "allow", "tools": ["pay"], "args": {"to": {"regex": "acme/.*"}}},
                {"effect": "allow", "tools": ["read"]},
            ],
        }
    )
    compiled = CompiledPolicy(document, role=None, groups=[])

    pay, read, other = (compiled.tool_decision(tool) for tool in ("pay", "read", "other"))

    assert pay.fixed is None and pay.test is not None and pay.decide is None
    assert (pay.passed.rule, pay.otherwise.rule) == (0, None)  # type: ignore[union-attr]
    assert pay.test({"to": "acme/app"}) and not pay.test({"to": "evil/app"})
    assert read.fixed is not None and read.fixed.rule == 1
    assert other.fixed is not None and (other.fixed.rule, other.fixed.allowed) == (None, False)


def entries(*args: dict[str, Any] | None) -> list[tuple[int, dict[str, Any] | None]]:
    return list(enumerate(args))


def test_many_glob_rules_narrow_a_call_to_the_rules_its_value_matches() -> None:
    pinned = [{"repo": {"glob": f"acme/secret-{index}-*"}} for index in range(20)]
    index = build_rule_index(entries(*pinned, {"repo": {"glob": "acme/*"}}, None))

    assert isinstance(index, PatternIndex)
    assert index.candidates({"repo": "acme/secret-3-x"}) == (3, 20, 21)
    assert index.candidates({"repo": "acme/public"}) == (20, 21)
    assert index.candidates({"repo": 3}) == (21,)  # no pattern matches a number
    assert index.candidates({}) == (21,)
    assert index.candidates({"repo": "\ud800"}) == tuple(range(22))  # left to the matchers


def test_many_deny_regex_rules_keep_every_rule_for_a_value_they_cannot_judge() -> None:
    pinned = [{"repo": {"regex": f"acme/secret-{index}"}} for index in range(10)]
    index = build_rule_index(entries(*pinned), fail_closed=True)

    assert isinstance(index, PatternIndex)
    assert index.candidates({"repo": "acme/public"}) == ()
    assert index.candidates({"repo": "acme/secret-4"}) == (4,)
    every = tuple(range(10))
    for unjudged in ({}, {"repo": 4}, {"repo": None}, {"repo": "acme/\ud800"}, None):
        assert index.candidates(unjudged) == every


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [
        ("lte", 5, (5, 6, 7, 8, 9, 10)),
        ("lte", 5.5, (6, 7, 8, 9, 10)),
        ("lte", -math.inf, tuple(range(11))),
        ("lte", math.inf, (10,)),
        ("gte", 5, (0, 1, 2, 3, 4, 5, 10)),
        ("gte", math.inf, tuple(range(11))),
        ("gte", math.nan, (10,)),
        ("gte", True, (10,)),
        ("gte", "5", (10,)),
    ],
)
def test_many_bound_rules_narrow_a_number_by_bisection(
    operator: str, value: Any, expected: tuple[int, ...]
) -> None:
    pinned = [{"n": {operator: limit}} for limit in range(10)]
    index = build_rule_index(entries(*pinned, {"other": {"eq": 1}}))

    assert isinstance(index, BoundIndex)
    assert index.candidates({"n": value}) == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "5", None, [5]])
def test_deny_bound_rules_keep_every_rule_for_a_value_that_is_no_finite_number(
    value: Any,
) -> None:
    pinned = [{"n": {"gte": 1000 + limit}} for limit in range(10)]
    index = build_rule_index(entries(*pinned), fail_closed=True)

    assert isinstance(index, BoundIndex)
    assert index.candidates({"n": 42}) == ()
    assert index.candidates({"n": value}) == tuple(range(10))
    assert index.candidates({}) == tuple(range(10))
