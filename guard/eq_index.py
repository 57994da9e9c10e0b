"""Narrowing many ``args`` patterns at once: which plan steps or policy rules naming one
tool a call can possibly satisfy, by one dict lookup (`EqIndex`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from guard._document import is_valid_unicode
from guard.constraints import scalar_key

__all__ = ["EqIndex"]

_INFINITY: Final = math.inf
_MISSING: Final = object()


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
        cls,
        entries: Sequence[tuple[int, Mapping[str, Any] | None]],
        *,
        fail_closed: bool = False,
        min_entries: int = MIN_ENTRIES,
    ) -> EqIndex | None:
        """An index over validated ``args`` objects, or None when none would help (fewer
        than `min_entries` entries)."""
        if len(entries) < min_entries:
            return None
        counts: dict[str, int] = {}
        for _, args in entries:
            for name, constraint in (args or {}).items():
                if "eq" in constraint and scalar_key(constraint["eq"]) is not None:
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
            key = scalar_key(constraint["eq"]) if constraint and "eq" in constraint else None
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
            if type(value) is str:  # the common case, keyed as scalar_key keys it
                return self._by_key.get(("string", value), self._others)
            if value is _MISSING:
                return self._others
            key = scalar_key(value)
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
            if type(value) is str and value.isascii():
                # The common case: text that is valid Unicode (ASCII), keyed as scalar_key
                # keys it; no scalar_key or is_valid_unicode call.
                return self._by_key.get(("string", value), self._by_type["string"])
            if value is _MISSING:
                return self._all
            key = scalar_key(value)
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
