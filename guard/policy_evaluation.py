"""What a validated policy (guard.policy) decides: the issuance check of a plan
(`evaluate_plan`) and the call-time check (`CompiledPolicy.decide`).

Rule semantics, shared by both checks:

* A rule applies to a member when its `roles` (if any) contain the member's role and its
  `groups` (if any) share at least one group with the member; with both, both must hold.
* A rule concerns a tool when one of its `tools` globs matches the tool name.
* A deny wins over any allow; with no allow, the policy `default` decides.
* A review rule is an allow rule everywhere here (its `maxCalls` caps a step the same way);
  that the plan then needs a person's approval first is guard.policy_review's. At call
  time a review rule admits like an allow: a token exists only for an approved plan.

At issuance a deny rule refuses a step when it has no `args`, or when the step pins every
argument it constrains to values inside its constraint, read the fail-closed way
(guard.relation.deny_relation: every call of the step is refused); an allow rule admits a
step unless the step pins an argument to values disjoint from the rule's constraint on it
(guard.relation: no call of the step could pass), and its `maxCalls` caps the step's budget.
Where an admitting rule admits only some of the step's calls, or a deny rule refuses some
of them, `plan_argument_warnings` says so, with the argument's path. At call time, an
allow rule counts only when the call satisfies its `args`; a deny rule fails closed and
counts unless some pinned argument is provably outside its constraint (missing, of another
JSON type than its operator compares, or not a finite number all count as a match; see
guard.deny).

Version 2 (docs/decisions/0066). A plan step with ``"additionalArgs": false`` passes only
the arguments it pins (and those its budgets count): an argument it leaves out is absent
from every call, which no allow rule constraining it admits (``disjoint``) and every deny
rule constraining it matches (``inside``, failing closed). A budgeted argument is present
in every call of the step, a number from 0 to the smallest ``max`` of the budgets over it
covering the step (a larger amount is blocked), and the relation reads it so. A policy allow
rule with ``"additionalArgs": false`` admits a call only when the rule pins every argument
of the call; against a step it admits every call only when the step is closed too and
names no argument the rule does not (none at all when the step pins or budgets one the rule
does not name: every call carries it), else some. An allow rule's ``"maxSum": {"amount":
1000}`` holds a step it admits to a plan budget over ``amount`` covering the step whose
``max`` is at most 1000, else the step is refused at issuance and refresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from guard._document import is_number, key_path
from guard.constraints import ArgsMatcher, compile_args
from guard.decisions import MAX_EVENT_RULE_DESCRIPTION_LENGTH
from guard.deny import compile_deny_args
from guard.errors import FieldError
from guard.patterns import compile_glob
from guard.plan import DEFAULT_MAX_CALLS
from guard.relation import (
    Relation,
    constraint_relation,
    deny_relation,
    describe_constraint,
    relation_budget,
)
from guard.rule_index import RuleIndex, build_rule_index

__all__ = [
    "MAX_CACHED_TOOLS",
    "POLICY_ARGUMENT_OVERLAPS",
    "POLICY_ARGUMENT_UNDECIDABLE",
    "POLICY_DENY_OVERLAPS",
    "POLICY_DENY_UNDECIDABLE",
    "UNPINNED_POLICY_ARGUMENT",
    "ArgumentRelation",
    "CompiledPolicy",
    "PolicyDecision",
    "StepDenial",
    "StepWarning",
    "ToolDecision",
    "evaluate_plan",
    "plan_argument_warnings",
    "rule_description",
    "step_alone",
    "step_deny_relation",
    "step_rule_relation",
    "unpinned_policy_arguments",
]

# Bounds the per-tool cache of CompiledPolicy against an agent inventing tool names.
MAX_CACHED_TOOLS: Final = 4096

#: the code of a StepWarning: the step leaves free an argument every admitting rule constrains
UNPINNED_POLICY_ARGUMENT: Final = "unpinned_policy_argument"
#: the code of a StepWarning: the step pins an argument the admitting rules admit only in part
POLICY_ARGUMENT_OVERLAPS: Final = "policy_argument_overlaps"
#: the code of a StepWarning: whether the admitting rules admit the step's pinned values
#: cannot be decided (guard.relation), so some calls may be refused
POLICY_ARGUMENT_UNDECIDABLE: Final = "policy_argument_undecidable"
#: the code of a StepWarning: a deny rule with `args` refuses some of the step's calls (those
#: whose values, or missing arguments, it matches) and not others
POLICY_DENY_OVERLAPS: Final = "policy_deny_overlaps"
#: the code of a StepWarning: whether a deny rule with `args` refuses the step's calls cannot
#: be decided (guard.relation), so some calls may be refused
POLICY_DENY_UNDECIDABLE: Final = "policy_deny_undecidable"
# A warning or a denial names this many of the admitting rules, then counts the rest.
_RULES_NAMED_IN_A_WARNING: Final = 5


def _argument_path(step: int, argument: str | None) -> str:
    """``steps[0]``, or ``steps[0].args.repo`` for one argument of the step."""
    path = f"steps[{step}]"
    return path if argument is None else key_path(f"{path}.args", argument)


class _Cover(NamedTuple):
    """The tightest plan budget over one argument covering a step: its ``max`` and ``id``."""

    most: float
    budget: str


class _StepShape(NamedTuple):
    """What a plan step lets a call pass: its pinned ``args``, whether it is closed
    (``additionalArgs`` false: no other argument), the budgets over its arguments, and
    their ``max`` alone (`ceilings`, as the relations read them)."""

    args: Mapping[str, Any]
    closed: bool
    budgets: Mapping[str, _Cover]
    ceilings: Mapping[str, float]


_NO_BUDGETS: Final[Mapping[str, Any]] = MappingProxyType({})


def _step_shapes(plan: Mapping[str, Any]) -> list[_StepShape]:
    """Each step's `_StepShape`, in order; a version-1 plan's steps are open, unbudgeted."""
    if not plan.get("budgets"):
        return [
            _StepShape(
                step.get("args") or {},
                step.get("additionalArgs", True) is False,
                _NO_BUDGETS,
                _NO_BUDGETS,
            )
            for step in plan["steps"]
        ]
    covers: dict[str, dict[str, _Cover]] = {}
    for budget in plan.get("budgets", ()):
        for step_id in budget["steps"]:
            by_argument = covers.setdefault(step_id, {})
            known = by_argument.get(budget["arg"])
            if known is None or budget["max"] < known.most:
                by_argument[budget["arg"]] = _Cover(budget["max"], budget["id"])
    shapes = []
    for step in plan["steps"]:
        budgets = covers.get(step["id"], {}) if "id" in step else {}
        shapes.append(
            _StepShape(
                step.get("args") or {},
                step.get("additionalArgs", True) is False,
                budgets,
                {name: cover.most for name, cover in budgets.items()},
            )
        )
    return shapes


def step_alone(plan: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The plan of step ``index`` alone, with the budgets covering it (over that one step),
    which is all `evaluate_plan` and `plan_argument_warnings` read to judge that step:
    ``{"steps": [step]}`` for a step no budget covers, as the impact preview always asked."""
    step = plan["steps"][index]
    step_id = step.get("id")
    budgets = [
        {**budget, "steps": [step_id]}
        for budget in plan.get("budgets", ())
        if step_id is not None and step_id in budget["steps"]
    ]
    return {"steps": [step], "budgets": budgets} if budgets else {"steps": [step]}


@dataclass(frozen=True)
class StepDenial:
    """Why the policy refuses one plan step at issuance. `rule` None means the default.
    `argument` names the pinned argument no admitting rule lets through, when that is why."""

    step: int
    tool: str
    rule: int | None
    reason: str
    argument: str | None = None

    @property
    def path(self) -> str:
        return _argument_path(self.step, self.argument)

    def error(self) -> FieldError:
        """The ``policy_denied`` answer's entry for this step, at ``plan.steps[i]`` (a path:
        the index, from 0), its text naming the step as people count it, from 1, with the
        tool, the reason and the rule."""
        rule = "policy default" if self.rule is None else f"rules[{self.rule}]"
        return FieldError(
            f"plan.{self.path}", f"step {self.step + 1} ({self.tool}): {self.reason} ({rule})"
        )


@dataclass(frozen=True)
class PolicyDecision:
    """The policy's verdict on one call. `rule` None means the policy default decided;
    `description` names the rule (or the default) for the decision log: the rule's own
    ``description`` or ``name``, else its effect and tools (see `rule_description`)."""

    allowed: bool
    rule: int | None
    reason: str
    description: str = field(default="", compare=False)  # a label: not part of the verdict


@dataclass(frozen=True)
class _Rule:
    index: int
    deny: bool
    review: bool
    tools: tuple[Callable[[Any], bool], ...]
    args: ArgsMatcher | None  # None: the rule matches every call of its tools
    pinned: Mapping[str, Any] | None  # the validated ``args`` the matcher was compiled from
    max_calls: int | None
    label: str
    description: str
    closed: bool = False  # an allow rule's ``additionalArgs`` false: no argument it leaves out
    max_sum: Mapping[str, float] | None = None  # an allow rule's ``maxSum``

    def concerns(self, tool: str) -> bool:
        return any(matches(tool) for matches in self.tools)


def _label(rule: Mapping[str, Any]) -> str:
    """``deny rule "no deletes"``, or ``deny rule`` for an unnamed one (callers add the
    rule's index themselves)."""
    name = rule.get("name")
    return f'{rule["effect"]} rule "{name}"' if name else f"{rule['effect']} rule"


def rule_description(rule: Mapping[str, Any], index: int) -> str:
    """How the decision log names a rule: its ``description``, else its ``name``, else its
    effect and tool globs, with its index: ``allow github_* (rules[0])``. At most
    MAX_EVENT_RULE_DESCRIPTION_LENGTH characters."""
    text = " ".join(str(rule.get("description") or "").split())
    if not text:
        name = rule.get("name")
        text = (
            f'{rule["effect"]} "{name}"' if name else f"{rule['effect']} {', '.join(rule['tools'])}"
        )
    suffix = f" (rules[{index}])"
    room = MAX_EVENT_RULE_DESCRIPTION_LENGTH - len(suffix)
    if len(text) > room:
        text = text[: room - 3] + "..."
    return text + suffix


def _applicable_rules(
    policy: Mapping[str, Any], role: str | None, groups: Sequence[str]
) -> list[_Rule]:
    """The policy's rules that apply to a member with `role` and `groups`, compiled."""
    member_groups = frozenset(groups)
    compiled = []
    for index, rule in enumerate(policy.get("rules", ())):
        roles = rule.get("roles")
        if roles is not None and role not in roles:
            continue
        rule_groups = rule.get("groups")
        if rule_groups is not None and member_groups.isdisjoint(rule_groups):
            continue
        args = rule.get("args")
        deny = rule["effect"] == "deny"
        # A deny rule fails closed: it is passed over only for a call whose pinned
        # arguments are provably outside it (guard.deny.compile_deny_args).
        matcher = (compile_deny_args(args) if deny else compile_args(args)) if args else None
        closed = not deny and rule.get("additionalArgs") is False
        if closed:
            matcher = _closed_matcher(frozenset(args or ()), matcher)
        compiled.append(
            _Rule(
                index=index,
                deny=deny,
                review=rule["effect"] == "review",
                tools=tuple(compile_glob(glob) for glob in rule["tools"]),
                args=matcher,
                pinned=args or None,
                max_calls=rule.get("maxCalls"),
                label=_label(rule),
                description=rule_description(rule, index),
                closed=closed,
                max_sum=None if deny else rule.get("maxSum"),
            )
        )
    return compiled


def _closed_matcher(names: frozenset[str], matcher: ArgsMatcher | None) -> ArgsMatcher:
    """An allow rule with ``additionalArgs`` false: the call passes no argument outside
    ``names`` (those the rule pins), and satisfies ``matcher`` (None: nothing more)."""

    def match_closed(call_args: Any) -> bool:
        try:
            if type(call_args) is not dict and not isinstance(call_args, Mapping):
                return False
            for name in call_args:
                if name not in names:
                    return False
            return matcher is None or matcher(call_args)
        except Exception:  # a hostile Mapping must not break the guard
            return False

    return match_closed


@dataclass(frozen=True)
class ArgumentRelation:
    """How one argument of a step stands to a rule's constraint on it (guard.relation):
    `step` is the step's constraint, None when the step does not pin it.

    Version 2: `absent` when a closed step (``additionalArgs`` false) leaves the argument
    out of every call; `budget` the smallest ``max`` of the plan budgets over the argument
    covering the step (a call passes a number from 0 to it). `rule` None: a closed rule
    (``additionalArgs`` false) does not name the argument, so it admits no call passing it;
    `argument` None as well: the step lets a call pass arguments the closed rule does not
    name."""

    argument: str | None
    step: Mapping[str, Any] | None
    rule: Mapping[str, Any] | None
    relation: Relation
    absent: bool = False
    budget: float | None = None


_Relate = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], Relation]


def _interval_relation(
    low: float, high: float, rule: Mapping[str, Any], relate: _Relate
) -> Relation:
    """`relate` for the numbers from ``low`` to ``high`` (``low < high``): a subset of the
    numbers at least ``low`` and of those at most ``high``, so inside when one of them is,
    disjoint when one of them is; against the finite members of ``eq`` / ``in`` the
    interval holds more values than they, so it is disjoint or overlapping by whether one
    lies in it; against bounds and types the two answers are then exact."""
    lower = relate({"gte": low}, rule)
    upper = relate({"lte": high}, rule)
    if Relation.INSIDE in (lower, upper):
        return Relation.INSIDE
    if Relation.DISJOINT in (lower, upper):
        return Relation.DISJOINT
    ((operator, operand),) = rule.items()
    if operator in ("eq", "in"):
        members = [operand] if operator == "eq" else list(operand)
        if any(is_number(member) and low <= member <= high for member in members):
            return Relation.OVERLAPPING
        return Relation.DISJOINT
    if Relation.UNDECIDABLE in (lower, upper):
        return Relation.UNDECIDABLE
    return Relation.OVERLAPPING


def _budgeted_relation(
    step: Mapping[str, Any] | None, budget: float, rule: Mapping[str, Any], relate: _Relate
) -> Relation:
    """`relate` for a budgeted argument: a number from 0 to ``budget`` (the guard blocks
    a missing, non-numeric or negative amount, and one past the budget), satisfying the
    step's own constraint on it too when it pins one. A pin the budget narrows only in part
    answers as the pin alone: its inside and disjoint still hold for the narrower values."""
    low: float = 0
    high = budget
    if step is not None:
        ((operator, operand),) = step.items()
        if operator in ("eq", "in"):
            members = [operand] if operator == "eq" else list(operand)
            kept = [member for member in members if is_number(member) and low <= member <= high]
            return relate({"in": kept} if kept else step, rule)
        if operator == "lte" and is_number(operand):
            high = min(high, operand)
        elif operator == "gte" and is_number(operand):
            low = max(low, operand)
        else:
            return relate(step, rule)
        if low > high:  # no call can pass the step: answer as its pin
            return relate(step, rule)
        if low == high:
            return relate({"eq": low}, rule)
    return _interval_relation(low, high, rule, relate)


def _allow_argument(
    name: str,
    step: Mapping[str, Any] | None,
    rule: Mapping[str, Any],
    closed: bool,
    budget: float | None,
) -> ArgumentRelation:
    if budget is not None:
        relation = _budgeted_relation(step, budget, rule, constraint_relation)
        return ArgumentRelation(name, step, rule, relation, budget=budget)
    if step is None and closed:
        # Absent from every call: an allow rule's constraint needs the argument present.
        return ArgumentRelation(name, None, rule, Relation.DISJOINT, absent=True)
    return ArgumentRelation(name, step, rule, constraint_relation(step, rule))


def step_rule_relation(
    step_args: Mapping[str, Any] | None,
    rule_args: Mapping[str, Any] | None,
    *,
    closed: bool = False,
    budgets: Mapping[str, float] | None = None,
    rule_closed: bool = False,
) -> tuple[Relation, tuple[ArgumentRelation, ...]]:
    """How the calls a step admits stand to an allow rule's ``args``: ``inside`` (the rule
    admits every one), ``disjoint`` (none: some argument is disjoint), ``overlapping`` or
    ``undecidable``; with the rule's arguments that are not ``inside``, in the rule's order.

    Arguments are independent, so the rule admits no call when one argument is disjoint,
    every call when all are inside; otherwise an undecidable argument leaves it undecided.

    Version 2: ``closed``, the step's ``additionalArgs`` is false; ``budgets``, the
    smallest ``max`` of the plan budgets covering the step, by argument; ``rule_closed``,
    the rule's ``additionalArgs`` is false. A closed rule admits no call of a step that
    pins or budgets an argument it does not name (every call passes it), and only some
    calls of an open step (the entry with `argument` None).
    """
    step_args = step_args or {}
    budgets = budgets or {}
    rule_args = rule_args or {}
    found: list[ArgumentRelation] = []
    for name, constraint in rule_args.items():
        step_constraint = step_args.get(name)
        if name in budgets or (closed and step_constraint is None):
            entry = _allow_argument(name, step_constraint, constraint, closed, budgets.get(name))
            if entry.relation is not Relation.INSIDE:
                found.append(entry)
            continue
        relation = constraint_relation(step_constraint, constraint)
        if relation is not Relation.INSIDE:
            found.append(ArgumentRelation(name, step_constraint, constraint, relation))
    if rule_closed:
        unnamed = [name for name in dict.fromkeys([*step_args, *budgets]) if name not in rule_args]
        for name in unnamed:
            found.append(
                ArgumentRelation(
                    name, step_args.get(name), None, Relation.DISJOINT, budget=budgets.get(name)
                )
            )
        if not unnamed and not closed:
            found.append(ArgumentRelation(None, None, None, Relation.OVERLAPPING))
    relations = {entry.relation for entry in found}
    if not found:
        return Relation.INSIDE, ()
    if Relation.DISJOINT in relations:
        return Relation.DISJOINT, tuple(e for e in found if e.relation is Relation.DISJOINT)
    if Relation.UNDECIDABLE in relations:
        return Relation.UNDECIDABLE, tuple(found)
    return Relation.OVERLAPPING, tuple(found)


def _deny_argument(
    name: str,
    step: Mapping[str, Any] | None,
    rule: Mapping[str, Any],
    closed: bool,
    budget: float | None,
) -> ArgumentRelation:
    if budget is not None:
        relation = _budgeted_relation(step, budget, rule, deny_relation)
        return ArgumentRelation(name, step, rule, relation, budget=budget)
    if step is None and closed:
        # Absent from every call: a deny rule matches a missing argument (it fails closed).
        return ArgumentRelation(name, None, rule, Relation.INSIDE, absent=True)
    return ArgumentRelation(name, step, rule, deny_relation(step, rule))


def step_deny_relation(
    step_args: Mapping[str, Any] | None,
    deny_args: Mapping[str, Any],
    *,
    closed: bool = False,
    budgets: Mapping[str, float] | None = None,
) -> tuple[Relation, tuple[ArgumentRelation, ...]]:
    """How the calls a step admits stand to the calls a deny rule's ``args`` match (it fails
    closed: guard.relation.deny_relation): ``inside`` (every call of the step is refused:
    every argument is inside), ``disjoint`` (none is: some argument is disjoint),
    ``overlapping`` or ``undecidable``; with every argument of the rule, in its order.

    A deny rule refuses a call when all its arguments match, so one disjoint argument keeps
    every call of the step clear of it, and it refuses every call only when all are inside.
    ``closed`` and ``budgets`` as for `step_rule_relation`: an argument a closed step leaves
    out is missing from every call, which the deny matches.
    """
    step_args = step_args or {}
    budgets = budgets or {}
    found = tuple(
        _deny_argument(name, step_args.get(name), constraint, closed, budgets.get(name))
        for name, constraint in deny_args.items()
    )
    relations = {entry.relation for entry in found}
    if Relation.DISJOINT in relations:
        return Relation.DISJOINT, found
    if relations <= {Relation.INSIDE}:
        return Relation.INSIDE, found
    if Relation.UNDECIDABLE in relations:
        return Relation.UNDECIDABLE, found
    return Relation.OVERLAPPING, found


def _number(value: float) -> str:
    return json.dumps(value)


def _step_values(entry: ArgumentRelation) -> str:
    """What the step lets a call pass for one argument: ``repo {"eq":"acme/x"}``, ``branch
    free``, ``branch absent (additionalArgs false)``, ``amount from 0 within a budget of
    500``."""
    argument = entry.argument
    if argument is None:
        return "other arguments (additionalArgs true)"
    if entry.absent:
        return f"{argument} absent (additionalArgs false)"
    if entry.budget is not None:
        within = f"within a budget of {_number(entry.budget)}"
        if entry.step is None:
            return f"{argument} from 0 {within}"
        return f"{_condition(argument, entry.step)} {within}"
    return f"{argument} free" if entry.step is None else _condition(argument, entry.step)


def _rule_values(entry: ArgumentRelation) -> str:
    """What the rule asks of one argument: ``repo {"glob":"acme/*"}``, or ``no branch
    (additionalArgs false)`` for one a closed rule does not name."""
    if entry.rule is None:
        if entry.argument is None:
            return "no argument it does not name (additionalArgs false)"
        return f"no {entry.argument} (additionalArgs false)"
    assert entry.argument is not None
    return _condition(entry.argument, entry.rule)


def _pinned_values(arguments: Sequence[ArgumentRelation]) -> str:
    """``repo {"eq":"acme/secret"} and branch free`` (what the step lets a call pass)."""
    return " and ".join(_step_values(entry) for entry in arguments)


def _deny_condition(arguments: Sequence[ArgumentRelation]) -> str:
    """``repo {"glob":"acme/secret*"} and branch {"eq":"main"}`` (what a deny rule matches)."""
    return " and ".join(_rule_values(entry) for entry in arguments)


def _inside_deny_denial(
    step_index: int, tool: str, rule: _Rule, arguments: Sequence[ArgumentRelation]
) -> StepDenial:
    """A deny rule with ``args`` matches every call of the step (`step_deny_relation`)."""
    return StepDenial(
        step_index,
        tool,
        rule.index,
        f"{rule.label} forbids every call of this step: it pins {_pinned_values(arguments)},"
        f" inside what the rule refuses for tool {tool} ({_deny_condition(arguments)})",
        argument=arguments[0].argument,
    )


def _condition(argument: str, constraint: Mapping[str, Any]) -> str:
    return f"{argument} {describe_constraint(constraint)}"


def _disjoint_denial(
    step_index: int, tool: str, refusals: Sequence[tuple[_Rule, tuple[ArgumentRelation, ...]]]
) -> StepDenial:
    """Every allow rule admitting the tool is disjoint from the step on some argument."""
    first_rule, first_arguments = refusals[0]
    named = []
    for rule, arguments in refusals[:_RULES_NAMED_IN_A_WARNING]:
        named.append(f"rules[{rule.index}] requires {_rule_values(arguments[0])}")
    more = len(refusals) - _RULES_NAMED_IN_A_WARNING
    if more > 0:
        named.append(f"and {more} more rule(s)")
    entry = first_arguments[0]
    if entry.absent:
        lets = f"leaves {entry.argument} out (additionalArgs false)"
    elif entry.budget is not None:
        lets = f"passes {_step_values(entry)}"
    else:
        assert entry.argument is not None
        lets = "pins " + (
            _condition(entry.argument, entry.step) if entry.step is not None else entry.argument
        )
    return StepDenial(
        step_index,
        tool,
        first_rule.index,
        f"no call of this step can be allowed: it {lets}, outside what every rule"
        f" admitting tool {tool} allows ({'; '.join(named)})",
        argument=entry.argument,
    )


def _inside_deny(
    step_index: int, tool: str, shape: _StepShape, concerned: Sequence[_Rule]
) -> StepDenial | None:
    """The first deny rule with ``args`` (in policy order) that refuses every call of the
    step, as its denial; None when there is none."""
    for rule in concerned:
        if rule.deny and rule.pinned:
            relation, arguments = step_deny_relation(
                shape.args, rule.pinned, closed=shape.closed, budgets=shape.ceilings
            )
            if relation is Relation.INSIDE:
                return _inside_deny_denial(step_index, tool, rule, arguments)
    return None


def _rule_relation(shape: _StepShape, rule: _Rule) -> tuple[Relation, tuple[ArgumentRelation, ...]]:
    """`step_rule_relation` of a step's shape and an allow (or review) rule."""
    return step_rule_relation(
        shape.args,
        rule.pinned,
        closed=shape.closed,
        budgets=shape.ceilings,
        rule_closed=rule.closed,
    )


def _uncovered_sum(
    step_index: int, tool: str, shape: _StepShape, allows: Sequence[_Rule]
) -> StepDenial | None:
    """The first admitting rule's ``maxSum`` ceiling (in policy order, then the rule's order
    of arguments) that no plan budget covering the step keeps to, as a denial at the
    argument's path; None when every ceiling is kept."""
    for rule in allows:
        for argument, ceiling in (rule.max_sum or {}).items():
            cover = shape.budgets.get(argument)
            if cover is not None and cover.most <= ceiling:
                continue
            limit = f"{rule.label} caps the sum of {argument} at {_number(ceiling)} (maxSum)"
            if cover is None:
                reason = (
                    f"{limit}, and no budget of the plan over {argument} covers this step:"
                    f" add one with a max of at most {_number(ceiling)} naming the step's id"
                )
            else:
                reason = (
                    f"{limit}, and the plan's budget {cover.budget!r} lets this step spend"
                    f" {_number(cover.most)}: lower its max to at most {_number(ceiling)}"
                )
            return StepDenial(step_index, tool, rule.index, reason, argument=argument)
    return None


def evaluate_plan(
    policy: Mapping[str, Any],
    plan: Mapping[str, Any],
    *,
    role: str | None,
    groups: Sequence[str],
) -> list[StepDenial]:
    """Check every step of a normalised plan against a validated policy, for a member.

    Per step: a deny rule without `args` concerning the tool refuses it, and so does a deny
    rule with `args` that matches every call of the step (`step_deny_relation`: the step
    pins each argument the rule constrains inside its constraint, read the fail-closed way;
    the denial's path is the rule's first argument); otherwise an allow
    rule concerning the tool admits it, unless the step pins an argument to values disjoint
    from the rule's constraint on it (guard.relation: no call of the step can satisfy the
    rule), or unless the step's maxCalls exceeds the cap of every
    such allow rule (only when all of them have a cap); otherwise the policy default
    decides. Returns one StepDenial per refused step; an empty list admits the plan.

    Version 2 (see the module's docstring): closed steps and rules and budgeted arguments
    are read by the same relations, and a step an admitting rule with ``maxSum`` concerns
    is refused unless a plan budget over each such argument covers it with a ``max`` at
    most the rule's ceiling (the first such rule and argument in policy order is named,
    at the argument's path).
    """
    rules = _applicable_rules(policy, role, groups)
    default_allows = policy["default"] == "allow"
    denials: list[StepDenial] = []
    shapes = _step_shapes(plan)
    # One plan's patterns share one budget of work (guard.relation).
    with relation_budget():
        for step_index, step in enumerate(plan["steps"]):
            tool = step["tool"]
            shape = shapes[step_index]
            concerned = [rule for rule in rules if rule.concerns(tool)]
            deny = next((rule for rule in concerned if rule.deny and rule.args is None), None)
            if deny is not None:
                denials.append(
                    StepDenial(step_index, tool, deny.index, f"{deny.label} forbids tool {tool}")
                )
                continue
            denied = _inside_deny(step_index, tool, shape, concerned)
            if denied is not None:
                denials.append(denied)
                continue
            allows = [rule for rule in concerned if not rule.deny]
            if any(rule.pinned or rule.closed for rule in allows):
                # A rule none of the step's calls can satisfy admits nothing (guard.relation).
                relations = [(rule, _rule_relation(shape, rule)) for rule in allows]
                admitting = [
                    rule for rule, (relation, _) in relations if relation is not Relation.DISJOINT
                ]
                if not admitting:
                    if not default_allows:
                        denials.append(
                            _disjoint_denial(
                                step_index, tool, [(rule, found) for rule, (_, found) in relations]
                            )
                        )
                    continue  # with a default that allows, the default decides every call
                allows = admitting
            if allows:
                uncovered = _uncovered_sum(step_index, tool, shape, allows)
                if uncovered is not None:
                    denials.append(uncovered)
                    continue
                if any(rule.max_calls is None for rule in allows):
                    continue
                step_max_calls = step.get("maxCalls", DEFAULT_MAX_CALLS)
                # Name the most generous cap: it tells the author how far to lower maxCalls.
                widest = max(allows, key=lambda rule: (rule.max_calls, -rule.index))
                assert widest.max_calls is not None
                if step_max_calls > widest.max_calls:
                    denials.append(
                        StepDenial(
                            step_index,
                            tool,
                            widest.index,
                            f"maxCalls {step_max_calls} exceeds this rule's limit of"
                            f" {widest.max_calls}",
                        )
                    )
                continue
            if not default_allows:
                denials.append(
                    StepDenial(
                        step_index, tool, None, f"no allow rule admits tool {tool} for this member"
                    )
                )
    return denials


@dataclass(frozen=True)
class StepWarning:
    """An argument of a step the policy admits at issuance whose calls it may still refuse:
    no allow rule admitting the step admits every value the step lets through for
    `argument` (guard.relation), so whether a call is allowed depends on the value the
    agent passes. `rules` are those admitting rules, in policy order; `code` says why: the
    step leaves the argument free (`UNPINNED_POLICY_ARGUMENT`), pins values the rules admit
    only in part (`POLICY_ARGUMENT_OVERLAPS`), or pins values of which that cannot be
    decided (`POLICY_ARGUMENT_UNDECIDABLE`). Or a deny rule with `args` (`rules`: that one
    rule) refuses some of the step's calls (`POLICY_DENY_OVERLAPS`), or may
    (`POLICY_DENY_UNDECIDABLE`): `argument` is then the first of the rule's arguments that
    does not settle it. `argument` None (version 2): the step lets a call pass arguments an
    admitting rule with ``additionalArgs`` false does not name; its path is the step's
    ``additionalArgs``, which would close it."""

    step: int
    tool: str
    argument: str | None
    rules: tuple[int, ...]
    detail: str
    code: str = UNPINNED_POLICY_ARGUMENT

    @property
    def path(self) -> str:
        if self.argument is None:
            return f"steps[{self.step}].additionalArgs"
        return _argument_path(self.step, self.argument)

    @property
    def rule(self) -> int:
        """The first rule the warning names."""
        return self.rules[0]


def _argument_warnings(
    step_index: int, tool: str, partial: Sequence[tuple[_Rule, tuple[ArgumentRelation, ...]]]
) -> list[StepWarning]:
    """One warning per argument that keeps some admitting rule from admitting every call."""
    by_argument: dict[str | None, list[tuple[int, ArgumentRelation]]] = {}
    for rule, arguments in partial:
        for entry in arguments:
            by_argument.setdefault(entry.argument, []).append((rule.index, entry))
    warnings = []
    for argument, entries in by_argument.items():
        first = entries[0][1]
        step_constraint = first.step
        named = [
            f"rule rules[{index}] requires {_rule_values(entry)}"
            for index, entry in entries[:_RULES_NAMED_IN_A_WARNING]
        ]
        more = len(entries) - _RULES_NAMED_IN_A_WARNING
        if more > 0:
            named.append(f"and {more} more rule(s)")
        conditions = "; ".join(named)
        if argument is None:
            code = POLICY_ARGUMENT_OVERLAPS
            detail = (
                f"{tool}: some calls will be refused (policy_denied): {conditions}, and the"
                " step lets a call pass other arguments; set additionalArgs false on the"
                " step to have it checked now."
            )
        elif first.budget is not None:
            code = (
                POLICY_ARGUMENT_UNDECIDABLE
                if any(entry.relation is Relation.UNDECIDABLE for _, entry in entries)
                else POLICY_ARGUMENT_OVERLAPS
            )
            if code == POLICY_ARGUMENT_UNDECIDABLE:
                detail = (
                    f"{tool}: some calls may be refused (policy_denied): the step passes"
                    f" {_step_values(first)}, and whether the policy admits every such value"
                    f" cannot be decided ({conditions})."
                )
            else:
                detail = (
                    f"{tool}: some calls will be refused (policy_denied): the step passes"
                    f" {_step_values(first)}, which the policy admits only in part"
                    f" ({conditions})."
                )
        elif step_constraint is None:
            code = UNPINNED_POLICY_ARGUMENT
            detail = (
                f"{tool}: the policy admits this step only under argument conditions the"
                f" step does not pin: {conditions}. Some calls will be refused"
                f" (policy_denied): those whose {argument} falls outside; pin {argument} in"
                " the step to have it checked now."
            )
        elif any(entry.relation is Relation.UNDECIDABLE for _, entry in entries):
            code = POLICY_ARGUMENT_UNDECIDABLE
            detail = (
                f"{tool}: some calls may be refused (policy_denied): the step pins"
                f" {_condition(argument, step_constraint)}, and whether the policy admits"
                f" every such value cannot be decided ({conditions}); pin {argument} with eq"
                " or in to have it checked now."
            )
        else:
            code = POLICY_ARGUMENT_OVERLAPS
            detail = (
                f"{tool}: some calls will be refused (policy_denied): the step pins"
                f" {_condition(argument, step_constraint)}, which the policy admits only in"
                f" part ({conditions})."
            )
        warnings.append(
            StepWarning(
                step_index,
                tool,
                argument,
                tuple(index for index, _ in entries),
                detail,
                code,
            )
        )
    return warnings


def _deny_warning(
    step_index: int,
    tool: str,
    rule: _Rule,
    relation: Relation,
    arguments: Sequence[ArgumentRelation],
) -> StepWarning:
    """A deny rule with ``args`` that refuses some of the step's calls, or may."""
    open_arguments = [entry for entry in arguments if entry.relation is not Relation.INSIDE]
    pinned = _pinned_values(arguments)
    forbidden = _deny_condition(arguments)
    missing = [
        entry.argument
        for entry in open_arguments
        if entry.argument is not None and entry.step is None and entry.budget is None
    ]
    left_out = (
        f" (a call without {' or '.join(missing)} is refused too: the rule fails closed)"
        if missing
        else ""
    )
    if relation is Relation.UNDECIDABLE:
        code = POLICY_DENY_UNDECIDABLE
        detail = (
            f"{tool}: some calls may be refused (policy_denied): rules[{rule.index}], a"
            f" {rule.label}, refuses calls with {forbidden}; the step lets through"
            f" {pinned}, and whether the rule refuses such calls cannot be decided{left_out}."
        )
    else:
        code = POLICY_DENY_OVERLAPS
        detail = (
            f"{tool}: some calls will be refused (policy_denied): rules[{rule.index}], a"
            f" {rule.label}, refuses calls with {forbidden}, and the step lets through"
            f" {pinned}{left_out}."
        )
    return StepWarning(step_index, tool, open_arguments[0].argument, (rule.index,), detail, code)


def plan_argument_warnings(
    policy: Mapping[str, Any],
    plan: Mapping[str, Any],
    *,
    role: str | None,
    groups: Sequence[str],
    denials: Sequence[StepDenial] | None = None,
) -> list[StepWarning]:
    """The arguments of the steps `evaluate_plan` admits whose calls the policy may still
    refuse: for a step, when no allow rule that applies to the member and concerns the tool
    admits every call the step lets through (guard.relation: none is ``inside``), one
    StepWarning per argument that keeps some admitting rule from it: left free by the step,
    or pinned to values the rule admits only in part, or of which that cannot be decided.
    Rules ``disjoint`` from the step admit none of its calls and are not named (when all
    are, `evaluate_plan` refuses the step).

    A deny rule with `args` that applies to the member and concerns the tool, and refuses
    some of the step's calls or may (`step_deny_relation`: ``overlapping`` or
    ``undecidable``; an argument the step leaves free counts, since a call without it is
    refused), is one StepWarning, `POLICY_DENY_OVERLAPS` or `POLICY_DENY_UNDECIDABLE`, after
    the step's admission warnings, whatever the policy default.

    No warning for a step refused at issuance (that is `evaluate_plan`'s), and no admission
    warning when the policy default allows (a call outside the rules is allowed anyway).
    ``denials`` is what
    `evaluate_plan` answered for the same plan and member, when the caller has it (an
    issued plan: none).
    """
    default_allows = policy["default"] == "allow"
    rules = _applicable_rules(policy, role, groups)
    if not any(rule.deny and rule.pinned for rule in rules) and default_allows:
        return []
    if denials is None:
        denials = evaluate_plan(policy, plan, role=role, groups=groups)
    refused = {denial.step for denial in denials}
    shapes = _step_shapes(plan)
    # Plans repeat tools: match each tool name against the rules' globs once.
    by_tool: dict[str, tuple[list[_Rule], list[_Rule]]] = {}
    warnings: list[StepWarning] = []
    # One plan's patterns share one budget of work (guard.relation).
    with relation_budget():
        for step_index, step in enumerate(plan["steps"]):
            if step_index in refused:
                continue
            tool = step["tool"]
            concerned = by_tool.get(tool)
            if concerned is None:
                concerned = (
                    [rule for rule in rules if not rule.deny and rule.concerns(tool)],
                    [rule for rule in rules if rule.deny and rule.pinned and rule.concerns(tool)],
                )
                by_tool[tool] = concerned
            allows, denies = concerned
            if not default_allows:
                partial: list[tuple[_Rule, tuple[ArgumentRelation, ...]]] = []
                for rule in allows:
                    relation, arguments = _rule_relation(shapes[step_index], rule)
                    if relation is Relation.INSIDE:
                        break  # this rule admits every call of the step
                    if relation is not Relation.DISJOINT:
                        partial.append((rule, arguments))
                else:
                    warnings.extend(_argument_warnings(step_index, tool, partial))
            for rule in denies:
                assert rule.pinned is not None
                shape = shapes[step_index]
                relation, arguments = step_deny_relation(
                    shape.args, rule.pinned, closed=shape.closed, budgets=shape.ceilings
                )
                if relation in (Relation.OVERLAPPING, Relation.UNDECIDABLE):
                    warnings.append(_deny_warning(step_index, tool, rule, relation, arguments))
    return warnings


#: the former name of `plan_argument_warnings`, which once warned of unpinned arguments only
unpinned_policy_arguments = plan_argument_warnings


_NOT_A_TOOL_NAME = PolicyDecision(
    False, None, "the tool name is not a string", "the tool name is not a string"
)

_RuleMatchers = tuple[tuple[ArgsMatcher | None, PolicyDecision], ...]


class _ToolRules(NamedTuple):
    """The rules concerning one tool for one member, denies and allows in policy order,
    each with an optional index narrowing them by the argument most of them pin
    (guard.rule_index)."""

    denies: _RuleMatchers
    deny_index: RuleIndex | None
    allows: _RuleMatchers
    allow_index: RuleIndex | None


def _first_match(rules: _RuleMatchers, index: RuleIndex | None, args: Any) -> PolicyDecision | None:
    """The decision of the first rule whose arguments `args` satisfy, in policy order; with
    an index, only among its candidates (it skips only rules that cannot match)."""
    if index is None:
        for matcher, decision in rules:
            if matcher is None or matcher(args):
                return decision
        return None
    for position in index.candidates(args):
        matcher, decision = rules[position]
        if matcher is None or matcher(args):
            return decision
    return None


class ToolDecision(NamedTuple):
    """One tool's verdict (`CompiledPolicy.tool_decision`), in the first of these forms that
    holds: `fixed` when every call of the tool gets it; ``passed if test(args) else
    otherwise`` when one rule's arguments decide; else ``decide(args)``."""

    fixed: PolicyDecision | None
    test: ArgsMatcher | None = None
    passed: PolicyDecision | None = None
    otherwise: PolicyDecision | None = None
    decide: Callable[[Any], PolicyDecision] | None = None


def _decide_indexed(entry: _ToolRules, default: PolicyDecision, args: Any) -> PolicyDecision:
    """`_first_match` over the denies, then over the allows, inlined: one call, not three."""
    rules: _RuleMatchers = entry.denies
    index = entry.deny_index
    for position in index.candidates(args) if index is not None else range(len(rules)):
        matcher, decision = rules[position]
        if matcher is None or matcher(args):
            return decision
    rules = entry.allows
    index = entry.allow_index
    for position in index.candidates(args) if index is not None else range(len(rules)):
        matcher, decision = rules[position]
        if matcher is None or matcher(args):
            return decision
    return default


def _decide_scan(
    rules: tuple[tuple[ArgsMatcher, PolicyDecision], ...], otherwise: PolicyDecision, args: Any
) -> PolicyDecision:
    for matcher, decision in rules:
        if matcher(args):
            return decision
    return otherwise


class CompiledPolicy:
    """A validated policy bound to one member (role and groups), for call decisions.

    The rules that apply to the member and concern a tool are resolved once per tool name
    and cached, so a repeated tool costs a dict lookup plus its rules' argument checks.
    Decisions are shared immutable objects; nothing is allocated per call.
    """

    __slots__ = ("_by_tool", "_default", "_rules", "groups", "policy", "role")

    def __init__(
        self, policy: Mapping[str, Any], *, role: str | None, groups: Sequence[str]
    ) -> None:
        self.policy = policy
        self.role = role
        self.groups = tuple(groups)
        self._rules = _applicable_rules(policy, role, groups)
        if policy["default"] == "allow":
            self._default = PolicyDecision(
                True, None, "the policy default allows this call", "the policy default (allow)"
            )
        else:
            self._default = PolicyDecision(
                False, None, "no allow rule admits this call", "the policy default (deny)"
            )
        self._by_tool: dict[str, _ToolRules] = {}

    def _resolve(self, tool: str) -> _ToolRules:
        denies = []
        deny_args: list[tuple[int, Mapping[str, Any] | None]] = []
        allows = []
        allow_args: list[tuple[int, Mapping[str, Any] | None]] = []
        for rule in self._rules:
            if not rule.concerns(tool):
                continue
            if rule.deny:
                reason = f"{rule.label} forbids this call"
                denies.append(
                    (rule.args, PolicyDecision(False, rule.index, reason, rule.description))
                )
                deny_args.append((len(deny_args), rule.pinned))
            else:
                reason = f"{rule.label} admits this call"
                allows.append(
                    (rule.args, PolicyDecision(True, rule.index, reason, rule.description))
                )
                allow_args.append((len(allow_args), rule.pinned))
        entry = _ToolRules(
            tuple(denies),
            build_rule_index(deny_args, fail_closed=True),
            tuple(allows),
            build_rule_index(allow_args),
        )
        if len(self._by_tool) < MAX_CACHED_TOOLS:
            self._by_tool[tool] = entry
        return entry

    def decide(self, tool: str, args: Any) -> PolicyDecision:
        """The verdict on calling `tool` with `args` (the call's arguments object)."""
        try:
            entry = self._by_tool.get(tool)
        except TypeError:  # unhashable
            return _NOT_A_TOOL_NAME
        if entry is None:
            if not isinstance(tool, str):
                return _NOT_A_TOOL_NAME
            entry = self._resolve(tool)
        decision = _first_match(entry.denies, entry.deny_index, args)
        if decision is None:
            decision = _first_match(entry.allows, entry.allow_index, args)
        return decision if decision is not None else self._default

    def tool_decision(self, tool: str) -> ToolDecision:
        """`decide(tool, args)` for one tool name, resolved once: the verdict when no
        argument can change it, else a function of the call's arguments alone.

        The guard resolves each tool of a plan when it installs a token, so a call pays for
        its rules' matchers only. Without an index, the rules are one list, denies first
        (a deny wins), cut after the first rule that pins nothing (it always matches)."""
        entry = self._by_tool.get(tool)
        if entry is None:
            entry = self._resolve(tool)
        default = self._default
        if entry.deny_index is not None or entry.allow_index is not None:
            return ToolDecision(None, decide=partial(_decide_indexed, entry, default))
        conditional: list[tuple[ArgsMatcher, PolicyDecision]] = []
        final = default
        for matcher, decision in (*entry.denies, *entry.allows):
            if matcher is None:
                final = decision
                break
            conditional.append((matcher, decision))
        if not conditional:
            return ToolDecision(final)
        if len(conditional) == 1:
            ((matcher, decision),) = conditional
            return ToolDecision(None, matcher, decision, final)
        return ToolDecision(None, decide=partial(_decide_scan, tuple(conditional), final))

    def decide_by_scan(self, tool: str, args: Any) -> PolicyDecision:
        """The verdict `decide` gives, reached by matching every rule concerning `tool` in
        policy order, without the indexes: the reading the indexes must agree with."""
        if not isinstance(tool, str):
            return _NOT_A_TOOL_NAME
        entry = self._resolve(tool)
        decision = _first_match(entry.denies, None, args)
        if decision is None:
            decision = _first_match(entry.allows, None, args)
        return decision if decision is not None else self._default
