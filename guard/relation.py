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

Version 2's operators (docs/decisions/0066, section 3):

* ``type``: against ``type``, inside when equal or ``integer`` in ``number``, overlapping for
  ``number`` in ``integer``, else disjoint; against another operator, disjoint when no value
  of the type can satisfy it, ``type string`` is ``glob "*"`` for the automata, and ``lte`` /
  ``gte`` against ``number`` are inside, against ``integer`` overlapping; ``type boolean`` is
  the finite set of both booleans;
* ``maxLength``: against ``maxLength``, inside when the step's is not above the rule's; a
  glob or regex against it by the automaton's shortest and longest texts; it against a glob
  or regex by a search of the automaton's state sets limited to its length (``maxLength 0``
  is the finite set of ``""``);
* the shape operators (``subpath``, ``url``, ``cidr``, ``argv``, guard.constraints'
  `SHAPE_MODULES`): two constraints of one operator by its module's ``relation``; paths,
  URLs and addresses never meet; against numbers disjoint, against ``type`` by the JSON types
  their values take. Against text operators, and ``argv`` against anything else, a lexical
  path or a parsed URL is no regular language: the answer is overlapping when sampled values
  (the module's ``samples`` and variations of them, a pattern's shortest and random texts)
  show a value admitted by both and one admitted by the step only, disjoint when the pattern
  admits no text at all, and undecidable otherwise.

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
import re
import warnings
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

from guard._document import is_number
from guard.constraints import SHAPE_MODULES, compile_constraint, shape_module
from guard.deny import compile_exclusion, may_read_as_number
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
#: units of work one text pattern against the texts a tool may read as numbers may spend
#: (a deny on ``type integer`` or ``number``): their classes of digits and whitespace in
#: every script hold many ranges, each cheaper to compare than the unit's 10 us
NUMBER_TEXT_WORK: Final = 50_000
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
    except (_Undecidable, RecursionError, GlobSyntaxError, TypeError, ValueError, LookupError):
        relation = Relation.UNDECIDABLE
    if len(_REMEMBERED) >= MAX_REMEMBERED:
        _REMEMBERED.clear()  # memory stays bounded however varied the constraints
    _REMEMBERED[key] = relation
    return relation


_REMEMBERED: dict[tuple[Hashable, ...], Relation] = {}


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


_ALL_KINDS: Final = frozenset({"null", "boolean", "number", "string", "array", "object"})
_KINDS_OF_TYPE: Final = {
    "string": frozenset({"string"}),
    "integer": frozenset({"number"}),
    "number": frozenset({"number"}),
    "boolean": frozenset({"boolean"}),
    "array": frozenset({"array"}),
    "object": frozenset({"object"}),
}
#: the shape operators whose values are strings only, of three forms that never meet: a
#: path starts with "/", a URL with "scheme://", an address is an IP literal
_STRING_SHAPES: Final = ("subpath", "url", "cidr")


def _admitted_kinds(operator: str, operand: Any) -> frozenset[str]:
    """The JSON types of the values a constraint other than ``eq`` / ``in`` admits."""
    if operator in ("lte", "gte"):
        return frozenset({"number"})
    if operator == "type":
        return _KINDS_OF_TYPE[operand]
    if operator == "argv":
        return frozenset({"string", "array"})
    return frozenset({"string"})


def _finite_values(operator: str, operand: Any) -> list[Any] | None:
    """Every value a constraint admits when they are few (``eq``, ``in``, ``type
    boolean``, ``maxLength 0``), else None."""
    if operator == "eq":
        return [operand]
    if operator == "in":
        return list(operand)
    if operator == "type" and operand == "boolean":
        return [True, False]
    if operator == "maxLength" and operand == 0:
        return [""]
    return None


def _kinds_a_deny_can_leave_out(operator: str, operand: Any) -> frozenset[str]:
    """The JSON types of which a deny rule's constraint finds some value provably outside
    it (guard.deny): a value of any other type matches the deny."""
    if operator in ("glob", "regex", "maxLength", "subpath", "url", "cidr"):
        return frozenset({"string"})
    if operator == "argv":
        return frozenset({"string", "array"})
    if operator in ("lte", "gte"):
        return frozenset({"number"})
    if operator == "type":
        # A number with a fraction is not an integer: every kind has a value outside that.
        kept = frozenset() if operand == "integer" else _KINDS_OF_TYPE[operand]
        return _ALL_KINDS - kept
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
      text with a lone surrogate, which the deny would match too, is not considered);
    * a deny on ``type`` leaves out values of another JSON type but for strings a tool may
      read as numbers (guard.deny.may_read_as_number), which text steps show by sampled
      values or leave undecidable;
    * a shape operator against itself by its module's ``deny_relation``; a path, URL or
      address never passes another of those operators' checks, so such a deny is inside;
      other pairs with a shape operator are overlapping when sampled values show one value
      the deny matches and one it leaves out, else undecidable.
    """
    try:
        operator, operand = _operator(rule)
        leaves_out = _kinds_a_deny_can_leave_out(operator, operand)
        if step is None:
            if not leaves_out:
                return Relation.INSIDE
            if operator in ("glob", "regex"):
                every_text = constraint_relation({"glob": "*"}, rule)
                if every_text is Relation.INSIDE:
                    return Relation.INSIDE
            if operator in SHAPE_MODULES:
                return _remember_deny(None, rule)
            return Relation.OVERLAPPING
        step_operator, step_operand = _operator(step)
        values = _finite_values(step_operator, step_operand)
        if values is not None:
            excludes = compile_exclusion(rule)
            return _of_finite([not excludes(value) for value in values])
        if not _admitted_kinds(step_operator, step_operand) & leaves_out:
            return Relation.INSIDE
        if {step_operator, operator} <= {*_STRING_SHAPES} and operator != step_operator:
            # A value of one form never passes the other's checks, so the deny finds
            # none of them outside it (docs/decisions/0066, section 3).
            return Relation.INSIDE
        if operator == "type" or operator in SHAPE_MODULES or step_operator == "argv":
            return _remember_deny(step, rule)
    except (TypeError, ValueError, LookupError, GlobSyntaxError, _Undecidable):
        return Relation.UNDECIDABLE  # not a validated constraint, or not decided
    return constraint_relation(step, rule)


def _remember_deny(step: Mapping[str, Any] | None, rule: Mapping[str, Any]) -> Relation:
    """The deny rows decided by a shape module, by type or by sampled values, remembered
    with the other relations (sampling a URL parses every sampled value)."""
    key = ("deny", None if step is None else _key(step), _key(rule))
    known = _REMEMBERED.get(key)
    if known is not None:
        return known
    operator, operand = _operator(rule)
    try:
        if step is None:
            # Some value provably outside the rule, besides the missing argument it matches.
            excludes = compile_exclusion(rule)
            some = any(excludes(value) for value in _probes([rule]))
            relation = Relation.OVERLAPPING if some else Relation.UNDECIDABLE
        elif operator in SHAPE_MODULES and operator == _operator(step)[0]:
            step_operand = _operator(step)[1]
            relation = _shape_relation(operator, step_operand, operand, deny=True)
        elif operator == "type":
            relation = _deny_type(step, operand)
        else:
            relation = _deny_by_probes(step, rule)
    except _SharedBudgetSpent:
        return Relation.UNDECIDABLE  # not remembered: asked alone, it may be decided
    except (_Undecidable, RecursionError):
        relation = Relation.UNDECIDABLE
    if len(_REMEMBERED) >= MAX_REMEMBERED:
        _REMEMBERED.clear()
    _REMEMBERED[key] = relation
    return relation


def _deny_type(step: Mapping[str, Any], expected: str) -> Relation:
    """A step against a deny on ``type``: it leaves out the values of another JSON type,
    except strings a tool may read as numbers against ``integer`` and ``number``."""
    step_operator, step_operand = _operator(step)
    if step_operator == "type" or step_operator in ("lte", "gte"):
        admitted = "number" if step_operator in ("lte", "gte") else step_operand
        if admitted == expected or (admitted == "integer" and expected == "number"):
            return Relation.INSIDE
        if admitted == "number" and expected == "integer":
            return Relation.OVERLAPPING  # 1 is matched, 0.5 left out
        if admitted == "string" and expected in ("integer", "number"):
            return Relation.OVERLAPPING  # "1" is matched, "a" left out
        return Relation.DISJOINT
    kinds = _admitted_kinds(step_operator, step_operand)
    if kinds == {"string"} and expected == "string":
        return Relation.INSIDE
    if expected not in ("string", "array", "integer", "number"):
        return Relation.DISJOINT  # strings and arrays are all of another type
    if expected == "array" and "array" not in kinds:
        return Relation.DISJOINT
    if expected in ("integer", "number") and step_operator in ("glob", "regex", "maxLength"):
        # The deny matches exactly the texts a tool may read as numbers: a regular language.
        budget = _Budget(NUMBER_TEXT_WORK, _SHARED.get())
        numbers = _number_texts()
        if step_operator == "maxLength":
            return _texts_within(step_operand, numbers, may_read_as_number, budget)
        budget.spend(len(step_operand))
        automaton = _pattern_automaton(step_operator, step_operand)
        step_matches = compile_constraint(step)
        return _patterns(automaton, numbers, step_matches, may_read_as_number, budget)
    return _deny_by_probes(step, {"type": expected})


@lru_cache(maxsize=1)
def _number_texts() -> _Automaton:
    """guard.deny.may_read_as_number's language: whitespace, byte order marks, whitespace
    (what its stripping removes), then nothing more, or an optional sign and a digit (any
    script's), a point and a digit, ``inf`` or ``nan`` in any case, then anything. The
    classes are read from Python's own ``re`` and ``str.strip`` over every code point."""
    everything = "".join(chr(code) for code in range(_SURROGATES_START)) + "".join(
        chr(code) for code in range(_SURROGATES_END + 1, _LAST + 1)
    )

    def code(index: int) -> int:
        return (
            index
            if index < _SURROGATES_START
            else index + _SURROGATES_END + 1 - (_SURROGATES_START)
        )

    def ranges(pattern: str) -> Ranges:
        found = re.finditer(pattern, everything)
        return _normalize([(code(run.start()), code(run.end() - 1)) for run in found])

    automaton = _Automaton()
    space = ranges(r"\s+")
    if any(not chr(low).isspace() or not chr(high).isspace() for low, high in space):
        raise _Undecidable("re and str.strip read whitespace otherwise")

    def one(members: Ranges) -> _Fragment:
        return _set_fragment(automaton, members)

    def word(text: str) -> _Fragment:
        return _concatenate(automaton, [one(ranges(f"(?i){letter}")) for letter in text])

    prefix = _concatenate(
        automaton,
        [
            _star(automaton, one(space)),
            _star(automaton, one(_single(0xFEFF))),
            _star(automaton, one(space)),
        ],
    )
    digit = ranges(r"\d+")
    head = _alternate(
        automaton,
        [
            one(digit),
            _concatenate(automaton, [one(_single(ord("."))), one(digit)]),
            word("inf"),
            word("nan"),
        ],
    )
    sign = _alternate(
        automaton, [one(_normalize([(0x2B, 0x2B), (0x2D, 0x2D)])), _empty_fragment(automaton)]
    )
    number = _concatenate(automaton, [sign, head, _star(automaton, one(_UNIVERSE))])
    body = _alternate(automaton, [number, _empty_fragment(automaton)])
    return _finish(automaton, _concatenate(automaton, [prefix, body]))


def _deny_by_probes(step: Mapping[str, Any], rule: Mapping[str, Any]) -> Relation:
    """Overlapping when sampled values the step admits show one the deny matches and one
    it leaves out; else undecidable (nothing is guessed)."""
    step_matches = compile_constraint(step)
    excludes = compile_exclusion(rule)
    admitted = [value for value in _probes([step, rule]) if step_matches(value)]
    matched = any(not excludes(value) for value in admitted)
    if matched and any(excludes(value) for value in admitted):
        return Relation.OVERLAPPING
    return Relation.UNDECIDABLE


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
    values = _finite_values(step_operator, step_operand)
    if values is not None:
        return _of_finite([rule_matches(value) for value in values])
    if step_operator in ("lte", "gte"):
        return _numbers(step_operator, step_operand, rule_operator, rule_operand, rule_matches)
    if step_operator == "type":
        return _of_type(step_operand, rule, budget)
    if step_operator == "maxLength":
        return _short_text(step_operand, rule, rule_matches, budget)
    if step_operator in SHAPE_MODULES:
        return _shape(step, rule, budget)
    # The step is a text pattern: only strings satisfy it.
    if rule_operator in ("lte", "gte"):
        return Relation.DISJOINT
    if rule_operator == "type":
        return Relation.INSIDE if rule_operand == "string" else Relation.DISJOINT
    step_matches = compile_constraint(step)
    if rule_operator == "maxLength":
        budget.spend(len(step_operand))
        step_automaton = _pattern_automaton(step_operator, step_operand)
        return _pattern_within(step_automaton, rule_operand, step_matches, rule_matches, budget)
    if rule_operator in SHAPE_MODULES:
        if _admits_no_text(step_operator, step_operand, budget):
            return Relation.DISJOINT
        return _by_probes(step, rule, budget)
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


def _of_type(expected: str, rule: Mapping[str, Any], budget: _Budget) -> Relation:
    """A step ``type`` (not ``boolean``, a finite set) admits infinitely many values of
    one JSON type."""
    rule_operator, rule_operand = _operator(rule)
    if rule_operator == "type":
        if rule_operand == expected or (expected == "integer" and rule_operand == "number"):
            return Relation.INSIDE
        if expected == "number" and rule_operand == "integer":
            return Relation.OVERLAPPING
        return Relation.DISJOINT
    if rule_operator in ("eq", "in"):
        members = [rule_operand] if rule_operator == "eq" else list(rule_operand)
        step_matches = compile_constraint({"type": expected})
        common = any(step_matches(member) for member in members)
        return Relation.OVERLAPPING if common else Relation.DISJOINT
    if rule_operator in ("lte", "gte"):
        numeric = expected in ("integer", "number")
        return Relation.OVERLAPPING if numeric else Relation.DISJOINT
    if not _KINDS_OF_TYPE[expected] & _admitted_kinds(rule_operator, rule_operand):
        return Relation.DISJOINT
    if rule_operator in ("glob", "regex"):
        return _decide({"glob": "*"}, rule, budget)  # every text, as an automaton
    if rule_operator == "maxLength":
        return Relation.OVERLAPPING  # "" satisfies it, a longer text does not
    return _by_probes({"type": expected}, rule, budget)


def _short_text(
    limit: int, rule: Mapping[str, Any], rule_matches: Callable[[Any], bool], budget: _Budget
) -> Relation:
    """A step ``maxLength`` (above 0): every valid text of at most `limit` code points."""
    rule_operator, rule_operand = _operator(rule)
    if rule_operator in ("lte", "gte"):
        return Relation.DISJOINT
    if rule_operator == "type":
        return Relation.INSIDE if rule_operand == "string" else Relation.DISJOINT
    if rule_operator == "maxLength":
        return Relation.INSIDE if limit <= rule_operand else Relation.OVERLAPPING
    if rule_operator in ("eq", "in"):
        members = [rule_operand] if rule_operator == "eq" else list(rule_operand)
        step_matches = compile_constraint({"maxLength": limit})
        common = any(step_matches(member) for member in members)
        return Relation.OVERLAPPING if common else Relation.DISJOINT
    if rule_operator in ("glob", "regex"):
        budget.spend(len(rule_operand))
        automaton = _pattern_automaton(rule_operator, rule_operand)
        return _texts_within(limit, automaton, rule_matches, budget)
    return _by_probes({"maxLength": limit}, rule, budget)


def _shape(step: Mapping[str, Any], rule: Mapping[str, Any], budget: _Budget) -> Relation:
    """A step of a shape operator (``subpath``, ``url``, ``cidr``, ``argv``)."""
    step_operator, step_operand = _operator(step)
    rule_operator, rule_operand = _operator(rule)
    if rule_operator == step_operator:
        budget.spend(len(describe_constraint(step)) + len(describe_constraint(rule)))
        return _shape_relation(step_operator, step_operand, rule_operand, deny=False)
    if step_operator in _STRING_SHAPES and rule_operator in _STRING_SHAPES:
        return Relation.DISJOINT  # "/...", "scheme://..." and IP literals never meet
    if rule_operator in ("lte", "gte"):
        return Relation.DISJOINT
    step_matches = compile_constraint(step)
    if rule_operator in ("eq", "in"):
        members = [rule_operand] if rule_operator == "eq" else list(rule_operand)
        if not any(step_matches(member) for member in members):
            return Relation.DISJOINT
        return _by_probes(step, rule, budget)
    kinds = _admitted_kinds(step_operator, step_operand)
    if not kinds & _admitted_kinds(rule_operator, rule_operand):
        return Relation.DISJOINT
    if rule_operator == "type" and kinds == {"string"}:
        return Relation.INSIDE
    if rule_operator in ("glob", "regex") and _admits_no_text(rule_operator, rule_operand, budget):
        return Relation.DISJOINT
    return _by_probes(step, rule, budget)


def _admits_no_text(operator: str, pattern: str, budget: _Budget) -> bool:
    """True when a glob or regex provably admits no text at all (so no value of a shape
    operator); False when it admits some, or its regex is not modelled."""
    budget.spend(len(pattern))
    try:
        automaton = _pattern_automaton(operator, pattern)
    except _Undecidable:
        return False  # not modelled: sampled values may still decide
    return _shortest_accepted(automaton, budget) is None


def _shape_relation(operator: str, step: Any, rule: Any, *, deny: bool) -> Relation:
    """The shape module's own answer for two operands of its operator."""
    module = shape_module(operator)
    try:
        answer = module.deny_relation(step, rule) if deny else module.relation(step, rule)
        return Relation(answer)
    except Exception as error:  # an answer the module should not give: claim nothing
        raise _Undecidable("the shape module gave no relation") from error


#: values tried by the relations decided by sampling (with those of the constraints)
_PROBES: Final[tuple[Any, ...]] = (
    *("", " ", "a", "1", "-1.5", "/", "/a", "//a", "/plangate/probe", "a/b", "a b"),
    *("https://plangate.invalid/", "http://127.0.0.1/", "10.0.0.1", "::1", "255.255.255.255"),
    *("git", "git status", "ls -l"),
    *([], ["git"], ["git", "status"], [""], 0, 1, 0.5, True, None, {}),
)
_PROBES_PER_PATTERN: Final = 12
_PADDED_SAMPLES: Final = 4  # a padding may hold a million characters


def _probes(constraints: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Values to try: fixed ones, those the constraints name or sample (a shape module's
    `samples`, a pattern's shortest and random texts), and variations of them."""
    values: list[Any] = list(_PROBES)
    shape_texts: list[str] = []
    longest = 0
    for constraint in constraints:
        operator, operand = _operator(constraint)
        if operator == "eq":
            values.append(operand)
        elif operator == "in":
            values.extend(operand)
        elif operator == "maxLength":
            longest = max(longest, operand)
            values.extend(("a" * operand, "/" + "a" * operand))
        elif operator in SHAPE_MODULES:
            try:
                samples = list(shape_module(operator).samples(operand))
            except Exception:  # a module without samples proves nothing
                samples = []
            values.extend(samples)
            values.extend(" ".join(sample) for sample in samples if _strings(sample))
            shape_texts.extend(sample for sample in samples if isinstance(sample, str))
        elif operator in ("glob", "regex"):
            values.extend(_pattern_samples(operator, operand))
    if longest:  # texts of the shapes longer than the limit, to show one outside it
        padding = "a" * (longest + 1)
        for sample in shape_texts[:_PADDED_SAMPLES]:
            values.extend((f"{sample}/{padding}", f"{sample}?{padding}"))
    for sample in shape_texts[:_PROBES_PER_PATTERN]:
        values.extend((f"{sample}/probe", f"{sample}a", f"{sample} -x", sample[:-1]))
        values.extend((f"/{sample}", f"{sample}/", f"{sample}/./probe", f" {sample}"))
    return values


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _pattern_samples(operator: str, pattern: str) -> list[str]:
    """The shortest text a glob or regex admits and a few random ones ([] for a regex not
    modelled); each is checked by the real matchers wherever it proves something."""
    try:
        automaton = _pattern_automaton(operator, pattern)
        shortest = _shortest_accepted(automaton, _Budget(RELATION_WORK))
    except _Undecidable:
        return []
    if shortest is None:
        return []
    generator = random.Random(pattern)
    texts = [shortest]
    for _ in range(_PROBES_PER_PATTERN):
        text = _random_accepted(automaton, generator)
        if text is not None:
            texts.append(text)
    return texts


def _by_probes(step: Mapping[str, Any], rule: Mapping[str, Any], budget: _Budget) -> Relation:
    """Overlapping when sampled values show one the step admits that the rule admits and
    one that it does not; else undecidable (nothing is guessed)."""
    step_matches = compile_constraint(step)
    rule_matches = compile_constraint(rule)
    values = _probes([step, rule])
    budget.spend(len(values))
    admitted = [value for value in values if step_matches(value)]
    if any(rule_matches(value) for value in admitted) and not all(
        rule_matches(value) for value in admitted
    ):
        return Relation.OVERLAPPING
    raise _Undecidable("no sampled value decides it")


def _of_finite(results: Sequence[bool]) -> Relation:
    if all(results):
        return Relation.INSIDE
    if not any(results):
        return Relation.DISJOINT
    return Relation.OVERLAPPING


def _unpinned(operator: str, operand: Any, budget: _Budget) -> Relation:
    """Any value may come: a rule constraint always leaves some value out (another JSON
    type), so the answer turns on whether some value satisfies it."""
    if operator in ("eq", "in", "lte", "gte", "type", "maxLength"):
        return Relation.OVERLAPPING
    if operator in SHAPE_MODULES:
        matches = compile_constraint({operator: operand})
        if any(matches(value) for value in _probes([{operator: operand}])):
            return Relation.OVERLAPPING
        raise _Undecidable("no sampled value satisfies the rule")
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
    if rule_operator == "type":
        if rule_operand == "number":
            return Relation.INSIDE
        return Relation.OVERLAPPING if rule_operand == "integer" else Relation.DISJOINT
    if rule_operator in ("glob", "regex", "maxLength", *SHAPE_MODULES):
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


def _texts_within(
    limit: int, automaton: _Automaton, matches: Callable[[Any], bool], budget: _Budget
) -> Relation:
    """Every valid text of at most `limit` code points against a pattern's automaton: a
    breadth-first search of the automaton's state sets, one level per length, that stops
    at `limit` (or when no new set is found) with the first text reaching an accepting set
    and the first reaching one that is not."""
    start = automaton.closure([automaton.start], budget)
    level: dict[frozenset[int], str] = {start: ""}
    seen = {start}
    accepted: str | None = None
    rejected: str | None = None
    depth = 0
    while level:
        for states, text in level.items():
            if automaton.accept in states:
                accepted = text if accepted is None else accepted
            else:
                rejected = text if rejected is None else rejected
        if (accepted is not None and rejected is not None) or depth == limit:
            break
        following: dict[frozenset[int], str] = {}
        for states, text in level.items():
            moves = [move for state in states for move in automaton.moves[state]]
            budget.spend(1 + len(states) + len(moves))
            for low, targets in _split(_UNIVERSE, moves, budget):
                reached = automaton.closure(targets, budget)
                if reached not in seen:
                    if len(seen) >= MAX_SEARCH:
                        raise _Undecidable("the search is over its budget")
                    seen.add(reached)
                    following[reached] = text + chr(low)
        level = following
        depth += 1
    if accepted is None:
        return Relation.DISJOINT
    if not matches(accepted) or (rejected is not None and matches(rejected)):
        raise _Undecidable("the automaton and the matcher disagree")
    return Relation.INSIDE if rejected is None else Relation.OVERLAPPING


def _pattern_within(
    automaton: _Automaton,
    limit: int,
    step_matches: Callable[[Any], bool],
    rule_matches: Callable[[Any], bool],
    budget: _Budget,
) -> Relation:
    """A pattern's texts against ``maxLength limit``: inside when the longest text it
    admits has at most `limit` code points, disjoint when the shortest has more."""
    shortest, longer = _lengths(automaton, limit, budget)
    if shortest is None or len(shortest) > limit:
        if shortest is not None and not step_matches(shortest):
            raise _Undecidable("the automaton and the matcher disagree")
        return Relation.DISJOINT
    if not (step_matches(shortest) and rule_matches(shortest)):
        raise _Undecidable("the automaton and the matcher disagree")
    if longer is None:
        return Relation.INSIDE
    if not step_matches(longer) or rule_matches(longer):
        raise _Undecidable("the automaton and the matcher disagree")
    return Relation.OVERLAPPING


_Edge = tuple[int, str | None]


def _lengths(automaton: _Automaton, limit: int, budget: _Budget) -> tuple[str | None, str | None]:
    """The shortest text the automaton accepts (None when none) and one longer than
    `limit` (None when every accepted text has at most `limit` code points)."""
    count = len(automaton.moves)
    forward: list[list[_Edge]] = [
        [(target, None) for target in automaton.epsilon[state]]
        + [(target, chr(ranges[0][0])) for ranges, target in automaton.moves[state]]
        for state in range(count)
    ]
    budget.spend(count + sum(len(edges) for edges in forward))
    backward: list[list[int]] = [[] for _ in range(count)]
    for state, edges in enumerate(forward):
        for target, _character in edges:
            backward[target].append(state)
    ahead = _reach([automaton.start], forward)
    behind = _reach([automaton.accept], [[(state, None) for state in b] for b in backward])
    useful = ahead & behind
    if automaton.accept not in useful:
        return None, None
    shortest = _shortest_path(forward, automaton.start, {automaton.accept}, useful)
    assert shortest is not None
    component = _components(forward, useful)
    # A move inside a strongly connected component repeats: texts of every length.
    for state in useful:
        for target, character in forward[state]:
            if character is None or target not in useful:
                continue
            if component[state] == component[target]:
                head = _shortest_path(forward, automaton.start, {state}, useful)
                loop = _shortest_path(forward, target, {state}, useful)
                tail = _shortest_path(forward, state, {automaton.accept}, useful)
                assert head is not None and loop is not None and tail is not None
                cycle = character + loop
                repeats = limit // len(cycle) + 1
                return shortest, head + cycle * repeats + tail
    longest = _longest_path(forward, automaton.start, automaton.accept, useful, component)
    return shortest, (longest if len(longest) > limit else None)


def _reach(starts: Sequence[int], edges: Sequence[Sequence[_Edge]]) -> set[int]:
    seen = set(starts)
    stack = list(starts)
    while stack:
        for target, _character in edges[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def _shortest_path(
    edges: Sequence[Sequence[_Edge]], start: int, goals: set[int], useful: set[int]
) -> str | None:
    """The fewest characters from `start` to a goal (a breadth-first search over 0-1
    weights: an empty move goes to the front of the queue)."""
    distance = {start: 0}
    parents: dict[int, tuple[int, str | None]] = {}
    queue = deque([start])
    done: set[int] = set()
    while queue:
        state = queue.popleft()
        if state in done:
            continue
        done.add(state)
        if state in goals:
            return _path(parents, state)
        for target, character in edges[state]:
            if target not in useful:
                continue
            cost = distance[state] + (0 if character is None else 1)
            if cost < distance.get(target, cost + 1):
                distance[target] = cost
                parents[target] = (state, character)
                if character is None:
                    queue.appendleft(target)
                else:
                    queue.append(target)
    return None


def _components(edges: Sequence[Sequence[_Edge]], useful: set[int]) -> dict[int, int]:
    """Strongly connected components of the useful states (Kosaraju, iteratively), numbered
    in topological order of the condensed graph."""
    order: list[int] = []
    visited: set[int] = set()
    for root in sorted(useful):
        if root in visited:
            continue
        visited.add(root)
        stack: list[tuple[int, int]] = [(root, 0)]
        while stack:
            state, index = stack.pop()
            targets = [t for t, _c in edges[state] if t in useful]
            if index < len(targets):
                stack.append((state, index + 1))
                target = targets[index]
                if target not in visited:
                    visited.add(target)
                    stack.append((target, 0))
            else:
                order.append(state)
    reverse: dict[int, list[int]] = {state: [] for state in useful}
    for state in useful:
        for target, _character in edges[state]:
            if target in useful:
                reverse[target].append(state)
    component: dict[int, int] = {}
    number = 0
    for root in reversed(order):
        if root in component:
            continue
        component[root] = number
        stack_states = [root]
        while stack_states:
            state = stack_states.pop()
            for source in reverse[state]:
                if source not in component:
                    component[source] = number
                    stack_states.append(source)
        number += 1
    return component


def _longest_path(
    edges: Sequence[Sequence[_Edge]],
    start: int,
    accept: int,
    useful: set[int],
    component: Mapping[int, int],
) -> str:
    """The longest text from `start` to `accept` when no character move lies on a cycle:
    components in topological order, each reachable by empty moves inside."""
    best: dict[int, str] = {component[start]: ""}
    members: dict[int, list[int]] = {}
    for state in useful:
        members.setdefault(component[state], []).append(state)
    for number in sorted(members):
        if number not in best:
            continue
        text = best[number]
        for state in members[number]:
            for target, character in edges[state]:
                if target not in useful or component[target] == number:
                    continue
                candidate = text + (character or "")
                known = best.get(component[target])
                if known is None or len(candidate) > len(known):
                    best[component[target]] = candidate
    return best[component[accept]]


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
