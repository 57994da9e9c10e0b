"""Deny rules: the constraints of guard.constraints read the other way round, failing closed.

An allow rule (like a plan step) admits a call only when every pinned argument satisfies its
constraint (`guard.constraints.compile_args`). A deny rule (`compile_deny_args`) is passed
over only when some pinned argument is *provably outside* its constraint. A value is
provably outside when it is of the JSON type the operator compares, that type's comparison
can be trusted, and it fails the comparison:

* ``eq X``: the value has X's JSON type (null, boolean, number, string, array, object) and
  differs from X. Numbers must be finite; strings valid Unicode (no lone surrogate); arrays
  differ in length or in one element provably different by this same rule; objects (string
  keys only) differ in their key sets or in one member's value provably different.
* ``in [...]``: the value is provably different from every member (so a list mixing types
  admits no value of either type as outside it).
* ``glob`` / ``regex``: the value is valid Unicode text and does not match.
* ``lte L`` / ``gte L``: the value is a finite number (not a boolean) above L / below L.
* ``type T``: the value has another JSON type (`guard.constraints.json_type`: a finite
  number with a fraction is not an ``integer``), except a string a tool may read as a
  number against ``integer`` or ``number`` (`may_read_as_number`).
* ``maxLength N``: the value is valid Unicode text of more than N code points (code points
  never outnumber UTF-16 units or UTF-8 bytes, so this holds in every unit).
* ``subpath``, ``url``, ``cidr``, ``argv``: as their modules' ``compile_excluder`` say
  (docs/decisions/0066, section 3).

Anything else -- a missing argument, ``"5000"`` or ``[5000]`` or ``true`` for a number, NaN
or an infinity, an object for a string -- counts as a match, since the tool behind the
call may well read it as the value the rule forbids.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

from guard._document import is_number, is_valid_unicode
from guard.constraints import (
    SHAPE_MODULES,
    ArgsMatcher,
    Matcher,
    compile_constraint,
    json_type,
    shape_module,
)

__all__ = ["compile_deny_args", "compile_exclusion", "may_read_as_number", "provably_different"]

_INFINITY: Final = math.inf
_MISSING: Final = object()


def _json_type(value: Any) -> str | None:
    """The JSON type of a call argument, None for a Python value that has none."""
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


def provably_different(expected: Any, value: Any) -> bool:
    """True only when `value` has the JSON type of `expected` (a validated literal), can be
    compared reliably (a finite number, valid Unicode text, string object keys) and is not
    JSON-equal to it. Recursion is bounded by the depth of `expected`."""
    kind = _json_type(expected)
    if kind != _json_type(value):
        return False
    if kind == "number":
        different: bool = value != expected and -_INFINITY < value < _INFINITY
        return different
    if kind == "string":
        return value != expected and is_valid_unicode(value)
    if kind == "boolean":
        return value is not expected
    if kind == "array":
        if len(value) != len(expected):
            return True
        return any(
            provably_different(item, other) for item, other in zip(expected, value, strict=True)
        )
    if kind == "object":
        if not all(isinstance(key, str) for key in value):
            return False  # a tool serialising {1: x} sends {"1": x}: not comparable here
        if value.keys() != expected.keys():
            return True
        return any(provably_different(item, value[key]) for key, item in expected.items())
    return False  # null equals null, and nothing else is of its type


def _other_string(expected: str, value: Any) -> bool:
    # isascii() is O(1) in CPython: the call to is_valid_unicode is made only for non-ASCII.
    return (
        isinstance(value, str)
        and value != expected
        and (value.isascii() or is_valid_unicode(value))
    )


def _other_number(expected: float, value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and value != expected
        and -_INFINITY < value < _INFINITY
    )


def _other_boolean(expected: bool, value: Any) -> bool:
    return isinstance(value, bool) and value is not expected


def _never(value: Any) -> bool:
    return False


def _exclude_in(members: list[Any]) -> Matcher:
    kinds = {_json_type(member) for member in members}
    if len(kinds) != 1:
        # Every value differs in type from some member, so none is provably outside.
        return _never
    (kind,) = kinds
    if kind == "string":
        strings = frozenset(members)
        return lambda value: (
            isinstance(value, str)
            and value not in strings
            and (value.isascii() or is_valid_unicode(value))
        )
    if kind == "number":
        numbers = frozenset(members)  # 1 and 1.0 hash alike, as JSON equality wants
        return lambda value: (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and value not in numbers
            and -_INFINITY < value < _INFINITY
        )
    frozen = tuple(members)
    return lambda value: all(provably_different(member, value) for member in frozen)


def _exclude_pattern(matches: Matcher, value: Any) -> bool:
    return (
        isinstance(value, str)
        and not matches(value)
        and (value.isascii() or is_valid_unicode(value))
    )


def _above(limit: float, value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and limit < value < _INFINITY
    )


def _below(limit: float, value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and -_INFINITY < value < limit
    )


# What tools read as a number, generously: Python's int() and float() strip whitespace and
# take "1_000", "١٢" or "inf"; JavaScript's Number("") and Number(" ") are 0, parseInt and
# parseFloat read a leading number and ignore the rest ("12px"), Number("0x1f") is 31.
_NUMBER_START: Final = re.compile(r"[+-]?(?:\d|\.\d|inf|nan)", re.IGNORECASE)


def may_read_as_number(text: str) -> bool:
    """True for a string some tool may read as a number: blank, or (whitespace stripped)
    starting with a digit (any script's), a point and a digit, ``inf`` or ``nan``, after an
    optional sign. Deliberately wide: a deny on ``type number`` matches every such string."""
    stripped = text.strip().lstrip("\ufeff").strip()
    return not stripped or _NUMBER_START.match(stripped) is not None


def _other_type(expected: str, value: Any) -> bool:
    kind = json_type(value)
    if kind is None or kind == expected:
        return False
    if expected == "number" and kind == "integer":
        return False
    if expected in ("integer", "number") and kind == "string":
        return is_valid_unicode(value) and not may_read_as_number(value)
    return True


def _longer(limit: int, value: Any) -> bool:
    return isinstance(value, str) and len(value) > limit and is_valid_unicode(value)


def _never_raising(excluder: Matcher) -> Matcher:
    def guarded(value: Any) -> bool:
        try:
            return excluder(value) is True
        except Exception:  # a value the module did not foresee is not provably outside
            return False

    return guarded


def compile_exclusion(constraint: Mapping[str, Any]) -> Matcher:
    """Compile a validated constraint into ``value -> bool``: True only when the value is
    provably outside the constraint (see the module docstring); what a deny rule reads."""
    if len(constraint) != 1:
        raise ValueError("a constraint has exactly one operator")
    ((operator, operand),) = constraint.items()
    if operator == "eq":
        if isinstance(operand, bool):
            return partial(_other_boolean, operand)
        if isinstance(operand, int | float):
            return partial(_other_number, operand)
        if isinstance(operand, str):
            return partial(_other_string, operand)
        if operand is None:
            return _never
        return partial(provably_different, operand)
    if operator == "in":
        return _exclude_in(operand)
    if operator in ("glob", "regex"):
        return partial(_exclude_pattern, compile_constraint(constraint))
    if operator in ("lte", "gte") and is_number(operand):
        return partial(_above if operator == "lte" else _below, operand)
    if operator == "type" and isinstance(operand, str):
        return partial(_other_type, operand)
    if operator == "maxLength" and isinstance(operand, int) and not isinstance(operand, bool):
        return partial(_longer, operand)
    if operator in SHAPE_MODULES:
        try:
            module = shape_module(operator)
        except LookupError as error:
            raise ValueError(str(error)) from error
        return _never_raising(module.compile_excluder(operand))
    raise ValueError(f"not a valid constraint: {operator!r}")


def _forbids_every_call(call_args: Any) -> bool:
    return True


def compile_deny_args(args: Mapping[str, Any]) -> ArgsMatcher:
    """Compile a validated deny rule's ``args`` into ``call_args -> bool``, failing closed.

    False only when some pinned argument is present and provably outside its constraint;
    True otherwise: a pinned argument missing from the call, of another type than its
    operator compares, or not a finite number counts as a match. Arguments that are not an
    object, and a Mapping that raises, match too. Never raises.
    """
    checks = tuple((name, compile_exclusion(constraint)) for name, constraint in args.items())
    if not checks:
        return _forbids_every_call
    if len(checks) == 1:
        ((name, excludes),) = checks

        def deny_one(call_args: Any) -> bool:
            try:
                if type(call_args) is not dict and not isinstance(call_args, Mapping):
                    return True
                value = call_args.get(name, _MISSING)
                return value is _MISSING or not excludes(value)
            except Exception:  # a hostile Mapping must not open the guard
                return True

        return deny_one

    def deny_all(call_args: Any) -> bool:
        try:
            if type(call_args) is not dict and not isinstance(call_args, Mapping):
                return True
            for name, excludes in checks:
                value = call_args.get(name, _MISSING)
                if value is not _MISSING and excludes(value):
                    return False
            return True
        except Exception:  # a hostile Mapping must not open the guard
            return True

    return deny_all
