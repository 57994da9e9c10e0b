"""The version-2 operators ``type`` and ``maxLength`` (docs/decisions/0066, section 2): their
validation, their matchers and their fail-closed deny readings, held to plainly written
oracles; and the operator set a document is validated against (version 1's unchanged)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.constraints import (
    JSON_TYPES,
    OPERATORS,
    OPERATORS_V2,
    SHAPE_MODULES,
    compile_args,
    compile_constraint,
    validate_args,
    validate_constraint,
)
from guard.deny import compile_deny_args, compile_exclusion

# --- oracles ----------------------------------------------------------------------------


def oracle_type(value: Any) -> str | None:
    """The JSON Schema type of a value, written out; None for no JSON value."""
    if type(value) is str:
        return "string"
    if type(value) is bool:
        return "boolean"
    if type(value) is int:
        return "integer"
    if type(value) is float:
        if math.isnan(value) or math.isinf(value):
            return None
        return "integer" if value == math.floor(value) else "number"
    if value is None:
        return "null"
    if type(value) in (list, tuple):
        return "array"
    if type(value) is dict:
        return "object"
    return None


def oracle_satisfies_type(expected: str, value: Any) -> bool:
    kind = oracle_type(value)
    return kind == expected or (expected == "number" and kind == "integer")


def valid_text(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def oracle_number_text(text: str) -> bool:
    """A string some tool reads as a number: what Python's int(), int(x, 0) and float()
    accept, JavaScript's Number("") and parseInt's leading digits."""
    stripped = text.strip()
    if not stripped:
        return True
    for read in (int, float, lambda t: int(t, 0)):
        try:
            read(stripped)
        except ValueError:
            continue
        return True
    return stripped.lstrip("+-")[:1].isdecimal()


# --- values -----------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e300, 2.0**53, -7.0])
    | st.text(max_size=6)
    | st.sampled_from(["1", " 2 ", "1.5", "-3", "0x1f", "inf", "NaN", "12px", "", "  "])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
texts = st.text(max_size=12) | st.sampled_from(["\ud800", "a\udfff", "😀", "😀😀", "é", "e\u0301"])


# --- validation -------------------------------------------------------------------------


def test_version_1_keeps_its_operators_and_its_message():
    errors = validate_constraint({"type": "string"}, "args.x")
    assert [error.path for error in errors] == ["args.x.type"]
    assert errors[0].detail == "unknown operator (expected one of eq, in, glob, regex, lte, gte)"
    assert validate_args({"x": {"maxLength": 3}}, "args") != []
    assert OPERATORS == ("eq", "in", "glob", "regex", "lte", "gte")


def test_version_2_lists_its_operators_when_one_is_unknown():
    errors = validate_constraint({"maxlength": 3}, "args.x", operators=OPERATORS_V2)
    assert len(errors) == 1
    assert errors[0].detail == (
        "unknown operator (expected one of eq, in, glob, regex, lte, gte, subpath, url, cidr,"
        " argv, type, maxLength); did you mean 'maxLength'?"
    )
    assert validate_args({"x": {"maxLength": 3}}, "args", operators=OPERATORS_V2) == []


@pytest.mark.parametrize("name", JSON_TYPES)
def test_every_json_type_name_is_an_operand(name):
    assert validate_constraint({"type": name}, "c", operators=OPERATORS_V2) == []


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        ({"type": "null"}, "must be one of string, integer, number, boolean, array, object"),
        ({"type": "String"}, "must be one of string, integer, number, boolean, array, object"),
        ({"type": ["string"]}, "must be one of string, integer, number, boolean, array, object"),
        ({"maxLength": -1}, "must be at least 0"),
        ({"maxLength": 1_000_001}, "must be at most 1000000"),
        ({"maxLength": 3.0}, "must be an integer, not number"),
        ({"maxLength": True}, "must be an integer, not boolean"),
    ],
)
def test_bad_operands_are_refused_at_their_path(constraint, message):
    errors = validate_constraint(constraint, "c", operators=OPERATORS_V2)
    ((operator, _operand),) = constraint.items()
    assert [(error.path, error.detail) for error in errors] == [(f"c.{operator}", message)]


def test_maxlength_bounds_are_admitted():
    for limit in (0, 1_000_000):
        assert validate_constraint({"maxLength": limit}, "c", operators=OPERATORS_V2) == []


# --- type -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", JSON_TYPES)
@given(value=json_values)
def test_type_matches_the_json_schema_oracle(name, value):
    assert compile_constraint({"type": name})(value) is oracle_satisfies_type(name, value)


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("integer", 1.0, True),
        ("integer", -0.0, True),
        ("integer", 2.0**60, True),
        ("integer", 1.5, False),
        ("integer", True, False),
        ("number", False, False),
        ("number", math.inf, False),
        ("number", math.nan, False),
        ("integer", math.inf, False),
        ("boolean", 1, False),
        ("boolean", True, True),
        ("string", b"x", False),
        ("array", (1, 2), True),
        ("object", {"a": 1}, True),
        ("object", [], False),
    ],
)
def test_type_named_cases(name, value, expected):
    assert compile_constraint({"type": name})(value) is expected


@pytest.mark.parametrize("name", JSON_TYPES)
@given(value=json_values)
def test_a_deny_on_type_leaves_out_only_values_of_another_type(name, value):
    excluded = compile_exclusion({"type": name})(value)
    kind = oracle_type(value)
    if excluded:
        assert kind is not None, value  # NaN, infinities, non-JSON values match the deny
        assert not oracle_satisfies_type(name, value), value
        if kind == "string" and name in ("integer", "number"):
            assert not oracle_number_text(value), value
    elif kind is not None and not oracle_satisfies_type(name, value):
        # Matched though of another type: only a string a tool may read as a number.
        assert kind == "string" and name in ("integer", "number"), value


@pytest.mark.parametrize("name", ["integer", "number"])
@given(text=st.text(max_size=8))
def test_a_deny_on_a_number_type_matches_every_string_a_tool_reads_as_one(name, text):
    if oracle_number_text(text):
        assert not compile_exclusion({"type": name})(text)


@pytest.mark.parametrize(
    "text", ["1", " 12 ", "-0x1F", "1_000", "١٢", "Infinity", "nan", "12px", ".5", "", "\t"]
)
def test_number_strings_are_never_outside_a_deny_on_integer(text):
    assert not compile_exclusion({"type": "integer"})(text)
    assert not compile_exclusion({"type": "number"})(text)


def test_booleans_are_never_integers_either_way():
    assert compile_exclusion({"type": "integer"})(True)
    assert compile_exclusion({"type": "number"})(False)
    assert compile_exclusion({"type": "boolean"})(1)
    assert not compile_exclusion({"type": "number"})(3)
    assert not compile_exclusion({"type": "integer"})(3.0)
    assert compile_exclusion({"type": "integer"})(3.5)
    assert compile_exclusion({"type": "string"})("x") is False
    assert compile_exclusion({"type": "string"})(None)


# --- maxLength --------------------------------------------------------------------------


@given(limit=st.integers(0, 6), value=texts | json_values)
def test_maxlength_counts_code_points_of_valid_text(limit, value):
    expected = valid_text(value) and len(value) <= limit
    assert compile_constraint({"maxLength": limit})(value) is expected


@given(limit=st.integers(0, 6), value=texts | json_values)
def test_a_deny_on_maxlength_leaves_out_only_text_longer_in_every_unit(limit, value):
    excluded = compile_exclusion({"maxLength": limit})(value)
    assert excluded is (valid_text(value) and len(value) > limit)
    if excluded:
        # Code points never outnumber UTF-16 units or UTF-8 bytes: longer in each.
        assert len(value.encode("utf-16-le")) // 2 > limit
        assert len(value.encode("utf-8")) > limit


def test_code_points_not_utf16_units():
    one_emoji = "😀"  # one code point, two UTF-16 units, four UTF-8 bytes
    assert compile_constraint({"maxLength": 1})(one_emoji)
    assert not compile_exclusion({"maxLength": 1})(one_emoji)
    assert compile_exclusion({"maxLength": 1})(one_emoji * 2)
    assert not compile_constraint({"maxLength": 5})("\ud800")  # a lone surrogate
    assert not compile_exclusion({"maxLength": 0})("\ud800")  # matches the deny


# --- through args ------------------------------------------------------------------------


@given(value=json_values, limit=st.integers(0, 4))
def test_args_pinning_new_operators_agree_with_their_constraints(value, limit):
    args = {"n": {"type": "integer"}, "s": {"maxLength": limit}}
    allow = compile_args(args)
    deny = compile_deny_args(args)
    call = {"n": value, "s": value}
    both = compile_constraint(args["n"])(value) and compile_constraint(args["s"])(value)
    assert allow(call) is both
    outside = compile_exclusion(args["n"])(value) or compile_exclusion(args["s"])(value)
    assert deny(call) is not outside
    assert deny({}) is True  # a missing argument matches the deny
    assert allow({"n": 1}) is False


# --- the shape operators, dispatched to their modules ------------------------------------

SHAPES = {
    "subpath": ("/srv/repo", "/srv/repo/"),
    "url": ({"scheme": ["https"], "host": ["acme.dev"]}, {"scheme": ["ftp"], "host": ["a.dev"]}),
    "cidr": (["10.0.0.0/8"], ["10.0.0.1/8"]),
    "argv": ({"cmd": ["git"], "maxArgs": 2}, {"cmd": []}),
}


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_shape_operands_are_checked_by_their_module_at_their_path(operator):
    good, bad = SHAPES[operator]
    assert validate_constraint({operator: good}, "c", operators=OPERATORS_V2) == []
    errors = validate_constraint({operator: bad}, "c", operators=OPERATORS_V2)
    assert errors
    assert all(error.path.startswith(f"c.{operator}") for error in errors), errors
    # Version 1 does not know them.
    (unknown,) = validate_constraint({operator: good}, "c")
    assert unknown.path == f"c.{operator}"
    assert unknown.detail.startswith("unknown operator")


@pytest.mark.parametrize("operator", sorted(SHAPES))
def test_shape_constraints_match_and_exclude_as_their_module_says(operator):
    module = __import__(SHAPE_MODULES[operator], fromlist=["samples"])
    operand = SHAPES[operator][0]
    matches = compile_constraint({operator: operand})
    excludes = compile_exclusion({operator: operand})
    module_matches = module.compile_matcher(operand)
    module_excludes = module.compile_excluder(operand)
    samples = module.samples(operand)
    assert samples
    for value in [*samples, "", "x", "/etc/passwd", 5, None, ["rm", "-rf"], "https://evil.test/"]:
        assert matches(value) is bool(module_matches(value)), value
        assert excludes(value) is bool(module_excludes(value)), value
    for sample in samples:
        assert matches(sample) and not excludes(sample), sample
    args = {"x": {operator: operand}}
    assert compile_args(args)({"x": samples[0]})
    assert not compile_args(args)({"x": 5})
    assert compile_deny_args(args)({"x": samples[0]})
    assert compile_deny_args(args)({})


operand_garbage = json_values | st.fixed_dictionaries(
    {},
    optional={
        "scheme": json_values | st.lists(st.sampled_from(["https", "ftp", "HTTP", ""])),
        "host": json_values | st.lists(st.sampled_from(["acme.dev", "*.dev", "*", "1.2.3.4"])),
        "pathPrefix": json_values | st.sampled_from(["/a", "a", "/a/../b"]),
        "ports": json_values | st.lists(st.integers(-1, 70000)),
        "cmd": json_values | st.lists(st.sampled_from(["git", "", "a b", "/bin/ls"])),
        "maxArgs": json_values,
        "options": json_values | st.lists(st.sampled_from(["-l", "--x=", "x", "-"])),
    },
)


@pytest.mark.parametrize("operator", [*sorted(SHAPES), "type", "maxLength"])
@given(operand=operand_garbage, value=json_values)
def test_any_operand_is_refused_with_errors_or_compiles_to_matchers_that_never_raise(
    operator, operand, value
):
    constraint = {operator: operand}
    if validate_constraint(constraint, "c", operators=OPERATORS_V2):
        return
    assert isinstance(compile_constraint(constraint)(value), bool)
    assert isinstance(compile_exclusion(constraint)(value), bool)
