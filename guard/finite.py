"""Call arguments no constraint can decide on: NaN or an infinity anywhere inside them, or
nesting deeper than any JSON parser produces. The guard refuses such a call outright
(`invalid_arguments`) before any plan step or policy rule looks at it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_ARGUMENT_DEPTH", "PLAIN_SCALAR_TYPES", "non_finite_argument"]

_INFINITY: Final = math.inf

# Deeper than any JSON parser nests; a cyclic structure is infinitely deep.
MAX_ARGUMENT_DEPTH: Final = 256


_NOT_FINITE: Final = 1
_TOO_DEEP: Final = 2
# Values that hold no number that could be non-finite (exact types: a subclass is checked
# the long way). An argument of these types needs no reading at all.
PLAIN_SCALAR_TYPES: Final = frozenset({str, int, bool, type(None)})
_PLAIN_SCALAR_TYPES: Final = PLAIN_SCALAR_TYPES


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
