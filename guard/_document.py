"""Helpers shared by plan and policy validation: paths, type names and JSON literals.

Validation never raises on garbage: every helper appends FieldErrors and returns.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TypeGuard

from guard.errors import FieldError

# The paths are public in guard.errors (kernel.parsers uses them too); the validators here
# import them from this module as before.
from guard.errors import index_path as index_path
from guard.errors import key_path as key_path

# RFC 8785 (and I-JSON) only promise integers that a double represents exactly.
MAX_SAFE_INTEGER = 2**53 - 1

# Bounds on a literal (`eq` value, `in` member). Nesting deeper than this is no useful
# argument pin, and the bound keeps every recursive walk (validation, hashing, matching)
# far from Python's recursion limit.
MAX_LITERAL_DEPTH = 32
MAX_LITERAL_NODES = 10_000


def type_name(value: object) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def is_number(value: object) -> TypeGuard[int | float]:
    """True for JSON numbers: int or float, never bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_valid_unicode(text: str) -> bool:
    """False when `text` holds lone surrogates (json.loads accepts "\\ud800")."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_problem(text: str) -> str | None:
    """Why `text` cannot stand in a document, or None. Lone surrogates have no canonical
    form; NUL cannot be stored by PostgreSQL (text or jsonb), so a plan or policy holding
    one could be validated and then fail on the database."""
    if "\x00" in text:
        return "must not contain NUL (\\u0000)"
    if not is_valid_unicode(text):
        return "must be valid Unicode (contains a lone surrogate)"
    return None


def check_unknown_keys(
    document: Mapping[object, object], allowed: Iterable[str], path: str, errors: list[FieldError]
) -> None:
    """Report every key outside `allowed`: ignoring one could silently widen a rule."""
    allowed_keys = frozenset(allowed)
    for key in document:
        if key not in allowed_keys:
            expected = ", ".join(sorted(allowed_keys))
            errors.append(FieldError(key_path(path, key), f"unknown field (expected {expected})"))


def check_string(
    value: object,
    path: str,
    errors: list[FieldError],
    *,
    max_length: int,
    min_length: int = 0,
    non_blank: bool = False,
) -> bool:
    """Check a string field; True when it passed."""
    if not isinstance(value, str):
        errors.append(FieldError(path, f"must be a string, not {type_name(value)}"))
        return False
    problem = text_problem(value)
    if problem is not None:
        errors.append(FieldError(path, problem))
        return False
    if len(value) < min_length:
        errors.append(FieldError(path, "must not be empty"))
        return False
    if non_blank and not value.strip():
        errors.append(FieldError(path, "must not be blank"))
        return False
    if len(value) > max_length:
        errors.append(FieldError(path, f"must be at most {max_length} characters"))
        return False
    return True


def check_integer(
    value: object, path: str, errors: list[FieldError], *, minimum: int, maximum: int
) -> bool:
    """Check an integer field (bool is not an integer here); True when it passed."""
    if isinstance(value, bool) or not isinstance(value, int):
        errors.append(FieldError(path, f"must be an integer, not {type_name(value)}"))
        return False
    if value < minimum:
        errors.append(FieldError(path, f"must be at least {minimum}"))
        return False
    if value > maximum:
        errors.append(FieldError(path, f"must be at most {maximum}"))
        return False
    return True


def check_number(value: object, path: str, errors: list[FieldError]) -> bool:
    """Check a JSON number that must survive canonical hashing; True when it passed."""
    if not is_number(value):
        errors.append(FieldError(path, f"must be a number, not {type_name(value)}"))
        return False
    return _check_number_domain(value, path, errors)


def _check_number_domain(value: float, path: str, errors: list[FieldError]) -> bool:
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return True
        errors.append(FieldError(path, "integer is outside +/-(2**53 - 1)"))
        return False
    if math.isfinite(value):
        return True
    errors.append(FieldError(path, "must be a finite number"))
    return False


def check_literal(value: object, path: str, errors: list[FieldError]) -> None:
    """Check an arbitrary JSON value (an `eq` value or an `in` member) for hashability."""
    nodes = [0]
    _check_literal(value, path, errors, 0, nodes)


def _check_literal(
    value: object, path: str, errors: list[FieldError], depth: int, nodes: list[int]
) -> None:
    nodes[0] += 1
    if nodes[0] > MAX_LITERAL_NODES:
        if nodes[0] == MAX_LITERAL_NODES + 1:
            errors.append(FieldError(path, f"value has more than {MAX_LITERAL_NODES} elements"))
        return
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int | float):
        _check_number_domain(value, path, errors)
        return
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            errors.append(FieldError(path, problem))
        return
    if isinstance(value, list | Mapping):
        if depth >= MAX_LITERAL_DEPTH:
            errors.append(FieldError(path, f"value is nested deeper than {MAX_LITERAL_DEPTH}"))
            return
        if isinstance(value, list):
            for index, item in enumerate(value):
                _check_literal(item, index_path(path, index), errors, depth + 1, nodes)
            return
        for key, item in value.items():
            item_path = key_path(path, key)
            if not isinstance(key, str):
                errors.append(FieldError(item_path, "object keys must be strings"))
            elif (problem := text_problem(key)) is not None:
                errors.append(FieldError(item_path, f"key {problem}"))
            _check_literal(item, item_path, errors, depth + 1, nodes)
        return
    errors.append(FieldError(path, f"is not a JSON value ({type_name(value)})"))


def clone_literal(value: object) -> object:
    """Deep copy of a checked JSON literal (lists and dicts are rebuilt, scalars shared)."""
    if isinstance(value, list):
        return [clone_literal(item) for item in value]
    if isinstance(value, Mapping):
        return {key: clone_literal(item) for key, item in value.items()}
    return value
