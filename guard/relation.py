"""How a plan step's pinned constraint on one argument stands to a policy rule's constraint
on the same argument: one relation that issuance, refresh, the impact preview, the rollback
page and the simulator all answer with.

========================= ===============================================================
relation                  meaning, for the values a call may pass under the step
========================= ===============================================================
``inside``                every value the step admits satisfies the rule
``disjoint``              no value the step admits satisfies the rule
``overlapping``           some do and some do not (both shown by a value, or by arithmetic)
``undecidable``           this module cannot tell (a pattern it does not model exactly, or
                          a search over its budget); never reported as inside or disjoint
========================= ===============================================================

A step that does not pin the argument admits any value, so a rule constraining it is
``overlapping`` (``disjoint`` only for a rule constraint no value satisfies).

How each pair is decided:

* the step is ``eq`` / ``in``: a finite set of values, each matched by the rule's own
  matcher (guard.constraints): exact for every rule operator;
* numbers (``lte`` / ``gte`` against each other, or against ``eq`` / ``in`` members): interval
  arithmetic, exact; a number never satisfies ``glob`` / ``regex``, nor a string ``lte`` /
  ``gte``;
* text patterns (``glob`` and ``regex`` steps, against ``glob``, ``regex`` or the strings of
  ``eq`` / ``in``): both sides become automata over code points and the intersection (and
  the step's language less the rule's) are searched. Globs translate exactly; a regex is
  modelled only when it uses literals, ``.``, classes of literals and ranges, groups,
  alternation, repetition, the ``s`` flag, ``\\d`` ``\\w`` ``\\s`` (ASCII, as RE2 reads them)
  and ``^`` / ``$`` at its ends; anything else (``(?i)``, ``\\b``, ``\\pL``, ``[[:alpha:]]``,
  ...) is ``undecidable``. Every value found this way is checked again with the real
  matchers, and a regex automaton is compared with RE2 on sampled strings before it is
  trusted; a disagreement answers ``undecidable``.

Values are JSON values as a call passes them; text is valid Unicode (a lone surrogate, which
RE2 cannot read, is not considered).

A deny rule reads its constraint the fail-closed way (guard.deny): `deny_relation` answers
the same four relations against the values a deny *matches* (those not provably outside its
constraint, a missing argument included), through `constraint_relation` where the two
readings agree.
"""

from __future__ import annotations

import enum
import importlib
import itertools
import json
import random
import warnings
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from guard._document import is_number
from guard.constraints import compile_constraint
from guard.deny import compile_exclusion
from guard.patterns import (
    GLOB_ANY,
    GLOB_STAR,
    GlobClass,
    GlobLiteral,
    GlobSyntaxError,
    glob_parse,
)

__all__ = [
    "Relation",
    "constraint_relation",
    "deny_relation",
    "describe_constraint",
    "relation_budget",
]


class Relation(enum.Enum):
    """How the values a step admits for one argument stand to a rule's constraint."""

    INSIDE = "inside"
    DISJOINT = "disjoint"
    OVERLAPPING = "overlapping"
    UNDECIDABLE = "undecidable"


#: automaton states one pattern may build before the relation gives up (undecidable)
MAX_STATES: Final = 5_000
#: states a search may visit before the relation gives up (undecidable)
MAX_SEARCH: Final = 20_000
#: units of work (states expanded, moves compared; about 10 us each) one relation may spend:
#: the patterns of plans and policies need a few hundred to a few thousand; past this the
#: answer is undecidable
RELATION_WORK: Final = 10_000
#: units of work all the relations of one `relation_budget` block may spend together (one
#: plan's evaluation, whose patterns an agent writes): past it, the relations not yet known
#: are undecidable
SHARED_WORK: Final = 50_000
#: units of work comparing one regex's automaton with RE2 may spend (once per pattern)
COMPARISON_WORK: Final = 500_000
#: relations remembered (a plan's steps and a policy's rules repeat)
MAX_REMEMBERED: Final = 4096

Ranges = tuple[tuple[int, int], ...]
_SURROGATES_START: Final = 0xD800
_SURROGATES_END: Final = 0xDFFF
_LAST: Final = 0x10FFFF
_UNIVERSE: Final[Ranges] = ((0, _SURROGATES_START - 1), (_SURROGATES_END + 1, _LAST))
_NEWLINE: Final = ord("\n")


class _Undecidable(Exception):
    """The pattern is not modelled, or a search ran over its budget."""


class _SharedBudgetSpent(Exception):
    """The work shared by a `relation_budget` block is spent: not remembered, since the
    same relation asked on its own may well be decided."""


class _Budget:
    """Work left to one relation, and to the block it is asked in (if any)."""

    __slots__ = ("remaining", "shared")

    def __init__(self, units: int, shared: _Budget | None = None) -> None:
        self.remaining = units
        self.shared = shared

    def spend(self, units: int) -> None:
        self.remaining -= units
        if self.remaining < 0:
            raise _Undecidable("the search is over its budget")
        if self.shared is not None:
            self.shared.remaining -= units
            if self.shared.remaining < 0:
                raise _SharedBudgetSpent


_SHARED: ContextVar[_Budget | None] = ContextVar("relation_budget", default=None)


@contextmanager
def relation_budget(units: int = SHARED_WORK) -> Iterator[None]:
    """Within the block, every relation asked shares `units` of work (a block inside
    another shares the outer one's): one plan's evaluation cannot cost more than that,
    however many patterns it compares. Relations asked after it is spent are undecidable."""
    if _SHARED.get() is not None:
        yield
        return
    token = _SHARED.set(_Budget(units))
    try:
        yield
    finally:
        _SHARED.reset(token)


def describe_constraint(constraint: Mapping[str, Any] | None) -> str:
    """``{"glob":"acme/*"}`` as compact JSON; ``(not pinned)`` for None."""
    if constraint is None:
        return "(not pinned)"
    return json.dumps(constraint, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def constraint_relation(step: Mapping[str, Any] | None, rule: Mapping[str, Any]) -> Relation:
    """The relation of the values a step admits for an argument (`step`, a validated
    constraint, or None when the step does not pin the argument) to the values a rule's
    validated constraint `rule` admits for it. Never raises for validated constraints."""
    try:
        key = (None if step is None else _key(step), _key(rule))
    except (TypeError, ValueError):  # not a validated constraint: claim nothing
        return Relation.UNDECIDABLE
    known = _REMEMBERED.get(key)
    if known is not None:
        return known
    try:
        relation = _decide(step, rule, _Budget(RELATION_WORK, _SHARED.get()))
    except _SharedBudgetSpent:
        return Relation.UNDECIDABLE
    except (_Undecidable, RecursionError, GlobSyntaxError, TypeError, ValueError):
        relation = Relation.UNDECIDABLE
    if len(_REMEMBERED) >= MAX_REMEMBERED:
        _REMEMBERED.clear()  # memory stays bounded however varied the constraints
    _REMEMBERED[key] = relation
    return relation


_REMEMBERED: dict[tuple[Hashable, Hashable], Relation] = {}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list | tuple) else "object"


def _kinds_a_deny_can_leave_out(operator: str, operand: Any) -> frozenset[str]:
    """The JSON types of which a deny rule's constraint finds some value provably outside
    it (guard.deny): a value of any other type matches the deny."""
    if operator in ("glob", "regex"):
        return frozenset({"string"})
    if operator in ("lte", "gte"):
        return frozenset({"number"})
    members = [operand] if operator == "eq" else list(operand)
    kinds = frozenset(_json_kind(member) for member in members)
    # null equals null; a list mixing types leaves no value outside, and neither does one
    # holding both booleans.
    every_boolean = kinds == {"boolean"} and {True, False} <= set(members)
    return frozenset() if len(kinds) != 1 or kinds == {"null"} or every_boolean else kinds


def deny_relation(step: Mapping[str, Any] | None, rule: Mapping[str, Any]) -> Relation:
    """The relation of the values a step admits for an argument (`step`, or None when the
    step does not pin it) to the values a *deny* rule's constraint `rule` matches. A deny
    rule fails closed (guard.deny, docs/decisions/0016): it matches every value that is
    not provably outside its constraint, a missing argument included. So:

    * an argument the step does not pin may be left out of a call, which the deny matches:
      ``overlapping``, or ``inside`` when no value is provably outside the constraint (``eq
      null``, an ``in`` mixing types or holding both booleans, a glob or regex every text
      matches), never
      ``disjoint``;
    * an ``eq`` / ``in`` step: each value through the deny's own reading, exact;
    * a step of numbers (``lte`` / ``gte``) or of text (``glob`` / ``regex``) against a
      constraint that leaves out no value of that type: ``inside``; otherwise the values
      the deny leaves out are those failing its constraint, and the answer is
      `constraint_relation`'s (whose ``inside`` is exact; a number that is not finite or
      text with a lone surrogate, which the deny would match too, is not considered).
    """
    try:
        operator, operand = _operator(rule)
        if step is None:
            if not _kinds_a_deny_can_leave_out(operator, operand):
                return Relation.INSIDE
            if operator in ("glob", "regex"):
                every_text = constraint_relation({"glob": "*"}, rule)
                if every_text is Relation.INSIDE:
                    return Relation.INSIDE
            return Relation.OVERLAPPING
        step_operator, step_operand = _operator(step)
        if step_operator in ("eq", "in"):
            excludes = compile_exclusion(rule)
            values = [step_operand] if step_operator == "eq" else list(step_operand)
            return _of_finite([not excludes(value) for value in values])
    except (TypeError, ValueError, GlobSyntaxError):  # not a validated constraint
        return Relation.UNDECIDABLE
    kind = "number" if step_operator in ("lte", "gte") else "string"
    if kind not in _kinds_a_deny_can_leave_out(operator, operand):
        return Relation.INSIDE
    return constraint_relation(step, rule)


def _key(constraint: Mapping[str, Any]) -> Hashable:
    """What the relation of a constraint is remembered by: the operator, the operand's
    exact type (``true`` is not ``1``) and the operand itself for a text or a number, the
    common case, which is not worth encoding; canonical JSON for anything else."""
    if len(constraint) == 1:
        ((operator, operand),) = constraint.items()
        kind = type(operand)
        if kind is str or kind is int or kind is float:
            return (operator, kind, operand)
    return json.dumps(constraint, sort_keys=True, separators=(",", ":"))


def _operator(constraint: Mapping[str, Any]) -> tuple[str, Any]:
    if len(constraint) != 1:
        raise ValueError("a constraint has exactly one operator")
    ((operator, operand),) = constraint.items()
    return operator, operand


def _decide(step: Mapping[str, Any] | None, rule: Mapping[str, Any], budget: _Budget) -> Relation:
    rule_operator, rule_operand = _operator(rule)
    rule_matches = compile_constraint(rule)
    if step is None:
        return _unpinned(rule_operator, rule_operand, budget)
    step_operator, step_operand = _operator(step)
    if step_operator in ("eq", "in"):
        values = [step_operand] if step_operator == "eq" else list(step_operand)
        return _of_finite([rule_matches(value) for value in values])
    if step_operator in ("lte", "gte"):
        return _numbers(step_operator, step_operand, rule_operator, rule_operand, rule_matches)
    # The step is a text pattern: only strings satisfy it.
    if rule_operator in ("lte", "gte"):
        return Relation.DISJOINT
    step_matches = compile_constraint(step)
    if rule_operator in ("eq", "in"):
        members = [rule_operand] if rule_operator == "eq" else list(rule_operand)
        strings = sorted({member for member in members if isinstance(member, str)})
        if not any(step_matches(text) for text in strings):
            return Relation.DISJOINT
        budget.spend(sum(len(text) for text in strings))
        rule_automaton = _strings_automaton(strings)
    else:
        budget.spend(len(rule_operand))
        rule_automaton = _pattern_automaton(rule_operator, rule_operand)
    budget.spend(len(step_operand))  # reading a pattern costs its length
    step_automaton = _pattern_automaton(step_operator, step_operand)
    return _patterns(step_automaton, rule_automaton, step_matches, rule_matches, budget)


def _of_finite(results: Sequence[bool]) -> Relation:
    if all(results):
        return Relation.INSIDE
    if not any(results):
        return Relation.DISJOINT
    return Relation.OVERLAPPING


def _unpinned(operator: str, operand: Any, budget: _Budget) -> Relation:
    """Any value may come: a rule constraint always leaves some value out (another JSON
    type), so the answer turns on whether some value satisfies it."""
    if operator in ("eq", "in", "lte", "gte"):
        return Relation.OVERLAPPING
    budget.spend(len(operand))
    automaton = _pattern_automaton(operator, operand)
    witness = _shortest_accepted(automaton, budget)
    if witness is None:
        return Relation.DISJOINT
    if not compile_constraint({operator: operand})(witness):
        raise _Undecidable("the automaton and the matcher disagree")
    return Relation.OVERLAPPING


def _numbers(
    step_operator: str,
    bound: float,
    rule_operator: str,
    rule_operand: Any,
    rule_matches: Callable[[Any], bool],
) -> Relation:
    """A step ``lte`` / ``gte`` admits an unbounded interval of numbers."""
    if rule_operator in ("glob", "regex"):
        return Relation.DISJOINT
    if rule_operator in ("eq", "in"):
        members = [rule_operand] if rule_operator == "eq" else list(rule_operand)
        step_matches = compile_constraint({step_operator: bound})
        # An interval holds infinitely many numbers, a list finitely many: never inside.
        if any(is_number(member) and step_matches(member) for member in members):
            return Relation.OVERLAPPING
        return Relation.DISJOINT
    at_most = step_operator == "lte"
    if rule_operator == step_operator:
        inside = bound <= rule_operand if at_most else bound >= rule_operand
        return Relation.INSIDE if inside else Relation.OVERLAPPING
    # Opposite directions: an interval meets the other only across their bounds.
    disjoint = bound < rule_operand if at_most else bound > rule_operand
    return Relation.DISJOINT if disjoint else Relation.OVERLAPPING


def _patterns(
    step: _Automaton,
    rule: _Automaton,
    step_matches: Callable[[Any], bool],
    rule_matches: Callable[[Any], bool],
    budget: _Budget,
) -> Relation:
    common = _intersection_witness(step, rule, budget)
    if common is None:
        return Relation.DISJOINT
    if not (step_matches(common) and rule_matches(common)):
        raise _Undecidable("the automata and the matchers disagree")
    outside = _difference_witness(step, rule, budget)
    if outside is None:
        return Relation.INSIDE
    if not step_matches(outside) or rule_matches(outside):
        raise _Undecidable("the automata and the matchers disagree")
    return Relation.OVERLAPPING


# --- code point sets ---------------------------------------------------------------------


def _normalize(ranges: Sequence[tuple[int, int]]) -> Ranges:
    """Sorted, merged, without surrogates (which valid text never holds)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            if high > merged[-1][1]:
                merged[-1] = (merged[-1][0], high)
        else:
            merged.append((low, high))
    return _intersect(tuple(merged), _UNIVERSE)


def _intersect(first: Ranges, second: Ranges) -> Ranges:
    result: list[tuple[int, int]] = []
    i = j = 0
    while i < len(first) and j < len(second):
        low = max(first[i][0], second[j][0])
        high = min(first[i][1], second[j][1])
        if low <= high:
            result.append((low, high))
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return tuple(result)


def _complement(ranges: Ranges) -> Ranges:
    result: list[tuple[int, int]] = []
    start = 0
    for low, high in ranges:
        if low > start:
            result.append((start, low - 1))
        start = high + 1
    if start <= _LAST:
        result.append((start, _LAST))
    return _intersect(tuple(result), _UNIVERSE)


def _single(character: int) -> Ranges:
    return _normalize([(character, character)])


# --- automata ----------------------------------------------------------------------------


@dataclass
class _Automaton:
    """A Thompson automaton over code points: one start, one accepting state."""

    moves: list[list[tuple[Ranges, int]]] = field(default_factory=list)
    epsilon: list[list[int]] = field(default_factory=list)
    start: int = 0
    accept: int = 0

    def state(self) -> int:
        if len(self.moves) >= MAX_STATES:
            raise _Undecidable("the automaton is too large")
        self.moves.append([])
        self.epsilon.append([])
        return len(self.moves) - 1

    def closure(self, states: Iterator[int] | Sequence[int], budget: _Budget) -> frozenset[int]:
        seen = set(states)
        stack = list(seen)
        while stack:
            budget.spend(1)
            for target in self.epsilon[stack.pop()]:
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return frozenset(seen)

    def accepts(self, text: str, budget: _Budget) -> bool:
        current = self.closure([self.start], budget)
        for character in text:
            code = ord(character)
            budget.spend(len(current))
            current = self.closure(
                (
                    target
                    for state in current
                    for ranges, target in self.moves[state]
                    if any(low <= code <= high for low, high in ranges)
                ),
                budget,
            )
            if not current:
                return False
        return self.accept in current


_Fragment = tuple[int, int]


def _set_fragment(automaton: _Automaton, ranges: Ranges) -> _Fragment:
    start, end = automaton.state(), automaton.state()
    if ranges:
        automaton.moves[start].append((ranges, end))
    return start, end


def _empty_fragment(automaton: _Automaton) -> _Fragment:
    start, end = automaton.state(), automaton.state()
    automaton.epsilon[start].append(end)
    return start, end


def _concatenate(automaton: _Automaton, fragments: Sequence[_Fragment]) -> _Fragment:
    if not fragments:
        return _empty_fragment(automaton)
    for (_, end), (start, _) in itertools.pairwise(fragments):
        automaton.epsilon[end].append(start)
    return fragments[0][0], fragments[-1][1]


def _alternate(automaton: _Automaton, fragments: Sequence[_Fragment]) -> _Fragment:
    start, end = automaton.state(), automaton.state()
    for inner_start, inner_end in fragments:
        automaton.epsilon[start].append(inner_start)
        automaton.epsilon[inner_end].append(end)
    return start, end


def _star(automaton: _Automaton, fragment: _Fragment) -> _Fragment:
    start, end = automaton.state(), automaton.state()
    inner_start, inner_end = fragment
    automaton.epsilon[start].extend((inner_start, end))
    automaton.epsilon[inner_end].extend((inner_start, end))
    return start, end


def _finish(automaton: _Automaton, fragment: _Fragment) -> _Automaton:
    automaton.start, automaton.accept = fragment
    return automaton


def _strings_automaton(strings: Sequence[str]) -> _Automaton:
    automaton = _Automaton()
    branches = [
        _concatenate(automaton, [_set_fragment(automaton, _single(ord(c))) for c in text])
        for text in strings
    ]
    return _finish(automaton, _alternate(automaton, branches))


def _pattern_automaton(operator: str, pattern: str) -> _Automaton:
    if operator == "glob":
        return _glob_automaton(pattern)
    if operator == "regex":
        automaton = _regex_automaton(pattern)
        if automaton is None:
            raise _Undecidable("the regex is not modelled")
        return automaton
    raise ValueError(f"not a text pattern operator: {operator!r}")


@lru_cache(maxsize=512)
def _glob_automaton(pattern: str) -> _Automaton:
    """The glob's language, read with the glob grammar's one parser (guard.patterns)."""
    automaton = _Automaton()
    fragments: list[_Fragment] = []
    for part in glob_parse(pattern):
        if part == GLOB_STAR:
            fragments.append(_star(automaton, _set_fragment(automaton, _UNIVERSE)))
        elif part == GLOB_ANY:
            fragments.append(_set_fragment(automaton, _UNIVERSE))
        elif isinstance(part, GlobClass):
            members = _normalize([(ord(first), ord(last)) for first, last in part.ranges])
            fragments.append(
                _set_fragment(automaton, _complement(members) if part.negate else members)
            )
        else:
            assert isinstance(part, GlobLiteral)
            fragments.append(_set_fragment(automaton, _single(ord(part.character))))
    return _finish(automaton, _concatenate(automaton, fragments))


# RE2's Perl classes are ASCII (Python's, on text, are Unicode): \d [0-9], \w [0-9A-Za-z_],
# \s [\t\n\f\r ]; the parser names them by Python's categories.
_DIGITS: Final[Ranges] = ((0x30, 0x39),)
_WORD: Final[Ranges] = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Final[Ranges] = ((0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20))
_PERL_CLASSES: Final[dict[str, Ranges]] = {
    "CATEGORY_DIGIT": _DIGITS,
    "CATEGORY_NOT_DIGIT": _complement(_DIGITS),
    "CATEGORY_WORD": _WORD,
    "CATEGORY_NOT_WORD": _complement(_WORD),
    "CATEGORY_SPACE": _SPACE,
    "CATEGORY_NOT_SPACE": _complement(_SPACE),
}

# RE2 syntax Python's parser would read differently, or not at all: never modelled.
_REGEX_NOT_MODELLED: Final = ("[:", "{,", "\\Q", "\\C", "\\p", "\\P", "\\x{", "\\z")
_REGEX_SAMPLES: Final = 24


@lru_cache(maxsize=512)
def _regex_automaton(pattern: str) -> _Automaton | None:
    """The regex's language for the subset of RE2 modelled here (see the module), read with
    Python's own regular expression parser, then compared with RE2 on sampled strings; None
    (remembered too) when it is not modelled."""
    try:
        return _read_regex(pattern)
    except (_Undecidable, RecursionError):
        return None


def _read_regex(pattern: str) -> _Automaton:
    if any(text in pattern for text in _REGEX_NOT_MODELLED):
        raise _Undecidable("syntax not modelled")
    try:  # Python's own parser of regular expressions (stdlib, not a public module)
        sre_constants: Any = importlib.import_module("re._constants")
        sre_parser: Any = importlib.import_module("re._parser")
    except ImportError as error:  # another Python: claim nothing
        raise _Undecidable("no parser") from error
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "possible nested set": read otherwise than RE2
            parsed = sre_parser.parse(pattern)
    except Exception as error:
        raise _Undecidable("syntax not modelled") from error
    builder = _RegexBuilder(sre_constants)
    flags = int(parsed.state.flags)
    if flags & ~(sre_constants.SRE_FLAG_UNICODE | sre_constants.SRE_FLAG_DOTALL):
        raise _Undecidable("flags not modelled")
    dotall = bool(flags & sre_constants.SRE_FLAG_DOTALL)
    items = list(parsed.data)
    # ^ and $ (and \A) at the ends of the whole pattern say nothing in a whole-string match.
    beginnings = (
        (sre_constants.AT, sre_constants.AT_BEGINNING),
        (sre_constants.AT, sre_constants.AT_BEGINNING_STRING),
    )
    if items and items[0] in beginnings:
        items = items[1:]
    if items and items[-1] == (sre_constants.AT, sre_constants.AT_END):
        items = items[:-1]
    automaton = builder.automaton
    _finish(automaton, builder.sequence(items, dotall))
    _compare_with_re2(automaton, pattern, _Budget(COMPARISON_WORK))
    return automaton


class _RegexBuilder:
    def __init__(self, constants: Any) -> None:
        self.c = constants
        self.automaton = _Automaton()

    def sequence(self, items: Sequence[tuple[Any, Any]], dotall: bool) -> _Fragment:
        return _concatenate(self.automaton, [self.item(op, value, dotall) for op, value in items])

    def item(self, op: Any, value: Any, dotall: bool) -> _Fragment:
        c = self.c
        automaton = self.automaton
        if op is c.LITERAL:
            return _set_fragment(automaton, _single(value))
        if op is c.NOT_LITERAL:
            return _set_fragment(automaton, _complement(_single(value)))
        if op is c.ANY:
            ranges = _UNIVERSE if dotall else _complement(_single(_NEWLINE))
            return _set_fragment(automaton, ranges)
        if op is c.IN:
            return _set_fragment(automaton, self.members(value))
        if op is c.BRANCH:
            return _alternate(
                automaton, [self.sequence(list(branch), dotall) for branch in value[1]]
            )
        if op is c.SUBPATTERN:
            _group, add_flags, del_flags, inner = value
            allowed = c.SRE_FLAG_DOTALL
            if (add_flags & ~allowed) or (del_flags & ~allowed):
                raise _Undecidable("flags not modelled")
            if add_flags & c.SRE_FLAG_DOTALL:
                dotall = True
            if del_flags & c.SRE_FLAG_DOTALL:
                dotall = False
            return self.sequence(list(inner), dotall)
        if op is c.MAX_REPEAT or op is c.MIN_REPEAT:
            low, high, inner = value
            parts = [self.sequence(list(inner), dotall) for _ in range(low)]
            if high is c.MAXREPEAT or high == c.MAXREPEAT:
                parts.append(_star(automaton, self.sequence(list(inner), dotall)))
                return _concatenate(automaton, parts)
            start, current = _concatenate(automaton, parts)
            # Each optional copy may be skipped straight to one end: a state's closure
            # stays small, however many copies follow.
            end = automaton.state()
            for _ in range(high - low):
                automaton.epsilon[current].append(end)
                optional_start, optional_end = self.sequence(list(inner), dotall)
                automaton.epsilon[current].append(optional_start)
                current = optional_end
            automaton.epsilon[current].append(end)
            return start, end
        raise _Undecidable(f"regular expression item not modelled: {op}")

    def members(self, items: Sequence[tuple[Any, Any]]) -> Ranges:
        c = self.c
        negate = False
        ranges: list[tuple[int, int]] = []
        for op, value in items:
            if op is c.NEGATE:
                negate = True
            elif op is c.LITERAL:
                ranges.append((value, value))
            elif op is c.RANGE:
                ranges.append((value[0], value[1]))
            elif op is c.CATEGORY and str(value) in _PERL_CLASSES:
                ranges.extend(_PERL_CLASSES[str(value)])
            else:
                raise _Undecidable(f"class member not modelled: {op}")
        members = _normalize(ranges)
        return _complement(members) if negate else members


def _compare_with_re2(automaton: _Automaton, pattern: str, budget: _Budget) -> None:
    """Strings the automaton accepts, and small changes of them, must get the same answer
    from RE2: a guard against reading a pattern otherwise than RE2 does."""
    matches = compile_constraint({"regex": pattern})
    generator = random.Random(pattern)
    samples: list[str] = [""]
    for _ in range(_REGEX_SAMPLES):
        text = _random_accepted(automaton, generator)
        if text is None:
            break
        samples.append(text)
        if text:
            cut = generator.randrange(len(text))
            samples.append(text[:cut] + text[cut + 1 :])
            samples.append(
                text[:cut] + chr(generator.choice((0x61, 0x0A, 0x2F, 0xE9))) + text[cut:]
            )
        samples.append(text + "a")
        samples.append(text + "\n")
    for text in samples:
        if automaton.accepts(text, budget) != matches(text):
            raise _Undecidable("the automaton and RE2 disagree")


def _random_accepted(automaton: _Automaton, generator: random.Random) -> str | None:
    """A random walk that ends in the accepting state within a bound, or None."""
    for _attempt in range(8):
        state = automaton.start
        out: list[str] = []
        for _step in range(200):
            if state == automaton.accept and generator.random() < 0.3:
                return "".join(out)
            choices: list[tuple[Ranges | None, int]] = [
                (None, target) for target in automaton.epsilon[state]
            ]
            choices.extend(automaton.moves[state])
            if not choices:
                break
            ranges, state = generator.choice(choices)
            if ranges:
                low, high = generator.choice(ranges)
                out.append(chr(generator.choice((low, high, (low + high) // 2))))
        if state == automaton.accept:
            return "".join(out)
    return None


# --- searches ----------------------------------------------------------------------------


def _path(parents: Mapping[Any, tuple[Any, str | None]], state: Any) -> str:
    characters: list[str] = []
    while state in parents:
        state, character = parents[state]
        if character is not None:
            characters.append(character)
    return "".join(reversed(characters))


def _shortest_accepted(automaton: _Automaton, budget: _Budget) -> str | None:
    parents: dict[int, tuple[int, str | None]] = {}
    seen = {automaton.start}
    queue = deque([automaton.start])
    while queue:
        state = queue.popleft()
        budget.spend(1)
        if state == automaton.accept:
            return _path(parents, state)
        steps: list[tuple[int, str | None]] = [(t, None) for t in automaton.epsilon[state]]
        steps.extend((target, chr(ranges[0][0])) for ranges, target in automaton.moves[state])
        for target, character in steps:
            if target not in seen:
                seen.add(target)
                parents[target] = (state, character)
                queue.append(target)
    return None


def _intersection_witness(first: _Automaton, second: _Automaton, budget: _Budget) -> str | None:
    """A string both automata accept, or None when there is none (raises _Undecidable
    past the search budget)."""
    start = (first.start, second.start)
    parents: dict[tuple[int, int], tuple[tuple[int, int], str | None]] = {}
    seen = {start}
    queue = deque([start])
    while queue:
        pair = queue.popleft()
        left, right = pair
        budget.spend(
            1
            + len(first.epsilon[left])
            + len(second.epsilon[right])
            + len(first.moves[left]) * len(second.moves[right])
        )
        if left == first.accept and right == second.accept:
            return _path(parents, pair)
        steps: list[tuple[tuple[int, int], str | None]] = []
        steps.extend(((target, right), None) for target in first.epsilon[left])
        steps.extend(((left, target), None) for target in second.epsilon[right])
        for ranges, left_target in first.moves[left]:
            for other, right_target in second.moves[right]:
                common = _intersect(ranges, other)
                if common:
                    steps.append(((left_target, right_target), chr(common[0][0])))
        for target, character in steps:
            if target not in seen:
                if len(seen) >= MAX_SEARCH:
                    raise _Undecidable("the search is over its budget")
                seen.add(target)
                parents[target] = (pair, character)
                queue.append(target)
    return None


_SubsetState = tuple[int, frozenset[int]]


def _difference_witness(step: _Automaton, rule: _Automaton, budget: _Budget) -> str | None:
    """A string the step's automaton accepts and the rule's does not, or None when every
    string the step accepts the rule accepts too (raises _Undecidable past the budget)."""
    start: _SubsetState = (step.start, rule.closure([rule.start], budget))
    parents: dict[_SubsetState, tuple[_SubsetState, str | None]] = {}
    seen = {start}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        position, rule_states = current
        if position == step.accept and rule.accept not in rule_states:
            return _path(parents, current)
        steps: list[tuple[_SubsetState, str | None]] = [
            ((target, rule_states), None) for target in step.epsilon[position]
        ]
        rule_moves = [move for state in rule_states for move in rule.moves[state]]
        budget.spend(1 + len(rule_states) + len(rule_moves))
        for ranges, step_target in step.moves[position]:
            for low, targets in _split(ranges, rule_moves, budget):
                steps.append(((step_target, rule.closure(targets, budget)), chr(low)))
        for target, character in steps:
            if target not in seen:
                if len(seen) >= MAX_SEARCH:
                    raise _Undecidable("the search is over its budget")
                seen.add(target)
                parents[target] = (current, character)
                queue.append(target)
    return None


def _split(
    ranges: Ranges, moves: Sequence[tuple[Ranges, int]], budget: _Budget
) -> Iterator[tuple[int, list[int]]]:
    """`ranges` cut where the rule's moves begin or end: for each piece, its first code
    point and the rule states it leads to (the same for every code point of the piece)."""
    cuts: set[int] = set()
    for low, high in ranges:
        cuts.update((low, high + 1))
    for move_ranges, _target in moves:
        for low, high in move_ranges:
            cuts.update((low, high + 1))
    points = sorted(cuts)
    budget.spend(len(points) * (1 + len(moves)))
    seen_targets: set[frozenset[int]] = set()
    for low, following in itertools.pairwise(points):
        high = following - 1
        if not any(start <= low and high <= end for start, end in ranges):
            continue
        targets = [
            target
            for move_ranges, target in moves
            if any(start <= low and high <= end for start, end in move_ranges)
        ]
        key = frozenset(targets)
        if key in seen_targets:
            continue  # the same rule states: one representative is enough
        seen_targets.add(key)
        yield low, targets
