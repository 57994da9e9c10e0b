"""Constraint validation and matching: the operators of DESIGN.md's constraint table."""

from __future__ import annotations

import copy
import fnmatch
from typing import Any

import pytest
import re2
from hypothesis import given
from hypothesis import strategies as st

from guard.constraints import (
    MAX_IN_MEMBERS,
    MAX_PATTERN_LENGTH,
    compile_args,
    compile_constraint,
    json_equal,
    validate_args,
    validate_constraint,
)
from guard.errors import FieldError
from guard.patterns import GlobSyntaxError, glob_to_re2

from .strategies import (
    constraints,
    document_characters,
    finite_floats,
    json_values,
    numbers,
    safe_integers,
    simple_regexes,
    wild_text,
    wild_values,
)


def matches(constraint: dict[str, Any], value: object) -> bool:
    assert validate_constraint(constraint, "c") == []
    return compile_constraint(constraint)(value)


def paths(errors: list[FieldError]) -> list[str]:
    return [error.path for error in errors]


# --- eq ------------------------------------------------------------------------------------


@given(json_values)
def test_eq_is_reflexive_for_any_json_value(value: object) -> None:
    assert matches({"eq": value}, value)
    assert matches({"eq": value}, copy.deepcopy(value))


@given(safe_integers)
def test_eq_compares_numbers_numerically(number: int) -> None:
    as_float = float(number)
    if as_float == number:  # exactly representable
        assert matches({"eq": number}, as_float)
        assert matches({"eq": as_float}, number)


def test_eq_one_equals_one_point_zero() -> None:
    assert matches({"eq": 1}, 1.0)
    assert matches({"eq": 1.0}, 1)
    assert matches({"eq": [1, {"a": 2}]}, [1.0, {"a": 2.0}])


@given(st.booleans(), st.integers(min_value=-2, max_value=2))
def test_eq_never_confuses_booleans_and_numbers(flag: bool, number: int) -> None:
    assert not matches({"eq": flag}, number)
    assert not matches({"eq": flag}, float(number))
    assert not matches({"eq": number}, flag)
    assert not matches({"eq": [number]}, [flag])
    assert not matches({"eq": {"k": flag}}, {"k": number})


def test_eq_true_is_not_one_and_false_is_not_zero() -> None:
    assert not matches({"eq": True}, 1)
    assert not matches({"eq": 1}, True)
    assert not matches({"eq": False}, 0)
    assert not matches({"eq": 0}, False)
    assert not matches({"eq": None}, False)
    assert matches({"eq": True}, True)
    assert matches({"eq": None}, None)


def test_eq_compares_arrays_and_objects_deeply() -> None:
    assert matches({"eq": {"a": [1, "x"]}}, {"a": [1, "x"]})
    assert not matches({"eq": {"a": [1, "x"]}}, {"a": [1, "x"], "b": 1})
    assert not matches({"eq": {"a": [1, "x"]}}, {"a": ["x", 1]})
    assert not matches({"eq": [1, 2]}, [1, 2, 3])
    assert not matches({"eq": []}, {})
    assert not matches({"eq": "1"}, 1)


@given(json_values, json_values)
def test_json_equal_agrees_with_eq_constraint(left: object, right: object) -> None:
    assert compile_constraint({"eq": left})(right) is json_equal(left, right)


# --- in ------------------------------------------------------------------------------------


@given(st.lists(json_values, min_size=1, max_size=5), json_values)
def test_in_matches_exactly_the_members(members: list[object], value: object) -> None:
    expected = any(json_equal(member, value) for member in members)
    assert matches({"in": members}, value) is expected
    for member in members:
        assert matches({"in": members}, member)


def test_in_keeps_booleans_apart_from_numbers() -> None:
    assert not matches({"in": [1, 0]}, True)
    assert not matches({"in": [True]}, 1)
    assert matches({"in": [1, "a"]}, 1.0)
    assert matches({"in": [[1], {"a": None}]}, {"a": None})
    assert not matches({"in": ["a"]}, None)


# --- glob ----------------------------------------------------------------------------------


@given(st.text())
def test_glob_star_matches_any_string(text: str) -> None:
    assert matches({"glob": "*"}, text)


@given(wild_values.filter(lambda value: not isinstance(value, str)))
def test_glob_never_matches_a_non_string(value: object) -> None:
    assert not matches({"glob": "*"}, value)
    assert not matches({"glob": "a*b"}, value)


@given(st.text(document_characters).filter(lambda text: not set(text) & set("*?[")), st.text())
def test_glob_without_metacharacters_matches_exactly_itself(literal: str, other: str) -> None:
    assert matches({"glob": literal}, literal)
    assert matches({"glob": literal}, other) is (other == literal)


@given(st.text(alphabet="ab/-![]*?", max_size=8), st.text(alphabet="ab/-![]", max_size=8))
def test_glob_agrees_with_fnmatchcase_where_both_accept_the_pattern(
    pattern: str, text: str
) -> None:
    try:
        glob_to_re2(pattern)
    except GlobSyntaxError:
        return  # fnmatch reads an unterminated `[` as a literal; we refuse it
    assert matches({"glob": pattern}, text) is fnmatch.fnmatchcase(text, pattern)


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("acme/*", "acme/public-app", True),
        ("acme/*", "acme/a/b", True),  # `*` crosses `/`
        ("acme/*", "ACME/app", False),  # case-sensitive
        ("acme/*", "xacme/app", False),  # whole-string match
        ("*-app", "acme/public-app", True),
        ("*public*", "acme/public-app", True),
        ("a*b*c", "axxbyyc", True),
        ("a*b*c", "axxbyy", False),
        ("a?c", "abc", True),
        ("a?c", "ac", False),
        ("a?c", "abbc", False),
        ("a?c", "aéc", True),  # one character, not one byte
        ("a?c", "a\nc", True),
        ("*", "line\nbreak", True),
        ("[abc]x", "bx", True),
        ("[abc]x", "dx", False),
        ("[a-c]x", "cx", True),
        ("[!a-c]x", "cx", False),
        ("[!a-c]x", "dx", True),
        ("[]]", "]", True),
        ("[!]]", "a", True),
        ("[!]]", "]", False),
        ("[*]", "*", True),
        ("[*]", "a", False),
        ("a.b", "axb", False),  # `.` is literal
        ("a+", "aa", False),  # `+` is literal
        ("\\d", "\\d", True),  # no escape character: backslash is literal
        ("", "", True),
        ("", "a", False),
    ],
)
def test_glob_examples(pattern: str, value: str, expected: bool) -> None:
    assert matches({"glob": pattern}, value) is expected


@pytest.mark.parametrize("pattern", ["[", "a[bc", "[!", "[]", "[!]", "x[z-a]"])
def test_glob_with_bad_class_is_rejected(pattern: str) -> None:
    errors = validate_constraint({"glob": pattern}, "steps[0].args.repo")
    assert paths(errors) == ["steps[0].args.repo.glob"]
    assert "glob" in errors[0].detail


# --- regex ---------------------------------------------------------------------------------


@given(st.text(max_size=20))
def test_regex_is_a_whole_string_match(text: str) -> None:
    pattern = re2.escape(text)
    assert matches({"regex": pattern}, text)
    assert not matches({"regex": pattern}, text + "x")
    assert not matches({"regex": pattern}, "x" + text)


def test_regex_partial_match_is_not_enough() -> None:
    assert not matches({"regex": "b"}, "abc")
    assert matches({"regex": ".*b.*"}, "abc")
    assert matches({"regex": "acme/[a-z-]+"}, "acme/public-app")
    assert not matches({"regex": "acme/[a-z-]+"}, "acme/public-app/x")
    assert not matches({"regex": "^acme$"}, "acme\n")


def test_catastrophic_backtracking_regex_answers_on_a_long_string() -> None:
    # Exponential in a backtracking engine; linear in RE2.
    assert not matches({"regex": "(a+)+$"}, "a" * 50_000 + "!")
    assert matches({"regex": "(a+)+$"}, "a" * 50_000)
    assert not matches({"regex": "(x+x+)+y"}, "x" * 50_000)


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "(?P<x>a)(?P=x)", "a(?=b)", r"\1", "*a"])
def test_invalid_or_non_re2_regex_is_rejected_with_its_path(pattern: str) -> None:
    errors = validate_constraint({"regex": pattern}, "steps[0].args.repo")
    assert paths(errors) == ["steps[0].args.repo.regex"]
    assert "RE2" in errors[0].detail


def test_regex_against_a_string_with_lone_surrogates_does_not_match() -> None:
    assert not matches({"regex": ".*"}, "\ud800")
    assert not matches({"glob": "a*b"}, "a\ud800b")


# --- lte / gte -----------------------------------------------------------------------------


@given(numbers, numbers)
def test_lte_and_gte_agree_with_python_comparisons(bound: float, value: float) -> None:
    assert matches({"lte": bound}, value) is (value <= bound)
    assert matches({"gte": bound}, value) is (value >= bound)


@given(numbers)
def test_lte_and_gte_never_match_booleans_or_strings(bound: float) -> None:
    for value in (True, False, "1", None, [1]):
        assert not matches({"lte": bound}, value)
        assert not matches({"gte": bound}, value)


def test_lte_and_gte_with_nan_argument_do_not_match() -> None:
    assert not matches({"lte": 5}, float("nan"))
    assert not matches({"gte": 5}, float("nan"))


# --- validation ----------------------------------------------------------------------------


def test_misspelt_operator_is_rejected_with_its_path() -> None:
    errors = validate_constraint({"regx": "acme/.*"}, "steps[0].args.repo")
    assert paths(errors) == ["steps[0].args.repo.regx"]
    assert "regex" in errors[0].detail  # suggests the likely operator


def test_two_operators_are_rejected() -> None:
    errors = validate_constraint({"eq": "a", "glob": "a*"}, "x")
    assert paths(errors) == ["x"]
    assert "exactly one operator" in errors[0].detail


def test_empty_constraint_is_rejected() -> None:
    assert paths(validate_constraint({}, "x")) == ["x"]


@pytest.mark.parametrize("value", ["eq", 1, None, ["eq", 1], True])
def test_constraint_must_be_an_object(value: object) -> None:
    assert paths(validate_constraint(value, "x")) == ["x"]


@pytest.mark.parametrize(
    ("constraint", "path"),
    [
        ({"in": "abc"}, "x.in"),
        ({"in": []}, "x.in"),
        ({"in": list(range(MAX_IN_MEMBERS + 1))}, "x.in"),
        ({"in": [1, 2**53]}, "x.in[1]"),
        ({"glob": 1}, "x.glob"),
        ({"glob": "a" * (MAX_PATTERN_LENGTH + 1)}, "x.glob"),
        ({"regex": ["a"]}, "x.regex"),
        ({"regex": "a" * (MAX_PATTERN_LENGTH + 1)}, "x.regex"),
        ({"lte": "5"}, "x.lte"),
        ({"lte": True}, "x.lte"),
        ({"gte": None}, "x.gte"),
        ({"gte": float("inf")}, "x.gte"),
        ({"lte": float("nan")}, "x.lte"),
        ({"eq": 2**53}, "x.eq"),
        ({"eq": -(2**53)}, "x.eq"),
        ({"eq": {"a": [float("nan")]}}, "x.eq.a[0]"),
        ({"eq": "\ud800"}, "x.eq"),
        ({"eq": {"\udc00": 1}}, 'x.eq["\\udc00"]'),
        ({"glob": "a\ud800"}, "x.glob"),
    ],
)
def test_operand_of_the_wrong_type_or_size_is_rejected(
    constraint: dict[str, Any], path: str
) -> None:
    assert paths(validate_constraint(constraint, "x")) == [path]


def test_bounds_themselves_are_accepted() -> None:
    assert validate_constraint({"in": list(range(MAX_IN_MEMBERS))}, "x") == []
    assert validate_constraint({"glob": "a" * MAX_PATTERN_LENGTH}, "x") == []
    assert validate_constraint({"eq": 2**53 - 1}, "x") == []
    assert validate_constraint({"lte": -(2**53 - 1)}, "x") == []


def test_deeply_nested_eq_value_is_rejected_not_crashing() -> None:
    value: object = "leaf"
    for _ in range(100):
        value = [value]
    errors = validate_constraint({"eq": value}, "x")
    assert len(errors) == 1
    assert errors[0].path.startswith("x.eq[0]")


def test_args_names_must_be_non_empty_strings() -> None:
    errors = validate_args({"": {"eq": 1}, "ok": {"eq": 1}}, "steps[0].args")
    assert paths(errors) == ['steps[0].args[""]']


def test_args_must_be_an_object() -> None:
    assert paths(validate_args([{"eq": 1}], "steps[0].args")) == ["steps[0].args"]


def test_args_with_unusual_names_get_bracketed_paths() -> None:
    errors = validate_args({"a.b": {"regx": 1}}, "steps[0].args")
    assert paths(errors) == ['steps[0].args["a.b"].regx']


@given(wild_values)
def test_validate_constraint_never_raises(value: object) -> None:
    for error in validate_constraint(value, "c"):
        assert error.path.startswith("c")
        assert error.detail


@given(constraints())
def test_generated_constraints_are_valid(constraint: dict[str, Any]) -> None:
    assert validate_constraint(constraint, "c") == []


# --- args matching -------------------------------------------------------------------------


def test_every_pinned_argument_must_be_present_and_satisfied() -> None:
    match = compile_args({"repo": {"eq": "acme/app"}, "limit": {"lte": 10}})
    assert match({"repo": "acme/app", "limit": 5})
    assert match({"repo": "acme/app", "limit": 10, "extra": "free"})
    assert not match({"repo": "acme/app"})  # pinned `limit` missing
    assert not match({"repo": "acme/app", "limit": 11})
    assert not match({"limit": 5})
    assert not match({})


def test_pinned_argument_with_null_value_is_present() -> None:
    match = compile_args({"cursor": {"eq": None}})
    assert match({"cursor": None})
    assert not match({})


def test_no_pinned_arguments_matches_any_call() -> None:
    match = compile_args({})
    assert match({})
    assert match({"anything": [1, 2]})


@pytest.mark.parametrize("call_args", [None, [], ["repo"], "repo", 1, True])
def test_call_arguments_that_are_not_an_object_do_not_match_pins(call_args: object) -> None:
    assert not compile_args({"repo": {"glob": "*"}})(call_args)
    assert not compile_args({"repo": {"glob": "*"}, "n": {"gte": 0}})(call_args)


@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), constraints(), max_size=3), wild_values)
def test_matching_never_raises_on_arbitrary_call_arguments(
    args: dict[str, Any], call_args: object
) -> None:
    match = compile_args(args)
    assert match(call_args) in (True, False)
    if isinstance(call_args, dict):
        assert match({"a": call_args, "b": call_args, "c": call_args}) in (True, False)


@given(constraints(), wild_values)
def test_constraint_matching_never_raises(constraint: dict[str, Any], value: object) -> None:
    assert compile_constraint(constraint)(value) in (True, False)


@given(finite_floats)
def test_float_arguments_against_integer_bounds(value: float) -> None:
    assert matches({"lte": 0}, value) is (value <= 0)


def test_public_re2_api_fallback_gives_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # The native RE2 call is an optimisation; without it the public wrapper must agree.
    from guard import patterns

    monkeypatch.setattr(patterns, "_ANCHOR_BOTH", None)
    for pattern, value, expected in [
        ("acme/[a-z]+", "acme/app", True),
        ("acme/[a-z]+", "acme/app/x", False),
        ("(a+)+$", "a" * 10_000 + "!", False),
        (".*", "\ud800", False),
        (".*", ["a"], False),
    ]:
        assert compile_constraint({"regex": pattern})(value) is expected
    assert compile_constraint({"glob": "a*b*c"})("aXbYc")


one_argument_constraints = st.one_of(
    st.builds(lambda text: {"eq": text}, wild_text)
    | st.sampled_from([{"eq": "acme/app"}, {"eq": ""}, {"eq": "é"}]),
    st.builds(lambda limit: {"lte": limit}, numbers),
    st.builds(lambda limit: {"gte": limit}, numbers),
    st.builds(lambda pattern: {"regex": pattern}, simple_regexes),
)


@given(
    one_argument_constraints,
    st.one_of(
        st.dictionaries(st.sampled_from(["x", "y"]), wild_values, max_size=2),
        st.dictionaries(
            st.just("x"), st.sampled_from(["acme/app", "acme/\ud800", "é", 1, 1.0, True, None])
        ),
        wild_values,
    ),
)
def test_an_args_object_pinning_one_argument_matches_as_its_constraint_does(
    constraint: dict[str, Any], call_args: Any
) -> None:
    """`compile_args` writes out the comparison for one pinned argument (eq to a string,
    lte, gte, regex); the answer is the constraint's own matcher's on the argument."""
    if validate_constraint(constraint, "c"):
        return  # a text that is no valid document string (a lone surrogate)
    expected = (
        isinstance(call_args, dict)
        and "x" in call_args
        and compile_constraint(constraint)(call_args["x"])
    )

    assert compile_args({"x": constraint})(call_args) is expected
