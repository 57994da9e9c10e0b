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

Plan and policy version 2 add (`OPERATORS_V2`; docs/decisions/0066, section 2):

============= ================== ===========================================================
key           value              a call argument satisfies it when
============= ================== ===========================================================
``type``      a JSON type name   its JSON type is that one (`JSON_TYPES`): ``integer`` is a
                                 finite number with an integral value (``1.0`` counts), a
                                 boolean is never a number; ``number`` is a finite number
``maxLength`` integer 0..10**6   it is valid Unicode text of at most that many code points
``subpath``   see guard.paths    a path lexically under a base
``url``       see guard.urls     a URL of listed schemes, hosts, ports and path prefix
``cidr``      see guard.addresses an IP address inside one of the networks
``argv``      see guard.commands a command line of a listed program
============= ================== ===========================================================

The last four (*shape operators*) live in their own modules, which export the same
functions (`SHAPE_MODULES`); this module dispatches to them.

Size bounds, so a document cannot make validation or matching expensive: a glob or regex
pattern has at most 1,000 characters (`MAX_PATTERN_LENGTH`), an ``in`` array at most 1,000
members (`MAX_IN_MEMBERS`), an ``eq`` value or ``in`` member at most 10,000 elements nested
at most 32 deep, an ``args`` object at most 100 arguments (`MAX_ARGS`) whose names have 1 to
200 characters (`MAX_ARG_NAME_LENGTH`). Integers must lie within +/-(2**53 - 1) and numbers
must be finite, so every valid document can be canonically hashed.

Matching never raises: a call argument of the wrong type (a list where a string is
expected, a string with lone surrogates for a regex, ...) simply does not match.

Deny rules read the same constraints the other way round and fail closed: see guard.deny.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from functools import cache, partial
from typing import Any, Final

from guard._document import (
    check_integer,
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
from guard.patterns import (
    ANCHOR_BOTH,
    GlobSyntaxError,
    Matcher,
    compile_glob,
    compile_re2,
    equals_string,
    glob_to_re2,
    re2_full_matcher,
    re2_native_match,
)

__all__ = [
    "JSON_TYPES",
    "MAX_ARGS",
    "MAX_ARG_NAME_LENGTH",
    "MAX_IN_MEMBERS",
    "MAX_LENGTH_LIMIT",
    "MAX_PATTERN_LENGTH",
    "OPERATORS",
    "OPERATORS_V2",
    "SHAPE_MODULES",
    "ArgsMatcher",
    "Matcher",
    "compile_args",
    "compile_constraint",
    "json_equal",
    "json_type",
    "scalar_key",
    "shape_module",
    "validate_args",
    "validate_constraint",
]

OPERATORS: Final = ("eq", "in", "glob", "regex", "lte", "gte")
OPERATORS_V2: Final = (*OPERATORS, "subpath", "url", "cidr", "argv", "type", "maxLength")
JSON_TYPES: Final = ("string", "integer", "number", "boolean", "array", "object")
MAX_LENGTH_LIMIT: Final = 1_000_000
#: the shape operators and the modules that implement them
SHAPE_MODULES: Final = {
    "subpath": "guard.paths",
    "url": "guard.urls",
    "cidr": "guard.addresses",
    "argv": "guard.commands",
}
MAX_PATTERN_LENGTH: Final = 1_000
MAX_IN_MEMBERS: Final = 1_000
MAX_ARGS: Final = 100
MAX_ARG_NAME_LENGTH: Final = 200

ArgsMatcher = Callable[[Any], bool]

_MISSING: Final = object()
_INFINITY: Final = float("inf")


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


def scalar_key(value: Any) -> tuple[str, Any] | None:
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
        return partial(equals_string, expected)
    return partial(json_equal, expected)


def _is(expected: Any, value: Any) -> bool:
    return value is expected


def _equals_number(expected: float, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == expected


def _compile_in(members: list[Any]) -> Matcher:
    scalars: set[tuple[str, Any]] = set()
    containers: list[Any] = []
    for member in members:
        key = scalar_key(member)
        if key is None:
            containers.append(member)
        else:
            scalars.add(key)
    frozen_scalars = frozenset(scalars)
    frozen_containers = tuple(containers)

    def match_in(value: Any) -> bool:
        key = scalar_key(value)
        if key is not None:
            return key in frozen_scalars
        return any(json_equal(member, value) for member in frozen_containers)

    return match_in


def _at_most(limit: float, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value <= limit


def _at_least(limit: float, value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= limit


def json_type(value: Any) -> str | None:
    """The JSON type of a call argument as `type` names it (``integer`` for a finite
    number with an integral value, ``number`` for another finite number), ``null``, or
    None for a value with no JSON type (a non-finite number, a Python object)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        if not -_INFINITY < value < _INFINITY:
            return None
        return "integer" if value.is_integer() else "number"
    if value is None:
        return "null"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _is_string(value: Any) -> bool:
    return isinstance(value, str)


def _is_integer(value: Any) -> bool:
    if isinstance(value, int):
        return not isinstance(value, bool)
    return isinstance(value, float) and value.is_integer()  # False for NaN and infinities


def _is_finite_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and -_INFINITY < value < _INFINITY
    )


def _is_boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _is_array(value: Any) -> bool:
    return isinstance(value, list | tuple)


def _is_object(value: Any) -> bool:
    return isinstance(value, Mapping)


_TYPE_MATCHERS: Final[dict[str, Matcher]] = {
    "string": _is_string,
    "integer": _is_integer,
    "number": _is_finite_number,
    "boolean": _is_boolean,
    "array": _is_array,
    "object": _is_object,
}


def _at_most_characters(limit: int, value: Any) -> bool:
    # isascii() is O(1): the encoding test runs for other text only.
    return (
        isinstance(value, str)
        and len(value) <= limit
        and (value.isascii() or is_valid_unicode(value))
    )


@cache
def shape_module(operator: str) -> Any:
    """The module implementing a shape operator (`SHAPE_MODULES`); LookupError when the
    operator is none, or its module cannot be imported here."""
    name = SHAPE_MODULES.get(operator)
    if name is None:
        raise LookupError(f"not a shape operator: {operator!r}")
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise LookupError(f"the {operator!r} operator is not available") from error


def _never_raising(matcher: Matcher) -> Matcher:
    def guarded(value: Any) -> bool:
        try:
            return matcher(value) is True
        except Exception:  # a value the module did not foresee does not match
            return False

    return guarded


# --- validation --------------------------------------------------------------------------


def validate_constraint(
    value: object, path: str, *, operators: tuple[str, ...] = OPERATORS
) -> list[FieldError]:
    """Every problem with one constraint object found at `path`, whose operator must be one
    of `operators` (version 1's by default; `OPERATORS_V2` for a version-2 document)."""
    if not isinstance(value, Mapping):
        return [
            FieldError(
                path,
                f"must be an object with exactly one operator ({', '.join(operators)}),"
                f" not {type_name(value)}",
            )
        ]
    errors: list[FieldError] = []
    for key in value:
        if key not in operators:
            detail = f"unknown operator (expected one of {', '.join(operators)})"
            if isinstance(key, str):
                close = difflib.get_close_matches(key, operators, n=1)
                if close:
                    detail += f"; did you mean {close[0]!r}?"
            errors.append(FieldError(key_path(path, key), detail))
    if len(value) != 1:
        found = "none" if not value else f"{len(value)} keys"
        errors.append(FieldError(path, f"must have exactly one operator, found {found}"))
    for operator in operators:
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
                compile_re2(operand)
            except ValueError as error:
                errors.append(FieldError(path, f"invalid RE2 regular expression: {error}"))
    elif operator in ("lte", "gte"):
        check_number(operand, path, errors)
    elif operator == "type":
        if not isinstance(operand, str) or operand not in JSON_TYPES:
            errors.append(FieldError(path, f"must be one of {', '.join(JSON_TYPES)}"))
    elif operator == "maxLength":
        check_integer(operand, path, errors, minimum=0, maximum=MAX_LENGTH_LIMIT)
    else:
        try:
            module = shape_module(operator)
        except LookupError:
            errors.append(FieldError(path, f"operator {operator!r} is not available here"))
            return
        found: list[FieldError] = []
        try:
            module.check_operand(operand, path, found)
        except Exception:  # an operand the module did not foresee: refused, not a crash
            found.append(FieldError(path, "is not a valid operand"))
        errors.extend(found)


def validate_args(
    value: object, path: str, *, operators: tuple[str, ...] = OPERATORS
) -> list[FieldError]:
    """Every problem with an ``args`` object (argument name -> constraint) at `path`, whose
    constraints may use `operators` (version 1's by default)."""
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
        errors.extend(validate_constraint(constraint, name_path, operators=operators))
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
        return re2_full_matcher(operand)
    if operator in ("lte", "gte") and is_number(operand):
        return partial(_at_most if operator == "lte" else _at_least, operand)
    if operator == "type" and operand in _TYPE_MATCHERS:
        return _TYPE_MATCHERS[operand]
    if operator == "maxLength" and isinstance(operand, int) and not isinstance(operand, bool):
        return partial(_at_most_characters, operand)
    if operator in SHAPE_MODULES:
        try:
            module = shape_module(operator)
        except LookupError as error:
            raise ValueError(str(error)) from error
        return _never_raising(module.compile_matcher(operand))
    raise ValueError(f"not a valid constraint: {operator!r}")


def _match_anything(call_args: Any) -> bool:
    return True


def _compile_one_inlined(name: str, constraint: Mapping[str, Any]) -> ArgsMatcher | None:
    """The matcher of ``args`` pinning only `name`, with the comparison written out for
    ``eq`` to a string and for ``lte`` / ``gte`` (one call per match instead of two, the
    same answer as `compile_constraint`'s matcher), and for ``regex`` through RE2's own
    match (as `guard.patterns.re2_full_matcher`); None for any other operator."""
    ((operator, operand),) = constraint.items()
    if operator == "eq" and isinstance(operand, str):

        def match_text(call_args: Any) -> bool:
            try:
                if type(call_args) is not dict and not isinstance(call_args, Mapping):
                    return False
                value = call_args.get(name, _MISSING)
                return isinstance(value, str) and value == operand
            except Exception:  # a hostile Mapping must not break the guard
                return False

        return match_text
    if operator in ("lte", "gte") and is_number(operand):
        at_most = operator == "lte"

        def match_bound(call_args: Any) -> bool:
            try:
                if type(call_args) is not dict and not isinstance(call_args, Mapping):
                    return False
                value = call_args.get(name, _MISSING)
                if not isinstance(value, int | float) or isinstance(value, bool):
                    return False  # the missing marker, another type, or a boolean
                return value <= operand if at_most else value >= operand
            except Exception:  # a hostile Mapping must not break the guard
                return False

        return match_bound
    native_match = re2_native_match(operand) if operator == "regex" else None
    if native_match is not None:
        anchor = ANCHOR_BOTH

        def match_pattern(call_args: Any) -> bool:
            try:
                if type(call_args) is not dict and not isinstance(call_args, Mapping):
                    return False
                value = call_args.get(name, _MISSING)
                if not isinstance(value, str):
                    return False
                data = value.encode("utf-8")  # a lone surrogate raises: no match
                return bool(native_match(anchor, data, 0, len(data))[0][0] >= 0)
            except Exception:  # also a hostile Mapping: it must not break the guard
                return False

        return match_pattern
    return None


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
        ((name, constraint),) = args.items()
        inlined = _compile_one_inlined(name, constraint)
        if inlined is not None:
            return inlined
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
