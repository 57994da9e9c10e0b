"""guard.relation's version-2 rows (docs/decisions/0066, section 3) held to brute force: for
every pair of operators with a new one on either side (and a step that does not pin the
argument), the relation agrees with the real matchers, and `deny_relation` with the deny's
own reading, over a universe of sampled values: ``inside`` never has a counterexample,
``disjoint`` never a shared value, ``overlapping`` is shown by values of both kinds.
``undecidable`` is allowed only where a regex or a shape operator (``subpath``, ``url``,
``cidr``, ``argv``) takes part."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard import relation as relation_module
from guard.constraints import (
    JSON_TYPES,
    OPERATORS_V2,
    SHAPE_MODULES,
    compile_constraint,
    validate_constraint,
)
from guard.deny import compile_exclusion, may_read_as_number
from guard.relation import Relation, constraint_relation, deny_relation

from .test_relation import CONSTRAINTS as V1_CONSTRAINTS
from .test_relation import universe as v1_universe

MISSING = object()

SUBPATHS = ["/srv", "/srv/repo", "/srv/repo/src", "/", "/etc", "/srv/repo-x"]
NETWORKS = [
    ["10.0.0.0/8"],
    ["10.1.0.0/16"],
    ["192.168.0.0/24", "10.0.0.0/8"],
    ["::1/128"],
    ["2001:db8::/32"],
    ["0.0.0.0/0"],
]
COMMANDS: list[dict[str, Any]] = [
    {"cmd": ["git"]},
    {"cmd": ["git", "ls"], "maxArgs": 1},
    {"cmd": ["ls"], "options": ["-l", "-a"]},
    {"cmd": ["git"], "maxArgs": 0},
]
URLS: list[dict[str, Any]] = [
    {"scheme": ["https"], "host": ["acme.dev"]},
    {"scheme": ["https", "http"], "host": ["*.acme.dev"], "pathPrefix": "/repos/acme"},
    {"scheme": ["https"], "host": ["acme.dev", "127.0.0.1"], "ports": [8443]},
    {"scheme": ["wss"], "host": ["*.dev"]},
]

CONSTRAINTS = {
    **V1_CONSTRAINTS,
    "type": st.sampled_from(JSON_TYPES).map(lambda name: {"type": name}),
    "maxLength": st.integers(0, 5).map(lambda limit: {"maxLength": limit}),
    "subpath": st.sampled_from(SUBPATHS).map(lambda base: {"subpath": base}),
    "cidr": st.sampled_from(NETWORKS).map(lambda networks: {"cidr": networks}),
    "argv": st.sampled_from(COMMANDS).map(lambda operand: {"argv": operand}),
    "url": st.sampled_from(URLS).map(lambda operand: {"url": operand}),
}
NEW = ("type", "maxLength", *SHAPE_MODULES)

# Values the version-1 universe lacks: one of each JSON type, longer and wider text, and
# values of each shape, honest and not.
EXTRA: list[Any] = [
    *(1.0, -3, 2**40, 0.5, -7.25, True, False, None, [], ["a"], {}, {"a": 1}),
    *("aaaaaa", "abababab", "😀", "😀😀", "é" * 3, "12", " 7 ", "1.5", "-0x1f", "inf", "12px"),
    *("/srv", "/srv/repo", "/srv/repo/src", "/srv/repo/src/a.py", "/srv/repo-x", "/srv/./repo"),
    *("/srv/repo/../x", "//srv/repo", "/srv/repo/", "/etc/passwd", "/", "srv/repo", "/SRV/Repo"),
    *("/srv/repo/%2e%2e/x", "/srv/repo\\..\\x", "/srv/repo/‥/x", "/../etc", "/etc"),
    *("https://acme.dev/", "https://acme.dev/repos/acme/x", "http://acme.dev/", "ws://a.dev/"),
    *("https://api.acme.dev/repos/acme/", "https://acme.dev:8443/", "https://evil.test/"),
    *("https://acme.dev@evil.test", "https://ACME.dev./repos/acme/a", "https://127.0.0.1/"),
    *("wss://x.dev/", "https://acme.dev/repos/acme/%2e%2e/admin", "https://127.0.0.1:8443/"),
    *("10.0.0.1", "10.1.2.3", "192.168.0.5", "::1", "::ffff:10.1.2.3", "2001:db8::1"),
    *("8.8.8.8", "010.0.0.1", "fe80::1%eth0", "64:ff9b::a00:1", "0.0.0.0", "::"),  # noqa: S104
    *("git", "git status", "ls -l", "ls -la", "ls -x", "rm -rf /", "git;rm", "/usr/bin/git"),
    *(["git", "status"], ["git"], ["ls", "-l"], ["git", "a", "b"], ["git", "--upload-pack=x"]),
    *(["ls", "-l", "-a"], ["rm"], "git a b", "ls"),
]


def universe(step: dict[str, Any] | None, rule: dict[str, Any]) -> list[Any]:
    values = [*v1_universe(step, rule), *EXTRA]
    for constraint in (step, rule):
        if constraint is None:
            continue
        ((operator, operand),) = constraint.items()
        if operator in SHAPE_MODULES:
            module = __import__(SHAPE_MODULES[operator], fromlist=["samples"])
            values.extend(module.samples(operand))
        elif operator == "maxLength":
            values.extend(("a" * operand, "b" * (operand + 1), "😀" * (operand + 1)))
    return values


def witnesses(step: dict[str, Any] | None, rule: dict[str, Any]) -> list[Any]:
    """The values the relation samples to show an overlap; each is judged here again by
    the real matchers, so an overlap claimed without a real pair still fails."""
    constraints = [rule] if step is None else [step, rule]
    values = relation_module._probes(constraints)
    if step is not None and {*step} & {"glob", "regex"} and "maxLength" in rule:
        # The shortest text the pattern admits, and one longer than the limit.
        ((operator, pattern),) = step.items()
        automaton = relation_module._pattern_automaton(operator, pattern)
        budget = relation_module._Budget(relation_module.RELATION_WORK)
        values.extend(relation_module._lengths(automaton, rule["maxLength"], budget))
    if step is not None and {*step} & {"glob", "regex"} and rule.get("type") in NUMBER_TYPES:
        # A text the pattern admits that a tool may read as a number, and one it may not.
        ((operator, pattern),) = step.items()
        automaton = relation_module._pattern_automaton(operator, pattern)
        numbers = relation_module._number_texts()
        budget = relation_module._Budget(relation_module.NUMBER_TEXT_WORK)
        values.append(relation_module._intersection_witness(automaton, numbers, budget))
        values.append(relation_module._difference_witness(automaton, numbers, budget))
    return values


NUMBER_TYPES = ("integer", "number")


def may_be_undecidable(step: dict[str, Any] | None, rule: dict[str, Any]) -> bool:
    operators = set(rule) | (set() if step is None else set(step))
    return bool(operators & {"regex", *SHAPE_MODULES})


def check(step: dict[str, Any] | None, rule: dict[str, Any]) -> Relation:
    assert validate_constraint(rule, "rule", operators=OPERATORS_V2) == []
    if step is not None:
        assert validate_constraint(step, "step", operators=OPERATORS_V2) == []
    relation = constraint_relation(step, rule)
    step_matches = compile_constraint(step) if step is not None else (lambda value: True)
    rule_matches = compile_constraint(rule)
    values = universe(step, rule)
    if relation is Relation.OVERLAPPING:
        values += witnesses(step, rule)
    admitted = [value for value in values if step_matches(value)]
    both = [value for value in admitted if rule_matches(value)]
    refused = [value for value in admitted if not rule_matches(value)]
    if relation is Relation.INSIDE:
        assert refused == [], (step, rule, relation, refused[:3])
    elif relation is Relation.DISJOINT:
        assert both == [], (step, rule, relation, both[:3])
    elif relation is Relation.OVERLAPPING:
        assert both and refused, (step, rule, relation)
    else:
        assert may_be_undecidable(step, rule), (step, rule)
    return relation


def check_deny(step: dict[str, Any] | None, rule: dict[str, Any]) -> Relation:
    relation = deny_relation(step, rule)
    excludes = compile_exclusion(rule)
    step_matches = compile_constraint(step) if step is not None else (lambda value: True)
    values = universe(step, rule)
    if relation is Relation.OVERLAPPING:
        values += witnesses(step, rule)
    admitted = [value for value in values if step_matches(value)]
    matched = [value for value in admitted if not excludes(value)]
    passed = [value for value in admitted if excludes(value)]
    if step is None:
        matched.append(MISSING)  # a call may leave the argument out: the deny matches it
    if relation is Relation.INSIDE:
        assert passed == [], (step, rule, relation, passed[:3])
    elif relation is Relation.DISJOINT:
        assert step is not None, "an argument left free is never disjoint from a deny"
        assert matched == [], (step, rule, relation, matched[:3])
    elif relation is Relation.OVERLAPPING:
        assert matched, (step, rule, relation)
        assert passed or (step is None and "regex" in rule), (step, rule, relation)
    else:
        assert may_be_undecidable(step, rule), (step, rule)
    return relation


PAIRS = [
    (step, rule)
    for step in (*OPERATORS_V2, None)
    for rule in OPERATORS_V2
    if step in NEW or rule in NEW
]


@pytest.mark.parametrize(("step_operator", "rule_operator"), PAIRS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_relation_agrees_with_the_matchers(data, step_operator, rule_operator):
    step = None if step_operator is None else data.draw(CONSTRAINTS[step_operator], "step")
    rule = data.draw(CONSTRAINTS[rule_operator], "rule")

    check(step, rule)


@pytest.mark.parametrize(("step_operator", "rule_operator"), PAIRS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_deny_relation_agrees_with_the_deny_reading(data, step_operator, rule_operator):
    step = None if step_operator is None else data.draw(CONSTRAINTS[step_operator], "step")
    rule = data.draw(CONSTRAINTS[rule_operator], "rule")

    check_deny(step, rule)


IN, DIS, OVER = Relation.INSIDE, Relation.DISJOINT, Relation.OVERLAPPING


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        # type against type
        ({"type": "integer"}, {"type": "number"}, IN),
        ({"type": "number"}, {"type": "integer"}, OVER),
        ({"type": "string"}, {"type": "string"}, IN),
        ({"type": "array"}, {"type": "object"}, DIS),
        ({"type": "boolean"}, {"type": "integer"}, DIS),
        # type against the others
        ({"type": "boolean"}, {"eq": True}, OVER),
        ({"type": "boolean"}, {"in": [True, False]}, IN),
        ({"type": "integer"}, {"in": [1.5, "1"]}, DIS),
        ({"type": "integer"}, {"in": [2.0]}, OVER),
        ({"type": "string"}, {"glob": "*"}, IN),
        ({"type": "string"}, {"glob": "a*"}, OVER),
        ({"type": "object"}, {"glob": "*"}, DIS),
        ({"type": "string"}, {"maxLength": 3}, OVER),
        ({"type": "array"}, {"maxLength": 3}, DIS),
        ({"type": "number"}, {"lte": 3}, OVER),
        ({"type": "string"}, {"gte": 3}, DIS),
        # lte / gte against type
        ({"lte": 3}, {"type": "number"}, IN),
        ({"gte": 3}, {"type": "integer"}, OVER),
        ({"lte": 3}, {"type": "string"}, DIS),
        # maxLength against maxLength, patterns and values
        ({"maxLength": 3}, {"maxLength": 3}, IN),
        ({"maxLength": 4}, {"maxLength": 3}, OVER),
        ({"maxLength": 0}, {"eq": ""}, IN),
        ({"maxLength": 2}, {"in": ["abc", 3]}, DIS),
        ({"maxLength": 2}, {"in": ["ab", 3]}, OVER),
        ({"maxLength": 3}, {"type": "string"}, IN),
        ({"maxLength": 3}, {"glob": "*"}, IN),
        ({"maxLength": 3}, {"glob": "????*"}, DIS),
        ({"maxLength": 3}, {"glob": "a*"}, OVER),
        ({"maxLength": 2}, {"regex": "(?s).{0,2}"}, IN),
        ({"maxLength": 2}, {"regex": "(?s).{0,1}"}, OVER),
        ({"glob": "a?b"}, {"maxLength": 3}, IN),
        ({"glob": "a*b"}, {"maxLength": 3}, OVER),
        ({"glob": "abcd*"}, {"maxLength": 3}, DIS),
        ({"regex": "(ab){1,3}"}, {"maxLength": 6}, IN),
        ({"regex": "(ab){1,3}"}, {"maxLength": 5}, OVER),
        ({"regex": "(ab)+"}, {"maxLength": 5}, OVER),
        ({"regex": "(ab|)c?"}, {"maxLength": 0}, OVER),
        (None, {"type": "string"}, OVER),
        (None, {"maxLength": 0}, OVER),
    ],
)
def test_named_rows(step, rule, expected):
    assert check(step, rule) is expected


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        ({"type": "integer"}, {"type": "number"}, IN),
        ({"type": "number"}, {"type": "integer"}, OVER),  # 0.5 is left out
        ({"type": "string"}, {"type": "integer"}, OVER),  # "1" is matched, "a" left out
        ({"type": "string"}, {"type": "boolean"}, DIS),
        ({"lte": 3}, {"type": "integer"}, OVER),
        ({"gte": 3}, {"type": "array"}, DIS),
        ({"eq": "12"}, {"type": "integer"}, IN),  # a tool may read it as a number
        ({"eq": "twelve"}, {"type": "integer"}, DIS),
        ({"glob": "a*"}, {"type": "string"}, IN),
        ({"type": "integer"}, {"maxLength": 3}, IN),  # not text: never outside it
        ({"type": "string"}, {"maxLength": 3}, OVER),
        ({"maxLength": 5}, {"maxLength": 3}, OVER),
        ({"maxLength": 2}, {"type": "integer"}, OVER),
        # Texts a tool may read as numbers: "", " 7", "-1x", ".5", "Inf", "NaN" ...
        ({"glob": "*"}, {"type": "number"}, OVER),
        ({"glob": "1*"}, {"type": "integer"}, IN),
        ({"glob": "[ ]*[+-][0-9]*"}, {"type": "integer"}, OVER),  # " -" is not
        ({"regex": "\\s*-?(\\d|[iI][nN][fF])\\w*"}, {"type": "number"}, IN),
        ({"glob": "a*"}, {"type": "integer"}, DIS),
        ({"glob": "?*"}, {"type": "integer"}, OVER),
        ({"regex": "[a-hj-mo-z]\\w*"}, {"type": "number"}, DIS),
        ({"maxLength": 1}, {"type": "integer"}, OVER),
        (None, {"type": "string"}, OVER),
        (None, {"maxLength": 4}, OVER),
    ],
)
def test_named_deny_rows(step, rule, expected):
    assert check_deny(step, rule) is expected


# --- the shape operators against each other and the rest ---------------------------------


SHAPES = [
    {"subpath": "/srv/repo"},
    {"url": URLS[1]},
    {"cidr": ["10.0.0.0/8"]},
    {"argv": {"cmd": ["git"]}},
]


@pytest.mark.parametrize(("step", "rule"), list(itertools.permutations(SHAPES[:3], 2)))
def test_paths_urls_and_addresses_never_meet(step, rule):
    assert check(step, rule) is Relation.DISJOINT
    # Neither passes the other's checks, so a deny of one leaves none of the other out.
    assert check_deny(step, rule) is Relation.INSIDE


@pytest.mark.parametrize("shape", SHAPES)
def test_a_shape_against_numbers_is_disjoint_and_never_outside_a_deny_on_them(shape):
    for bound in ({"lte": 5}, {"gte": 5}):
        assert check(shape, bound) is Relation.DISJOINT
        assert check(bound, shape) is Relation.DISJOINT
        assert check_deny(bound, shape) is Relation.INSIDE


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        ({"subpath": "/srv/repo"}, {"type": "string"}, IN),
        ({"url": URLS[0]}, {"type": "object"}, DIS),
        ({"argv": {"cmd": ["git"]}}, {"type": "array"}, OVER),
        ({"argv": {"cmd": ["git"]}}, {"type": "boolean"}, DIS),
        ({"subpath": "/srv/repo"}, {"eq": "/srv/repo"}, OVER),
        ({"subpath": "/srv/repo"}, {"in": ["/etc", 3]}, DIS),
        ({"cidr": ["10.0.0.0/8"]}, {"eq": "10.1.2.3"}, OVER),
        ({"type": "string"}, {"subpath": "/srv/repo"}, OVER),
        ({"type": "integer"}, {"url": URLS[0]}, DIS),
        ({"glob": "/srv/repo/*"}, {"subpath": "/srv/repo"}, OVER),
        ({"subpath": "/srv/repo"}, {"glob": "/srv/*"}, OVER),  # "//srv/repo" is admitted
        ({"regex": "[^\\s\\S]"}, {"subpath": "/srv"}, DIS),  # the regex admits no text
        ({"subpath": "/srv"}, {"regex": "[^\\s\\S]"}, DIS),
        ({"regex": "10\\..*"}, {"cidr": ["10.0.0.0/8"]}, OVER),
        ({"maxLength": 40}, {"subpath": "/srv/repo"}, OVER),
        ({"subpath": "/srv/repo"}, {"maxLength": 40}, OVER),
        ({"argv": {"cmd": ["git"]}}, {"glob": "git*"}, OVER),
        (None, {"subpath": "/srv/repo"}, OVER),
        (None, {"argv": {"cmd": ["git"]}}, OVER),
        ({"subpath": "/srv/repo/src"}, {"subpath": "/srv/repo"}, IN),
        ({"subpath": "/srv/repo"}, {"subpath": "/srv/repo/src"}, OVER),
        ({"subpath": "/srv/repo"}, {"subpath": "/etc"}, DIS),
        ({"cidr": ["10.1.0.0/16"]}, {"cidr": ["10.0.0.0/8"]}, IN),
        ({"cidr": ["10.0.0.0/8"]}, {"cidr": ["192.168.0.0/24"]}, DIS),
        ({"argv": {"cmd": ["git"]}}, {"argv": {"cmd": ["git", "ls"]}}, IN),
        ({"argv": {"cmd": ["git"]}}, {"argv": {"cmd": ["ls"]}}, DIS),
        ({"url": URLS[0]}, {"url": URLS[0]}, IN),
    ],
)
def test_named_shape_rows(step, rule, expected):
    assert check(step, rule) is expected


@pytest.mark.parametrize(
    ("step", "rule"),
    [
        ({"glob": "x*"}, {"subpath": "/srv/repo"}),
        ({"subpath": "/srv/repo"}, {"maxLength": 4}),
    ],
)
def test_what_sampling_cannot_show_is_undecidable_not_guessed(step, rule):
    assert check(step, rule) is Relation.UNDECIDABLE


def test_a_type_boolean_step_is_the_finite_set_of_both_booleans():
    assert check({"type": "boolean"}, {"eq": False}) is Relation.OVERLAPPING
    assert check_deny({"type": "boolean"}, {"in": [True, False]}) is Relation.INSIDE
    assert check_deny({"type": "boolean"}, {"eq": True}) is Relation.OVERLAPPING


# --- lengths: patterns against maxLength, longer than the shared universe reaches ----------

AB_STRINGS = [
    "".join(chars) for size in range(11) for chars in itertools.product("ab", repeat=size)
]
ab_globs = st.lists(st.sampled_from(["a", "b", "*", "?", "[ab]", "[!a]"]), max_size=6).map("".join)
ab_regexes = st.lists(
    st.sampled_from(["a", "b", "(ab)*", "(a|bb)", "[ab]{1,3}", "a?", "(ba){2}", "b+"]),
    max_size=4,
).map("".join)
ab_patterns = ab_globs.map(lambda p: {"glob": p}) | ab_regexes.map(lambda p: {"regex": p})


@settings(max_examples=200, deadline=None)
@given(pattern=ab_patterns, limit=st.integers(0, 9))
def test_patterns_against_maxlength_agree_with_every_short_text(pattern, limit):
    length_rule = {"maxLength": limit}
    pattern_matches = compile_constraint(pattern)
    short = compile_constraint(length_rule)
    for step, rule in ((pattern, length_rule), (length_rule, pattern)):
        relation = constraint_relation(step, rule)
        step_matches = pattern_matches if step is pattern else short
        rule_matches = short if step is pattern else pattern_matches
        admitted = [text for text in AB_STRINGS if step_matches(text)]
        if relation is Relation.INSIDE:
            assert all(rule_matches(text) for text in admitted), (step, rule)
        elif relation is Relation.DISJOINT:
            assert not any(rule_matches(text) for text in admitted), (step, rule)
        else:
            assert relation is Relation.OVERLAPPING, (step, rule, relation)
    # The step's texts: a longest one at most `limit` long exactly when inside.
    lengths = {len(text) for text in AB_STRINGS if pattern_matches(text)}
    relation = constraint_relation(pattern, length_rule)
    # Every repetition here adds one or two characters: a language with no text of 9 or 10
    # characters is finite, and every text of it is sampled.
    if lengths and max(lengths) < 9:
        expected = Relation.INSIDE if max(lengths) <= limit else Relation.OVERLAPPING
        if min(lengths) > limit:
            expected = Relation.DISJOINT
        assert relation is expected, (pattern, limit, sorted(lengths))


NUMBER_ALPHABET = " \t\n\u00a0\u2003\u3000\ufeff+-.0179\u0663\uff11iInNfFaAx\u0130\u0131\u212a"


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=NUMBER_ALPHABET, max_size=6) | st.text(max_size=4))
def test_the_number_texts_automaton_reads_as_the_deny_does(text):
    # Inside and disjoint against a deny on a number type rest on this automaton.
    automaton = relation_module._number_texts()
    budget = relation_module._Budget(10**9)
    assert automaton.accepts(text, budget) is may_read_as_number(text), text
