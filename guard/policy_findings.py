"""Rules of a validated policy that can never take effect (`policy_findings`): shown before a
document is published, so that a rule which looks like protection, or like a permission, is
not believed to be one.

Two findings, each about one allow or review rule (guard.policy_evaluation's semantics):

``allow_shadowed`` -- an allow rule that never admits a call, for any member.
    Deny rules win over allow rules at issuance and at call time, so an allow rule never
    takes effect when, for every member it applies to, every tool it names and every call
    it admits is also forbidden by a deny rule. That holds when, for each of its tool
    globs, some deny rule (several rules may share the globs between them):

    * applies to every member the allow rule applies to: the deny rule names no ``roles``
      (or the allow rule's ``roles`` are all among them), and likewise for ``groups``;
    * names a tool glob matching every tool the allow rule's glob matches (the same glob
      language, decided by guard.relation: ``inside``);
    * has no ``args``; or, for each argument it constrains, the allow rule constrains that
      argument too, to values all inside the deny rule's constraint (guard.relation). A deny
      rule fails closed (guard.deny), so such a call is always refused; an argument the
      allow rule leaves free may take a value outside the deny rule's, and then the allow
      rule does admit a call. An allow rule with ``"additionalArgs": false`` (policy
      version 2) admits no call passing an argument it does not name, so every call it
      admits lacks such an argument, which the deny rule matches (failing closed).

``review_never_applies`` -- a review rule that never asks anyone anything, for one of:

    * the allow case above holds for it (a deny rule without ``args`` then refuses every
      step it would send to a person at issuance; one with ``args`` refuses every call a
      person would have approved);
    * its ``roles`` name no role the team has, or its ``groups`` no group the team has:
      then it applies to no member (names match exactly). Known only when the caller gives
      the team's names.

Anything the relation cannot decide (``overlapping``, ``undecidable``) is not a finding: a
finding is a certainty, never a guess. An allow rule naming roles or groups the team lacks is
not one either: the reference warnings of the control plane already name each such name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from guard.patterns import compile_glob
from guard.relation import Relation, constraint_relation, describe_constraint

__all__ = [
    "ALLOW_SHADOWED",
    "REVIEW_NEVER_APPLIES",
    "RuleFinding",
    "policy_findings",
]

#: an allow rule that never admits a call, for any member
ALLOW_SHADOWED: Final = "allow_shadowed"
#: a review rule that never asks a person anything
REVIEW_NEVER_APPLIES: Final = "review_never_applies"

_GLOB_METACHARACTERS: Final = frozenset("*?[")
# Pattern-against-pattern comparisons one call may make (each builds automata); beyond it a
# rule is not reported. A policy has at most 500 rules of 100 globs each.
MAX_PATTERN_COMPARISONS: Final = 20_000


@dataclass(frozen=True)
class RuleFinding:
    """A rule (``rules[rule]``) that never takes effect: ``code`` says which way, ``by``
    the deny rules that shadow it (empty when it applies to no member), ``detail`` says it
    in words."""

    rule: int
    code: str
    by: tuple[int, ...]
    detail: str

    @property
    def path(self) -> str:
        return f"rules[{self.rule}]"


def _label(rule: Mapping[str, Any], index: int) -> str:
    name = rule.get("name")
    named = f' "{name}"' if name else ""
    return f"{rule['effect']} rule{named} (rules[{index}])"


def _covers_members(deny: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    """Whether ``deny`` applies to every member ``rule`` applies to."""
    for field in ("roles", "groups"):
        denied = deny.get(field)
        if denied is None:
            continue
        named = rule.get(field)
        if named is None or not set(named) <= set(denied):
            return False
    return True


def _covers_calls(deny: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    """Whether every call ``rule`` admits satisfies ``deny``'s ``args`` (failing closed)."""
    denied: Mapping[str, Any] = deny.get("args") or {}
    admitted: Mapping[str, Any] = rule.get("args") or {}
    closed = rule.get("additionalArgs") is False  # its calls pass no other argument
    return all(
        constraint_relation(admitted[name], constraint) is Relation.INSIDE
        if name in admitted
        else closed
        for name, constraint in denied.items()
    )


class _Budget:
    def __init__(self) -> None:
        self.left = MAX_PATTERN_COMPARISONS

    def spend(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _glob_inside(glob: str, other: str, budget: _Budget) -> bool:
    """Whether every tool name ``glob`` matches, ``other`` matches too."""
    if glob == other or set(other) == {"*"}:
        return True
    if _GLOB_METACHARACTERS.isdisjoint(glob):
        return compile_glob(other)(glob)  # one tool name: exact
    if _GLOB_METACHARACTERS.isdisjoint(other) or not budget.spend():
        return False  # a pattern is never inside one name; or out of budget: no claim
    return constraint_relation({"glob": glob}, {"glob": other}) is Relation.INSIDE


def _shadowing(
    rule: Mapping[str, Any], denies: Sequence[tuple[int, Mapping[str, Any]]], budget: _Budget
) -> tuple[int, ...] | None:
    """The deny rules that together forbid everything ``rule`` admits, or None."""
    candidates = [
        (index, deny)
        for index, deny in denies
        if _covers_members(deny, rule) and _covers_calls(deny, rule)
    ]
    if not candidates:
        return None
    by: list[int] = []
    for glob in rule["tools"]:
        index = next(
            (
                index
                for index, deny in candidates
                if any(_glob_inside(glob, other, budget) for other in deny["tools"])
            ),
            None,
        )
        if index is None:
            return None
        if index not in by:
            by.append(index)
    return tuple(by)


def _missing_names(
    rule: Mapping[str, Any], roles: Collection[str] | None, groups: Collection[str] | None
) -> str | None:
    for field, what, known in (("roles", "role", roles), ("groups", "group", groups)):
        named = rule.get(field)
        if named is None or known is None or any(name in known for name in named):
            continue
        listed = ", ".join(f'"{name}"' for name in named)
        return f"it names no {what} the team has ({listed}), so it applies to no member"
    return None


def _shadow_detail(
    rule: Mapping[str, Any], index: int, by: tuple[int, ...], rules: Sequence[Mapping[str, Any]]
) -> str:
    denies = " and ".join(_label(rules[other], other) for other in by)
    forbid, refuse = ("forbids", "refuses") if len(by) == 1 else ("forbid", "refuse")
    with_args = [other for other in by if rules[other].get("args")]
    tools = ", ".join(rule["tools"])
    if rule["effect"] == "review":
        if with_args:
            conditions = "; ".join(
                f"{name} {describe_constraint(constraint)}"
                for other in with_args
                for name, constraint in rules[other]["args"].items()
            )
            return (
                f"{_label(rule, index)} never admits a call: {denies} {forbid} every call"
                f" of {tools} it would admit ({conditions}) for every member it applies to,"
                " so what a person approves under it is refused anyway"
            )
        return (
            f"{_label(rule, index)} never asks anyone: {denies} {refuse} every step of"
            f" {tools} at issuance for every member it applies to"
        )
    if with_args:
        return (
            f"{_label(rule, index)} never admits a call: every call of {tools} it admits"
            f" is forbidden by {denies} for every member it applies to"
        )
    return (
        f"{_label(rule, index)} never admits a call: {denies} {forbid} every tool it names"
        f" ({tools}) for every member it applies to"
    )


def policy_findings(
    policy: Mapping[str, Any],
    *,
    roles: Collection[str] | None = None,
    groups: Collection[str] | None = None,
) -> list[RuleFinding]:
    """The allow and review rules of a validated policy that never take effect, in rule
    order, at most one finding per rule. ``roles`` and ``groups`` are the names the team
    has (None: unknown, and no rule is judged by them)."""
    rules: Sequence[Mapping[str, Any]] = policy.get("rules", ())
    denies = [(index, rule) for index, rule in enumerate(rules) if rule["effect"] == "deny"]
    budget = _Budget()
    findings: list[RuleFinding] = []
    for index, rule in enumerate(rules):
        effect = rule["effect"]
        if effect == "deny":
            continue
        code = ALLOW_SHADOWED if effect == "allow" else REVIEW_NEVER_APPLIES
        by = _shadowing(rule, denies, budget) if denies else None
        if by is not None:
            detail = _shadow_detail(rule, index, by, rules)
            findings.append(RuleFinding(index, code, by, detail))
            continue
        if effect != "review":
            continue
        missing = _missing_names(rule, roles, groups)
        if missing is not None:
            detail = f"{_label(rule, index)} never asks anyone: {missing}"
            findings.append(RuleFinding(index, REVIEW_NEVER_APPLIES, (), detail))
    return findings
