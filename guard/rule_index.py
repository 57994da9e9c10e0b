"""Narrowing the policy rules concerning one tool by the argument most of them pin: which
rules a call can possibly satisfy, by one lookup instead of one matcher per rule.

`build_rule_index` picks, among the rules' ``args``, the argument and operator family that
most rules pin, and builds the index for that family:

* ``eq`` to a scalar: `guard.eq_index.EqIndex` (one dict lookup);
* ``glob`` / ``regex``: `PatternIndex`, one RE2 set of the rules' patterns, translated and
  anchored exactly as their own matchers are (guard.patterns);
* ``lte`` / ``gte``: `BoundIndex`, the bounds sorted, a value's rules found by bisection.

An index only skips rules that cannot match: the candidates it answers are still matched
in full, in policy order. Built ``fail_closed`` (deny rules, guard.deny) it skips only the
rules the call's value is provably outside; whenever it cannot tell (a missing argument, a
value of another type, text with a lone surrogate, a non-finite number, a Mapping that
raises) every rule stays a candidate.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Final, Protocol

import re2

from guard.constraints import scalar_key
from guard.eq_index import EqIndex
from guard.patterns import _RE2_OPTIONS, Matcher, glob_to_re2, re2_full_matcher

__all__ = ["BoundIndex", "PatternIndex", "RuleIndex", "build_rule_index"]

Entries = Sequence[tuple[int, Mapping[str, Any] | None]]

_INFINITY: Final = math.inf
_MISSING: Final = object()
# Sorted bounds keep one candidate tuple per cut: quadratic in the bounds, so capped.
_MAX_BOUNDS: Final = 256


class RuleIndex(Protocol):
    def candidates(self, call_args: Any) -> tuple[int, ...]:
        """Positions, in order, of the entries `call_args` may satisfy. Never raises."""
        ...


def _family(constraint: Mapping[str, Any]) -> str | None:
    if "eq" in constraint:
        return "eq" if scalar_key(constraint["eq"]) is not None else None
    if "glob" in constraint or "regex" in constraint:
        return "pattern"
    if "lte" in constraint:
        return "lte"
    if "gte" in constraint:
        return "gte"
    return None  # ``in``: not indexed


def build_rule_index(entries: Entries, *, fail_closed: bool = False) -> RuleIndex | None:
    """An index over validated ``(position, args)`` entries, or None when none would help:
    fewer than EqIndex.MIN_ENTRIES entries, or no argument pinned by one operator family in
    at least half of them."""
    if len(entries) < EqIndex.MIN_ENTRIES:
        return None
    counts: dict[tuple[str, str], int] = {}
    for _, args in entries:
        for name, constraint in (args or {}).items():
            family = _family(constraint)
            if family is not None:
                counts[name, family] = counts.get((name, family), 0) + 1
    if not counts:
        return None
    # Equality first on a tie: one dict lookup is the cheapest of the three.
    name, family = max(counts, key=lambda key: (counts[key], key[1] == "eq"))
    if counts[name, family] * 2 < len(entries):
        return None
    if family == "eq":
        return EqIndex.build(entries, fail_closed=fail_closed)
    if family == "pattern":
        return PatternIndex.build(name, entries, fail_closed=fail_closed)
    return BoundIndex.build(name, family, entries, fail_closed=fail_closed)


def _argument(call_args: Any, name: str) -> Any:
    """The call's value for `name`, or _MISSING (also when the arguments are no object)."""
    if type(call_args) is not dict and not isinstance(call_args, Mapping):
        return _MISSING
    return call_args.get(name, _MISSING)


@lru_cache(maxsize=256)
def _compile_patterns(patterns: tuple[str, ...]) -> tuple[Any, Matcher] | None:
    """One RE2 set of `patterns` and their alternation, or None when RE2 refuses either.

    Cached: every tool name a rule's glob concerns resolves the same rules, and RE2 objects
    are safe to share between threads.
    """
    # The same options (and so the same syntax and UTF-8 reading) as each rule's own
    # matcher (guard.patterns.compile_re2), anchored at both ends as it is.
    try:
        pattern_set = re2.Set.FullMatchSet(options=_RE2_OPTIONS)
        for pattern in patterns:
            pattern_set.Add(pattern)
        pattern_set.Compile()
        any_pattern = re2_full_matcher("|".join(f"(?:{pattern})" for pattern in patterns))
    except (re2.error, ValueError):
        return None
    return pattern_set, any_pattern


class PatternIndex:
    """The entries pinning one argument with ``glob`` or ``regex``, as one RE2 set.

    A set matched against the value names the patterns that match it whole; the candidates
    are those entries plus every entry not pinning the argument so. RE2's set match can give
    up on a huge pattern set (its DFA out of memory) and then answers no match at all, so an
    empty answer is confirmed by one alternation of all the patterns, which RE2 matches
    reliably: if that matches, every entry stays a candidate.
    """

    __slots__ = ("_all", "_any", "_fail_closed", "_name", "_one", "_others", "_positions", "_set")

    def __init__(
        self,
        name: str,
        pattern_set: Any,
        any_pattern: Matcher,
        positions: tuple[int, ...],
        others: tuple[int, ...],
        every: tuple[int, ...],
        *,
        fail_closed: bool,
    ) -> None:
        self._name = name
        self._set = pattern_set
        self._any = any_pattern
        self._positions = positions  # the set's pattern i is the entry at positions[i]
        self._others = others
        self._all = every
        self._fail_closed = fail_closed
        self._one = tuple(tuple(sorted([*others, position])) for position in positions)

    @classmethod
    def build(cls, name: str, entries: Entries, *, fail_closed: bool) -> PatternIndex | None:
        patterns: list[str] = []
        positions: list[int] = []
        others: list[int] = []
        for position, args in entries:
            constraint = (args or {}).get(name)
            if constraint and "glob" in constraint:
                patterns.append(glob_to_re2(constraint["glob"]))
                positions.append(position)
            elif constraint and "regex" in constraint:
                patterns.append(constraint["regex"])
                positions.append(position)
            else:
                others.append(position)
        compiled = _compile_patterns(tuple(patterns))
        if compiled is None:  # too large to compile as one: scan instead
            return None
        pattern_set, any_pattern = compiled
        every = tuple(sorted(position for position, _ in entries))
        return cls(
            name,
            pattern_set,
            any_pattern,
            tuple(positions),
            tuple(others),
            every,
            fail_closed=fail_closed,
        )

    def candidates(self, call_args: Any) -> tuple[int, ...]:
        """Positions, in order, of the entries `call_args` may satisfy. Never raises."""
        unknown = self._all if self._fail_closed else self._others
        try:
            value = _argument(call_args, self._name)
            if not isinstance(value, str):
                return unknown  # no pattern matches it; a deny rule counts it a match
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError:
                return self._all  # neither reading is the set's to give: match in full
            if self._fail_closed and not self._any(value):
                return self._others  # most calls match no deny rule: one match tells
            matched = self._set.Match(data)
            if not matched:
                # No pattern matches, or the set gave up: the alternation tells which.
                return self._all if self._fail_closed or self._any(value) else self._others
            if len(matched) == 1:
                return self._one[matched[0]]
            return tuple(sorted([*self._others, *(self._positions[i] for i in matched)]))
        except Exception:  # a hostile Mapping: every entry stays a candidate
            return self._all


class BoundIndex:
    """The entries pinning one argument with ``lte`` (or ``gte``), their bounds sorted.

    A number v satisfies ``lte L`` when v <= L: the entries whose bound is at least v, one
    bisection away; ``gte`` mirrors it. A deny rule is passed over only for a finite number
    beyond its bound, which is the same cut; anything else keeps every entry a candidate.
    """

    __slots__ = ("_all", "_by_cut", "_fail_closed", "_limits", "_lte", "_name", "_others")

    def __init__(
        self,
        name: str,
        lte: bool,
        limits: list[float],
        by_cut: tuple[tuple[int, ...], ...],
        others: tuple[int, ...],
        every: tuple[int, ...],
        *,
        fail_closed: bool,
    ) -> None:
        self._name = name
        self._lte = lte
        self._limits = limits
        self._by_cut = by_cut
        self._others = others
        self._all = every
        self._fail_closed = fail_closed

    @classmethod
    def build(
        cls, name: str, operator: str, entries: Entries, *, fail_closed: bool
    ) -> BoundIndex | None:
        bounded: list[tuple[float, int]] = []
        others: list[int] = []
        for position, args in entries:
            constraint = (args or {}).get(name)
            if constraint and operator in constraint:
                bounded.append((constraint[operator], position))
            else:
                others.append(position)
        if len(bounded) > _MAX_BOUNDS:
            return None
        bounded.sort()
        limits = [limit for limit, _ in bounded]
        lte = operator == "lte"
        # by_cut[i]: the candidates of a value cutting the sorted bounds at i -- for lte the
        # bounds from i on (at least the value), for gte those before i (at most the value).
        by_cut = tuple(
            tuple(
                sorted(
                    [
                        *others,
                        *(position for _, position in (bounded[cut:] if lte else bounded[:cut])),
                    ]
                )
            )
            for cut in range(len(bounded) + 1)
        )
        every = tuple(sorted(position for position, _ in entries))
        return cls(name, lte, limits, by_cut, tuple(others), every, fail_closed=fail_closed)

    def candidates(self, call_args: Any) -> tuple[int, ...]:
        """Positions, in order, of the entries `call_args` may satisfy. Never raises."""
        try:
            value = _argument(call_args, self._name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
                # No bound admits it (NaN included); a deny rule counts it a match.
                return self._all if self._fail_closed else self._others
            if self._fail_closed and not -_INFINITY < value < _INFINITY:
                return self._all
            # An allowed infinity needs no case of its own: the bisection places it.
            if self._lte:
                return self._by_cut[bisect_left(self._limits, value)]
            return self._by_cut[bisect_right(self._limits, value)]
        except Exception:  # a hostile Mapping: every entry stays a candidate
            return self._all
