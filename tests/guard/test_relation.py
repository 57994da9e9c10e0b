"""guard.relation held to brute force: for every pair of operators (and a step that does not
pin the argument), the relation it answers agrees with the real matchers over a universe of
sampled values: ``inside``, no value the step admits is refused by the rule; ``disjoint``, none
is admitted by both; ``overlapping``, values of both kinds exist. ``undecidable`` is allowed
only where a regex takes part."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.constraints import OPERATORS, compile_constraint, validate_constraint
from guard.patterns import GLOB_ANY, GlobClass, GlobLiteral, glob_parse
from guard.relation import Relation, constraint_relation, relation_budget

# Patterns are written over "a", "b" and "]"; the universe's text adds a newline (which `.`
# leaves out) and "d", a character no pattern names (what `[!ab]` or `[^a]` may stand for).
ALPHABET = "ab]\nd"
STRINGS = [
    "".join(chars) for size in range(5) for chars in itertools.product(ALPHABET, repeat=size)
]
HALVES = [index / 2 for index in range(-8, 9)]
OTHERS: list[Any] = [None, True, False, [1], {"a": 1}, [], {}, "1", 1.25]
# The values of the named cases below.
NAMED: list[Any] = [
    *("acme/app", "acme/public-web", "acme/public-", "acme/", "acme/\n", "acme/a", "acme/b"),
    *("acme/ab", "acme/1", "globex/a", "7", "x"),
    *("0", "0b", " b", "_", "a0", "\tb", "0a", "b ", "b\t"),  # for \d, \w, \s, \S
    *(-1, 0, 5, 10, 11, 50, 100, 101),
]

small_strings = st.text(alphabet="ab", max_size=3)
small_numbers = st.sampled_from(HALVES) | st.integers(-4, 4)
members = small_strings | small_numbers | st.sampled_from([None, True, False, [1], {"a": 1}])
glob_tokens = st.sampled_from(["a", "b", "*", "?", "[ab]", "[!a]", "[a-b]", "[]a]"])
globs = st.lists(glob_tokens, max_size=4).map("".join)
regexes = st.sampled_from(
    [
        "",
        "a+",
        "[ab]*",
        "a|b",
        "(a|b)+b?",
        "a{2,3}",
        "b.*",
        "(?s)b.*",
        "[^a]",
        ".*",
        "(?s).*",
        "^ab$",
        "a*?b",
        "(?:ab)*",
        "\\d",
        "\\w+",
        "[\\s\\d]b",
        "\\S*",
        "(?i)a",
        "[[:alpha:]]b",
        "\\bab",
        "a\\nb",
        "[a-b]{0,2}",
    ]
)

CONSTRAINTS = {
    "eq": members.map(lambda value: {"eq": value}),
    "in": st.lists(members, min_size=1, max_size=4).map(lambda values: {"in": values}),
    "glob": globs.map(lambda pattern: {"glob": pattern}),
    "regex": regexes.map(lambda pattern: {"regex": pattern}),
    "lte": small_numbers.map(lambda bound: {"lte": bound}),
    "gte": small_numbers.map(lambda bound: {"gte": bound}),
}


def universe(*constraints: dict[str, Any] | None) -> list[Any]:
    values: list[Any] = [*STRINGS, *HALVES, *OTHERS, *NAMED]
    for constraint in constraints:
        if constraint is None:
            continue
        ((operator, operand),) = constraint.items()
        if operator == "eq":
            values.append(operand)
        elif operator == "in":
            values.extend(operand)
        elif operator in ("lte", "gte"):
            values.extend((operand, operand - 1, operand + 1, operand - 0.25, operand + 0.25))
    # Two globs may meet only past the strings' length ("aab*" and "*aa" in "aabaa"): their
    # shortest texts, one after the other.
    shortest = [literal_glob(c["glob"]) for c in constraints if c is not None and "glob" in c]
    values.extend(first + second for first, second in itertools.permutations(shortest, 2))
    return values


def literal_glob(pattern: str) -> str:
    """A shortest text the glob matches: `*` empty, `?` "a", a class one of its members
    ("d", which no pattern names, for a negated one)."""
    text = []
    for part in glob_parse(pattern):
        if part == GLOB_ANY:
            text.append("a")
        elif isinstance(part, GlobClass):
            text.append("d" if part.negate else part.ranges[0][0])
        elif isinstance(part, GlobLiteral):
            text.append(part.character)
    return "".join(text)


def check(step: dict[str, Any] | None, rule: dict[str, Any]) -> Relation:
    assert validate_constraint(rule, "rule") == []
    if step is not None:
        assert validate_constraint(step, "step") == []
    relation = constraint_relation(step, rule)
    step_matches = compile_constraint(step) if step is not None else (lambda value: True)
    rule_matches = compile_constraint(rule)
    admitted = [value for value in universe(step, rule) if step_matches(value)]
    both = [value for value in admitted if rule_matches(value)]
    refused = [value for value in admitted if not rule_matches(value)]
    if relation is Relation.INSIDE:
        assert refused == [], (step, rule, relation)
    elif relation is Relation.DISJOINT:
        assert both == [], (step, rule, relation)
    elif relation is Relation.OVERLAPPING:
        assert both and refused, (step, rule, relation)
    else:
        # Only a regex the relation does not model may leave it undecided.
        assert "regex" in rule or (step is not None and "regex" in step), (step, rule)
    return relation


PAIRS = [(step, rule) for step in (*OPERATORS, None) for rule in OPERATORS]


@pytest.mark.parametrize(("step_operator", "rule_operator"), PAIRS)
@given(data=st.data())
def test_the_relation_agrees_with_the_matchers(data, step_operator, rule_operator):
    step = None if step_operator is None else data.draw(CONSTRAINTS[step_operator], "step")
    rule = data.draw(CONSTRAINTS[rule_operator], "rule")

    check(step, rule)


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        # The case of issue 20: a rule narrowed from acme/* to acme/public-*.
        ({"eq": "acme/app"}, {"glob": "acme/public-*"}, Relation.DISJOINT),
        ({"eq": "acme/app"}, {"glob": "acme/*"}, Relation.INSIDE),
        ({"glob": "acme/*"}, {"glob": "acme/public-*"}, Relation.OVERLAPPING),
        ({"glob": "acme/public-*"}, {"glob": "acme/*"}, Relation.INSIDE),
        ({"glob": "acme/*"}, {"glob": "globex/*"}, Relation.DISJOINT),
        ({"in": ["acme/app", "acme/public-web"]}, {"glob": "acme/public-*"}, Relation.OVERLAPPING),
        ({"regex": "acme/[a-z]+"}, {"glob": "acme/*"}, Relation.INSIDE),
        ({"regex": "acme/.*"}, {"regex": "(?s)acme/.*"}, Relation.INSIDE),
        ({"glob": "acme/*"}, {"regex": "acme/.*"}, Relation.OVERLAPPING),  # a newline
        ({"glob": "acme/[ab]"}, {"in": ["acme/a", "acme/b"]}, Relation.INSIDE),
        ({"lte": 10}, {"lte": 100}, Relation.INSIDE),
        ({"lte": 100}, {"lte": 10}, Relation.OVERLAPPING),
        ({"gte": 11}, {"lte": 10}, Relation.DISJOINT),
        ({"lte": 10}, {"in": [5, "x"]}, Relation.OVERLAPPING),
        ({"lte": 10}, {"glob": "*"}, Relation.DISJOINT),
        ({"glob": "*"}, {"gte": 0}, Relation.DISJOINT),
        ({"eq": 1}, {"in": [1.0]}, Relation.INSIDE),
        ({"eq": True}, {"eq": 1}, Relation.DISJOINT),
        (None, {"glob": "acme/*"}, Relation.OVERLAPPING),
        (None, {"eq": "acme/app"}, Relation.OVERLAPPING),
        ({"regex": "\\d+"}, {"glob": "*"}, Relation.INSIDE),  # RE2's \d is [0-9]
        ({"regex": "\\S+"}, {"regex": "\\w+"}, Relation.OVERLAPPING),
        ({"regex": "(?i)acme/app"}, {"glob": "acme/*"}, Relation.UNDECIDABLE),
        ({"regex": "[[:alpha:]]+"}, {"glob": "*"}, Relation.UNDECIDABLE),
    ],
)
def test_named_cases(step, rule, expected):
    assert check(step, rule) is expected


def test_a_search_over_its_budget_is_undecidable_not_a_guess():
    # Patterns an agent may write to make issuance work hard: never a wrong answer.
    hard = [
        ({"glob": "?" * 1000}, {"glob": "*a*"}),
        ({"glob": "[a-z]" * 200}, {"glob": "*[b-y]*[!q]" * 10}),
        ({"regex": "(a|b|c){1,300}x"}, {"glob": "*a*"}),
    ]
    for step, rule in hard:
        assert constraint_relation(step, rule) in (Relation.UNDECIDABLE, Relation.OVERLAPPING)


def test_a_spent_shared_budget_answers_undecidable_and_is_not_remembered():
    step, rule = {"glob": "acme/*x"}, {"glob": "acme/public-*"}

    with relation_budget(units=1):
        assert constraint_relation(step, rule) is Relation.UNDECIDABLE
        # Finite sets and numbers need no search: still decided.
        assert constraint_relation({"eq": "acme/app"}, rule) is Relation.DISJOINT

    assert constraint_relation(step, rule) is Relation.OVERLAPPING
