"""Argument constraints: validation and compilation into fast matchers.

A constraint is a JSON object with exactly one operator key:

======== ==================== ================================================================
key      value                a call argument satisfies it when
======== ==================== ================================================================
``eq``   any JSON value       it is equal as JSON: numbers compare numerically (1 == 1.0),
                              booleans are not numbers (true != 1), arrays and objects
                              compare deeply by the same rule
``in``   non-empty array      it equals one of the members (same equality)
``glob`` string               it is a string matching the whole pattern: ``*`` any run of
                              characters (including ``/`` and newlines), ``?`` exactly one
                              character, ``[...]`` a class (``[!...]`` negated, ``a-z`` a
                              range, a leading ``]`` is literal); case-sensitive. There is no
                              escape character: write ``[*]`` for a literal ``*``
``regex`` string, RE2 syntax  it is a string and the whole string matches (RE2: linear time,
                              no backreferences or look-around)
``lte``  number               it is a number (not a boolean) and is <= the value
``gte``  number               it is a number (not a boolean) and is >= the value
======== ==================== ================================================================

Size bounds, so a document cannot make validation or matching expensive: a glob or regex
pattern has at most 1,000 characters (`MAX_PATTERN_LENGTH`), an ``in`` array at most 1,000
members (`MAX_IN_MEMBERS`), an ``eq`` value or ``in`` member at most 10,000 elements nested
at most 32 deep, an ``args`` object at most 100 arguments (`MAX_ARGS`) whose names have 1 to
200 characters (`MAX_ARG_NAME_LENGTH`). Integers must lie within +/-(2**53 - 1) and numbers
must be finite, so every valid document can be canonically hashed.

Matching never raises: a call argument of the wrong type (a list where a string is
expected, a string with lone surrogates for a regex, ...) simply does not match.

Deny rules read the same constraints the other way round and fail closed
(`compile_deny_args`): a deny rule is passed over only when some pinned argument is
*provably outside* its constraint. A value is provably outside when it is of the JSON type
the operator compares, that type's comparison can be trusted, and it fails the comparison:

* ``eq X``: the value has X's JSON type (null, boolean, number, string, array, object) and
  differs from X. Numbers must be finite; strings valid Unicode (no lone surrogate); arrays
  differ in length or in one element provably different by this same rule; objects (string
  keys only) differ in their key sets or in one member's value provably different.
* ``in [...]``: the value is provably different from every member (so a list mixing types
  admits no value of either type as outside it).
* ``glob`` / ``regex``: the value is valid Unicode text and does not match.
* ``lte L`` / ``gte L``: the value is a finite number (not a boolean) above L / below L.

Anything else -- a missing argument, ``"5000"`` or ``[5000]`` or ``true`` for a number, NaN
or an infinity, an object for a string -- counts as a match, since the tool behind the
call may well read it as the value the rule forbids.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any, Final

import re2

from guard._document import (
    check_literal,
    check_number,
    check_string,
    index_path,
    is_number,
    is_valid_unicode,
    key_path,
    type_name,
)
from guard.errors import FieldError

__all__ = [
    "MAX_ARGS",
    "MAX_ARG_NAME_LENGTH",
    "MAX_IN_MEMBERS",
    "MAX_PATTERN_LENGTH",
    "OPERATORS",
    "ArgsMatcher",
    "EqIndex",
    "GlobSyntaxError",
    "Matcher",
    "compile_args",
    "compile_constraint",
    "compile_deny_args",
    "compile_exclusion",
    "compile_glob",
    "glob_to_re2",
    "json_equal",
    "non_finite_argument",
    "provably_different",
    "validate_args",
    "validate_constraint",
]

OPERATORS: Final = ("eq", "in", "glob", "regex", "lte", "gte")
MAX_PATTERN_LENGTH: Final = 1_000
MAX_IN_MEMBERS: Final = 1_000
MAX_ARGS: Final = 100
MAX_ARG_NAME_LENGTH: Final = 200

Matcher = Callable[[Any], bool]
ArgsMatcher = Callable[[Any], bool]

_OPERATOR_SET: Final = frozenset(OPERATORS)
_GLOB_METACHARACTERS: Final = frozenset("*?[")
_MISSING: Final = object()


class GlobSyntaxError(ValueError):
    """A glob pattern that cannot be translated (an unterminated or reversed class)."""


# --- RE2 ---------------------------------------------------------------------------------

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # errors are reported as FieldErrors, not on stderr
_RE2_OPTIONS.never_capture = True  # only "did it match" matters; capturing costs time

# The public re2 wrapper maps byte offsets back to str offsets and builds a Match object on
# every call (~6 us). Calling the underlying RE2 object with ANCHOR_BOTH and UTF-8 bytes
# gives the same answer in well under 1 us, which is what keeps a call decision within a few
# microseconds. Both are internals of google-re2, so fall back to the public API when absent.
_re2_binding = getattr(re2, "_re2", None)
_re2_anchor = getattr(getattr(_re2_binding, "RE2", None), "Anchor", None)
_ANCHOR_BOTH = getattr(_re2_anchor, "ANCHOR_BOTH", None)


def _compile_re2(pattern: str) -> Any:
    """Compile with the module's options; raises ValueError with RE2's message."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as error:
        message = error.args[0] if error.args else "invalid pattern"
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise ValueError(str(message)) from None


def _re2_full_matcher(pattern: str) -> Matcher:
    compiled = _compile_re2(pattern)
    regexp = getattr(compiled, "_regexp", None)
    native_match = getattr(regexp, "Match", None)

    if native_match is not None and _ANCHOR_BOTH is not None:
        anchor = _ANCHOR_BOTH

        def match_native(value: Any) -> bool:
            if not isinstance(value, str):
                return False
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError:
                return False
            return native_match(anchor, data, 0, len(data))[0][0] >= 0

        return match_native

    fullmatch = compiled.fullmatch

    def match_public(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            return fullmatch(value) is not None
        except UnicodeEncodeError:
            return False

    return match_public


# --- glob --------------------------------------------------------------------------------


def _re2_literal(character: str) -> str:
    if character.isascii() and character.isalnum():
        return character
    return f"\\x{{{ord(character):x}}}"


def _class_to_re2(body: str, negate: bool, start: int) -> str:
    items: list[str] = []
    position = 0
    while position < len(body):
        first = body[position]
        if position + 2 < len(body) and body[position + 1] == "-":
            last = body[position + 2]
            if ord(last) < ord(first):
                raise GlobSyntaxError(
                    f"character class at position {start} has a reversed range {first}-{last}"
                )
            items.append(f"{_re2_literal(first)}-{_re2_literal(last)}")
            position += 3
        else:
            items.append(_re2_literal(first))
            position += 1
    return "[" + ("^" if negate else "") + "".join(items) + "]"


@lru_cache(maxsize=1024)
def glob_to_re2(pattern: str) -> str:
    """Translate a glob into an RE2 pattern for a whole-string match.

    Cached: a plan or policy repeats its patterns, and validation and compilation both
    translate them (a refused pattern raises each time; errors are not cached).

    Raises GlobSyntaxError for an unterminated ``[`` or a reversed range like ``[z-a]``.
    """
    parts = ["(?s)"]  # `*` and `?` also match newlines
    position = 0
    length = len(pattern)
    while position < length:
        character = pattern[position]
        if character == "*":
            while position + 1 < length and pattern[position + 1] == "*":
                position += 1
            parts.append(".*")
        elif character == "?":
            parts.append(".")
        elif character == "[":
            cursor = position + 1
            negate = cursor < length and pattern[cursor] == "!"
            if negate:
                cursor += 1
            body_start = cursor
            if cursor < length and pattern[cursor] == "]":
                cursor += 1  # a `]` right after `[` or `[!` is a member, not the end
            while cursor < length and pattern[cursor] != "]":
                cursor += 1
            if cursor >= length:
                raise GlobSyntaxError(
                    f"unterminated character class starting at position {position}"
                )
            parts.append(_class_to_re2(pattern[body_start:cursor], negate, position))
            position = cursor
        else:
            parts.append(_re2_literal(character))
        position += 1
    return "".join(parts)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def compile_glob(pattern: str) -> Matcher:
    """Compile a glob into a matcher; common shapes avoid the regex engine altogether."""
    stars = pattern.count("*")
    literal = pattern.replace("*", "")
    if _GLOB_METACHARACTERS.isdisjoint(literal):
        if stars == 0:
            return partial(_equals_string, pattern)
        if not literal:
            return _is_str
        stripped = pattern.strip("*")
        if "*" not in stripped:
            starts, ends = pattern.startswith("*"), pattern.endswith("*")
            if starts and ends:
                return partial(_contains_string, stripped)
            if ends:
                return partial(_starts_with, stripped)
            if starts:
                return partial(_ends_with, stripped)
    return _re2_full_matcher(glob_to_re2(pattern))


def _equals_string(expected: str, value: Any) -> bool:
    return isinstance(value, str) and value == expected


def _starts_with(prefix: str, value: Any) -> bool:
    return isinstance(value, str) and value.startswith(prefix)


def _ends_with(suffix: str, value: Any) -> bool:
    return isinstance(value, str) and value.endswith(suffix)


def _contains_string(part: str, value: Any) -> bool:
    return isinstance(value, str) and part in value


# --- equality ----------------------------------------------------------------------------


def json_equal(expected: Any, actual: Any) -> bool:
    """Equality as JSON: numbers numerically, booleans only with booleans, deep for
    arrays and objects. Recursion is bounded by the depth of `expected`."""
    if expected is None:
        return actual is None
    if isinstance(expected, bool):
        return isinstance(actual, bool) and actual is expected
    if isinstance(expected, int | float):
        return _equals_number(expected, actual)
    if isinstance(expected, str):
        return isinstance(actual, str) and actual == expected
    if isinstance(expected, list):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return False
        return all(json_equal(item, other) for item, other in zip(expected, actual, strict=True))
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or len(actual) != len(expected):
            return False
        for key, item in expected.items():
            other = actual.get(key, _MISSING)
            if other is _MISSING or not json_equal(item, other):
                return False
        return True
    return False


def _scalar_key(value: Any) -> tuple[str, Any] | None:
    """A hashable key under which JSON-equal scalars collide and nothing else does.

    Python alone would make True == 1 share a set slot; tagging the type prevents it, while
    1 and 1.0 share the "number" tag and hash alike, as JSON equality wants.
    """
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    return None


def _compile_eq(expected: Any) -> Matcher:
    if expected is None:
        return partial(_is, None)
    if isinstance(expected, bool):
        return partial(_is, expected)
    if isinstance(expected, int | float):
        return partial(_equals_number, expected)
    if isinstance(expected, str):
        return partial(_equals_string, expected)
    return partial(json_equal, expected)


def _is(expected: Any, value: Any) -> bool:
    return value is expected


def _equals_number(expected: float, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == expected


def _compile_in(members: list[Any]) -> Matcher:
    scalars: set[tuple[str, Any]] = set()
    containers: list[Any] = []
    for member in members:
        key = _scalar_key(member)
        if key is None:
            containers.append(member)
        else:
            scalars.add(key)
    frozen_scalars = frozenset(scalars)
    frozen_containers = tuple(containers)

    def match_in(value: Any) -> bool:
        key = _scalar_key(value)
        if key is not None:
            return key in frozen_scalars
        return any(json_equal(member, value) for member in frozen_containers)

    return match_in


def _at_most(limit: float, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value <= limit


def _at_least(limit: float, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= limit


# --- validation --------------------------------------------------------------------------


def validate_constraint(value: object, path: str) -> list[FieldError]:
    """Every problem with one constraint object found at `path`."""
    if not isinstance(value, Mapping):
        return [
            FieldError(
                path,
                f"must be an object with exactly one operator ({', '.join(OPERATORS)}),"
                f" not {type_name(value)}",
            )
        ]
    errors: list[FieldError] = []
    for key in value:
        if key not in _OPERATOR_SET:
            detail = f"unknown operator (expected one of {', '.join(OPERATORS)})"
            if isinstance(key, str):
                close = difflib.get_close_matches(key, OPERATORS, n=1)
                if close:
                    detail += f"; did you mean {close[0]!r}?"
            errors.append(FieldError(key_path(path, key), detail))
    if len(value) != 1:
        found = "none" if not value else f"{len(value)} keys"
        errors.append(FieldError(path, f"must have exactly one operator, found {found}"))
    for operator in OPERATORS:
        if operator in value:
            _validate_operand(operator, value[operator], key_path(path, operator), errors)
    return errors


def _validate_operand(operator: str, operand: object, path: str, errors: list[FieldError]) -> None:
    if operator == "eq":
        check_literal(operand, path, errors)
    elif operator == "in":
        if not isinstance(operand, list):
            errors.append(FieldError(path, f"must be an array, not {type_name(operand)}"))
        elif not operand:
            errors.append(FieldError(path, "must not be empty"))
        elif len(operand) > MAX_IN_MEMBERS:
            errors.append(FieldError(path, f"must have at most {MAX_IN_MEMBERS} members"))
        else:
            for index, member in enumerate(operand):
                check_literal(member, index_path(path, index), errors)
    elif operator == "glob":
        if check_string(operand, path, errors, max_length=MAX_PATTERN_LENGTH):
            assert isinstance(operand, str)
            try:
                glob_to_re2(operand)
            except GlobSyntaxError as error:
                errors.append(FieldError(path, f"invalid glob: {error}"))
    elif operator == "regex":
        if check_string(operand, path, errors, max_length=MAX_PATTERN_LENGTH):
            assert isinstance(operand, str)
            try:
                _compile_re2(operand)
            except ValueError as error:
                errors.append(FieldError(path, f"invalid RE2 regular expression: {error}"))
    else:  # lte, gte
        check_number(operand, path, errors)


def validate_args(value: object, path: str) -> list[FieldError]:
    """Every problem with an ``args`` object (argument name -> constraint) at `path`."""
    if not isinstance(value, Mapping):
        return [FieldError(path, f"must be an object, not {type_name(value)}")]
    errors: list[FieldError] = []
    if len(value) > MAX_ARGS:
        errors.append(FieldError(path, f"must pin at most {MAX_ARGS} arguments"))
        return errors
    for name, constraint in value.items():
        name_path = key_path(path, name)
        if not isinstance(name, str) or not name:
            errors.append(FieldError(name_path, "argument names must be non-empty strings"))
        elif len(name) > MAX_ARG_NAME_LENGTH:
            errors.append(
                FieldError(name_path, f"argument name is longer than {MAX_ARG_NAME_LENGTH}")
            )
        else:
            check_string(name, name_path, errors, max_length=MAX_ARG_NAME_LENGTH)
        errors.extend(validate_constraint(constraint, name_path))
    return errors


# --- compilation -------------------------------------------------------------------------


def compile_constraint(constraint: Mapping[str, Any]) -> Matcher:
    """Compile a constraint that passed `validate_constraint` into ``value -> bool``."""
    if len(constraint) != 1:
        raise ValueError("a constraint has exactly one operator")
    ((operator, operand),) = constraint.items()
    if operator == "eq":
        return _compile_eq(operand)
    if operator == "in":
        return _compile_in(operand)
    if operator == "glob":
        return compile_glob(operand)
    if operator == "regex":
        return _re2_full_matcher(operand)
    if operator in ("lte", "gte") and is_number(operand):
        return partial(_at_most if operator == "lte" else _at_least, operand)
    raise ValueError(f"not a valid constraint: {operator!r}")


def _match_anything(call_args: Any) -> bool:
    return True


def compile_args(args: Mapping[str, Any]) -> ArgsMatcher:
    """Compile a validated ``args`` object into ``call_args -> bool``.

    True when every pinned argument is present in the call's arguments and satisfies its
    constraint; arguments that are not pinned are free. A pinned argument missing from the
    call does not match. Never raises: call arguments that are not an object match only an
    empty ``args``.
    """
    checks = tuple((name, compile_constraint(constraint)) for name, constraint in args.items())
    if not checks:
        return _match_anything
    if len(checks) == 1:
        # One pinned argument is the common case; skipping the loop saves a good fraction.
        ((name, check),) = checks

        def match_one(call_args: Any) -> bool:
            try:
                # The exact-type test first: an ABC isinstance costs more than the match.
                if type(call_args) is not dict and not isinstance(call_args, Mapping):
                    return False
                value = call_args.get(name, _MISSING)
                return value is not _MISSING and check(value)
            except Exception:  # a hostile Mapping must not break the guard
                return False

        return match_one

    def match_all(call_args: Any) -> bool:
        try:
            if type(call_args) is not dict and not isinstance(call_args, Mapping):
                return False
            for name, check in checks:
                value = call_args.get(name, _MISSING)
                if value is _MISSING or not check(value):
                    return False
            return True
        except Exception:  # a hostile Mapping must not break the guard
            return False

    return match_all


# --- deny rules: failing closed -------------------------------------------------------------

_INFINITY: Final = math.inf


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
        return value != expected and -_INFINITY < value < _INFINITY
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
    raise ValueError(f"not a valid constraint: {operator!r}")


def compile_deny_args(args: Mapping[str, Any]) -> ArgsMatcher:
    """Compile a validated deny rule's ``args`` into ``call_args -> bool``, failing closed.

    False only when some pinned argument is present and provably outside its constraint;
    True otherwise: a pinned argument missing from the call, of another type than its
    operator compares, or not a finite number counts as a match. Arguments that are not an
    object, and a Mapping that raises, match too. Never raises.
    """
    checks = tuple((name, compile_exclusion(constraint)) for name, constraint in args.items())
    if not checks:
        return _match_anything
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


# --- non-finite numbers in call arguments --------------------------------------------------

# Deeper than any JSON parser nests; a cyclic structure is infinitely deep.
MAX_ARGUMENT_DEPTH: Final = 256


_NOT_FINITE: Final = 1
_TOO_DEEP: Final = 2
# Values that hold no number that could be non-finite (exact types: a subclass is checked
# the long way).
_PLAIN_SCALAR_TYPES: Final = frozenset({str, int, bool, type(None)})


def non_finite_argument(args: Mapping[str, Any]) -> str | None:
    """Why the call's arguments cannot be decided on, or None: the name of the argument
    holding NaN or an infinity (anywhere inside it), or that they nest too deeply.

    No JSON document holds such a number (RFC 8259), yet Python's json module reads
    ``NaN`` and ``1e999``; no constraint can say whether NaN is "at most 1000", so the
    guard refuses the call. On a call's path: exact type tests first, no allocation.
    """
    plain = _PLAIN_SCALAR_TYPES
    for name, value in args.items():
        kind = type(value)
        if kind in plain:
            continue  # most arguments: one set lookup
        if kind is float:
            if -_INFINITY < value < _INFINITY:
                continue
            return f"argument {name!r} is not a finite number"
        if (kind is list or kind is tuple) and plain.issuperset(map(type, value)):
            continue  # a list of strings or integers, checked in C
        problem = _non_finite(value, 0)
        if problem == _NOT_FINITE:
            nested = not isinstance(value, float)
            what = "holds a number that is not finite" if nested else "is not a finite number"
            return f"argument {name!r} {what}"
        if problem == _TOO_DEEP:
            return f"argument {name!r} nests deeper than {MAX_ARGUMENT_DEPTH} levels"
    return None


def _non_finite(value: Any, depth: int) -> int:
    """0 when every number in `value` is finite, else _NOT_FINITE or _TOO_DEEP."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return 0
    if kind is float or isinstance(value, float):
        return 0 if -_INFINITY < value < _INFINITY else _NOT_FINITE
    if kind is list or kind is tuple:
        items: Any = value
    elif kind is dict or isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return 0  # not JSON at all; matching treats it as a value of no JSON type
    if depth >= MAX_ARGUMENT_DEPTH:
        return _TOO_DEEP
    if _PLAIN_SCALAR_TYPES.issuperset(map(type, items)):
        return 0
    for item in items:
        if type(item) in _PLAIN_SCALAR_TYPES:
            continue
        problem = _non_finite(item, depth + 1)
        if problem:
            return problem
    return 0


# --- narrowing many argument patterns at once -----------------------------------------------


class EqIndex:
    """Which of several ``args`` patterns a call can possibly satisfy, by one dict lookup.

    Built over ``(position, args)`` entries in their order (plan steps naming one tool, or
    the policy rules concerning one tool), it picks the argument that most entries pin with
    ``eq`` to a scalar. An entry pinned that way can only match a call whose value for that
    argument is JSON-equal to the pinned one; so the candidates for a call are the entries
    pinned to its value plus every entry that does not pin the argument so, in their
    original order. Candidates still have to be matched in full: the index only skips
    entries that cannot match, which keeps a decision cheap when fifty steps (or a hundred
    rules) name the same tool.

    Built with ``fail_closed`` (for deny rules, see `compile_deny_args`), it skips only the
    entries the call's value is provably outside: pinned to another value of the same JSON
    type. A missing argument, a value of another type, NaN, an infinity or text with a lone
    surrogate keeps every entry a candidate.
    """

    # Below this a straight scan costs about as much as the lookup.
    MIN_ENTRIES: Final = 8

    __slots__ = ("_all", "_by_key", "_by_type", "_fail_closed", "_name", "_others")

    def __init__(
        self,
        name: str,
        by_key: dict[tuple[str, Any], tuple[int, ...]],
        others: tuple[int, ...],
        *,
        by_type: dict[str, tuple[int, ...]] | None = None,
        every: tuple[int, ...] = (),
    ) -> None:
        self._name = name
        self._by_key = by_key
        self._others = others
        self._fail_closed = by_type is not None
        self._by_type = by_type or {}
        self._all = every

    @classmethod
    def build(
        cls, entries: Sequence[tuple[int, Mapping[str, Any] | None]], *, fail_closed: bool = False
    ) -> EqIndex | None:
        """An index over validated ``args`` objects, or None when none would help."""
        if len(entries) < cls.MIN_ENTRIES:
            return None
        counts: dict[str, int] = {}
        for _, args in entries:
            for name, constraint in (args or {}).items():
                if "eq" in constraint and _scalar_key(constraint["eq"]) is not None:
                    counts[name] = counts.get(name, 0) + 1
        if not counts:
            return None
        name = max(counts, key=counts.__getitem__)
        if counts[name] * 2 < len(entries):
            return None
        pinned: dict[tuple[str, Any], list[int]] = {}
        others: list[int] = []
        for position, args in entries:
            constraint = (args or {}).get(name)
            key = _scalar_key(constraint["eq"]) if constraint and "eq" in constraint else None
            if key is None:
                others.append(position)
            else:
                pinned.setdefault(key, []).append(position)
        if not fail_closed:
            by_key = {
                key: tuple(sorted([*positions, *others])) for key, positions in pinned.items()
            }
            return cls(name, by_key, tuple(others))
        # A value of one JSON type is provably outside only the entries pinned to another
        # value of that same type; entries pinned to a value of another type stay.
        by_type = {
            kind: tuple(
                sorted(
                    [
                        *others,
                        *(p for key, ps in pinned.items() if key[0] != kind for p in ps),
                    ]
                )
            )
            for kind in ("null", "boolean", "number", "string")
        }
        by_key = {
            key: tuple(sorted([*positions, *by_type[key[0]]])) for key, positions in pinned.items()
        }
        every = tuple(sorted(position for position, _ in entries))
        return cls(name, by_key, tuple(others), by_type=by_type, every=every)

    def candidates(self, call_args: Any) -> tuple[int, ...]:
        """Positions, in order, of the entries `call_args` may satisfy. Never raises."""
        if self._fail_closed:
            return self._deny_candidates(call_args)
        try:
            if type(call_args) is not dict and not isinstance(call_args, Mapping):
                return self._others
            value = call_args.get(self._name, _MISSING)
            if value is _MISSING:
                return self._others
            key = _scalar_key(value)
            if key is None:
                return self._others
            return self._by_key.get(key, self._others)
        except Exception:  # a hostile Mapping or an unhashable oddity: scan what may match
            return self._others

    def _deny_candidates(self, call_args: Any) -> tuple[int, ...]:
        try:
            if type(call_args) is not dict and not isinstance(call_args, Mapping):
                return self._all
            value = call_args.get(self._name, _MISSING)
            if value is _MISSING:
                return self._all
            key = _scalar_key(value)
            if key is None:
                return self._all
            kind = key[0]
            if kind == "number" and not -_INFINITY < value < _INFINITY:
                return self._all
            if kind == "string" and not is_valid_unicode(value):
                return self._all
            return self._by_key.get(key, self._by_type[kind])
        except Exception:  # a hostile Mapping: every entry stays a candidate
            return self._all
