"""A deny rule with `args` read with the one relation (guard.relation.deny_relation): a step
pinned inside its constraint, the fail-closed way (docs/decisions/0016), has every call
refused, so issuance refuses it (`policy_denied`, at the argument's path); a step some of
whose calls it refuses is issued with a warning at that path. Held to brute force: the
relation against the deny's own reading of values, and every refusal for a deny rule with
`args` against the guard's call decision (`CompiledPolicy.decide`) over sampled calls."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.constraints import OPERATORS, compile_constraint, validate_constraint
from guard.deny import compile_exclusion
from guard.plan import validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import (
    POLICY_DENY_OVERLAPS,
    POLICY_DENY_UNDECIDABLE,
    CompiledPolicy,
    evaluate_plan,
    plan_argument_warnings,
)
from guard.relation import Relation, deny_relation

from .test_relation import CONSTRAINTS, universe

MISSING = object()
# Values of the named cases below that the shared universe lacks.
NAMED = ["acme/secret", "acme/secret-x", "a ", "b ", "ab ", "b\t", 499, 500, 999, 1000, 1001]


def policy(*rules: dict[str, Any], default: str = "allow") -> dict[str, Any]:
    return validate_policy({"version": 1, "default": default, "rules": list(rules)})


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return validate_plan(
        {"version": 1, "goal": "g", "user": "alice@acme.dev", "steps": list(steps)}
    )


def deny(args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"effect": "deny", "tools": ["github_*"], "args": args, **extra}


SECRET = {"repo": {"glob": "acme/secret*"}}


# --- the relation, against the deny's own reading of each value -------------------------------


def check(step: dict[str, Any] | None, rule: dict[str, Any]) -> Relation:
    assert validate_constraint(rule, "rule") == []
    if step is not None:
        assert validate_constraint(step, "step") == []
    relation = deny_relation(step, rule)
    excludes = compile_exclusion(rule)
    step_matches = compile_constraint(step) if step is not None else (lambda value: True)
    admitted = [value for value in [*universe(step, rule), *NAMED] if step_matches(value)]
    matched = [value for value in admitted if not excludes(value)]
    passed = [value for value in admitted if excludes(value)]
    if step is None:
        matched.append(MISSING)  # a call may leave the argument out: the deny matches it
    if relation is Relation.INSIDE:
        assert passed == [], (step, rule, relation)
    elif relation is Relation.DISJOINT:
        assert step is not None, "an argument left free is never disjoint from a deny"
        assert matched == [], (step, rule, relation)
    elif relation is Relation.OVERLAPPING:
        assert matched, (step, rule, relation)
        # An argument left free against a pattern is overlapping unless every text matches;
        # the sampled universe need not hold the text that escapes the deny.
        assert passed or (step is None and "regex" in rule), (step, rule, relation)
    else:
        assert "regex" in rule or (step is not None and "regex" in step), (step, rule)
    return relation


@pytest.mark.parametrize(
    ("step_operator", "rule_operator"),
    [(step, rule) for step in (*OPERATORS, None) for rule in OPERATORS],
)
@given(data=st.data())
def test_the_deny_relation_agrees_with_the_deny_matcher(data, step_operator, rule_operator):
    step = None if step_operator is None else data.draw(CONSTRAINTS[step_operator], "step")
    rule = data.draw(CONSTRAINTS[rule_operator], "rule")

    check(step, rule)


@pytest.mark.parametrize(
    ("step", "rule", "expected"),
    [
        ({"eq": "acme/secret"}, {"glob": "acme/secret*"}, Relation.INSIDE),
        ({"glob": "acme/secret-*"}, {"glob": "acme/secret*"}, Relation.INSIDE),
        ({"glob": "acme/*"}, {"glob": "acme/secret*"}, Relation.OVERLAPPING),
        ({"eq": "acme/app"}, {"glob": "acme/secret*"}, Relation.DISJOINT),
        (None, {"glob": "acme/secret*"}, Relation.OVERLAPPING),
        # Fail closed: what the deny cannot compare, it matches.
        ({"eq": "5000"}, {"lte": 100}, Relation.INSIDE),
        ({"lte": 10}, {"glob": "*"}, Relation.INSIDE),
        ({"glob": "a*"}, {"eq": 3}, Relation.INSIDE),
        ({"lte": 10}, {"in": [1, "x"]}, Relation.INSIDE),
        ({"gte": 1000}, {"gte": 1000}, Relation.INSIDE),
        ({"gte": 500}, {"gte": 1000}, Relation.OVERLAPPING),
        ({"lte": 999}, {"gte": 1000}, Relation.DISJOINT),
        (None, {"eq": None}, Relation.INSIDE),
        (None, {"glob": "*"}, Relation.INSIDE),
        (None, {"in": ["a", 1]}, Relation.INSIDE),
        # Both booleans: a boolean is in, anything else is not comparable.
        (None, {"in": [True, False]}, Relation.INSIDE),
        (None, {"in": [True]}, Relation.OVERLAPPING),
        (None, {"lte": 5}, Relation.OVERLAPPING),
        ({"regex": "(?i)acme/secret"}, {"glob": "acme/*"}, Relation.UNDECIDABLE),
    ],
)
def test_named_cases(step, rule, expected):
    assert check(step, rule) is expected


# --- issuance ---------------------------------------------------------------------------


def test_a_step_pinned_inside_a_deny_is_refused_at_the_arguments_path() -> None:
    document = policy(
        {"effect": "allow", "tools": ["github_*", "send"]},
        deny(SECRET, name="no secrets"),
        default="deny",
    )
    step = {"tool": "github_get_issue", "args": {"repo": {"eq": "acme/secret"}}}

    (denial,) = evaluate_plan(document, plan({"tool": "send"}, step), role=None, groups=[])

    assert (denial.step, denial.rule, denial.path) == (1, 1, "steps[1].args.repo")
    error = denial.error()
    assert error.path == "plan.steps[1].args.repo"
    assert error.detail.startswith("step 2 (github_get_issue): ")
    assert 'deny rule "no secrets" forbids every call of this step' in error.detail
    assert 'it pins repo {"eq":"acme/secret"}' in error.detail
    assert 'repo {"glob":"acme/secret*"}' in error.detail
    assert error.detail.endswith("(rules[1])")


def test_a_deny_refuses_only_when_every_argument_it_constrains_is_inside() -> None:
    document = policy(deny({**SECRET, "branch": {"eq": "main"}}))
    repo = {"repo": {"eq": "acme/secret"}}

    both = {"tool": "github_push", "args": {**repo, "branch": {"eq": "main"}}}
    (denial,) = evaluate_plan(document, plan(both), role=None, groups=[])
    assert denial.path == "steps[0].args.repo"
    assert 'branch {"eq":"main"}' in denial.reason

    other_branch = {"tool": "github_push", "args": {**repo, "branch": {"eq": "dev"}}}
    assert evaluate_plan(document, plan(other_branch), role=None, groups=[]) == []
    assert plan_argument_warnings(document, plan(other_branch), role=None, groups=[]) == []

    # The branch left free: a call without it, or with "main", is refused.
    free_branch = {"tool": "github_push", "args": repo}
    assert evaluate_plan(document, plan(free_branch), role=None, groups=[]) == []
    (warning,) = plan_argument_warnings(document, plan(free_branch), role=None, groups=[])
    assert (warning.path, warning.code, warning.rules) == (
        "steps[0].args.branch",
        POLICY_DENY_OVERLAPS,
        (0,),
    )
    assert "some calls will be refused" in warning.detail
    assert "a call without branch is refused too" in warning.detail


def test_a_deny_that_refuses_some_calls_is_a_warning_under_either_default() -> None:
    step = {"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}}
    for default in ("allow", "deny"):
        document = policy({"effect": "allow", "tools": ["github_*"]}, deny(SECRET), default=default)

        assert evaluate_plan(document, plan(step), role=None, groups=[]) == []
        (warning,) = plan_argument_warnings(document, plan(step), role=None, groups=[])
        assert (warning.path, warning.code, warning.rule) == (
            "steps[0].args.repo",
            POLICY_DENY_OVERLAPS,
            1,
        )
        assert 'refuses calls with repo {"glob":"acme/secret*"}' in warning.detail


def test_an_undecidable_deny_is_a_warning_not_a_refusal() -> None:
    document = policy(deny(SECRET))
    step = {"tool": "github_list_issues", "args": {"repo": {"regex": "(?i)acme/secret"}}}

    assert evaluate_plan(document, plan(step), role=None, groups=[]) == []
    (warning,) = plan_argument_warnings(document, plan(step), role=None, groups=[])
    assert (warning.path, warning.code) == ("steps[0].args.repo", POLICY_DENY_UNDECIDABLE)
    assert "some calls may be refused" in warning.detail


def test_a_deny_for_other_members_or_tools_refuses_nothing() -> None:
    step = {"tool": "github_get_issue", "args": {"repo": {"eq": "acme/secret"}}}
    for rule in (
        deny(SECRET, roles=["intern"]),
        deny(SECRET, groups=["contractors"]),
        {**deny(SECRET), "tools": ["gitlab_*"]},
    ):
        document = policy(rule)
        assert evaluate_plan(document, plan(step), role="dev", groups=["staff"]) == []
        assert plan_argument_warnings(document, plan(step), role="dev", groups=["staff"]) == []
    document = policy(deny(SECRET, roles=["intern"], groups=["staff"]))
    (denial,) = evaluate_plan(document, plan(step), role="intern", groups=["staff"])
    assert denial.rule == 0


def test_a_step_pinned_outside_the_deny_is_neither_refused_nor_warned() -> None:
    document = policy(deny(SECRET))
    step = {"tool": "github_get_issue", "args": {"repo": {"in": ["acme/app", "acme/web"]}}}

    assert evaluate_plan(document, plan(step), role=None, groups=[]) == []
    assert plan_argument_warnings(document, plan(step), role=None, groups=[]) == []


# --- every refusal held to the guard's call decision ----------------------------------------

ARGUMENTS = ("repo", "n")
TOOLS = ("github_a", "github_b", "other")
step_constraints = st.one_of(*(CONSTRAINTS[operator] for operator in OPERATORS))
rule_args = st.dictionaries(st.sampled_from(ARGUMENTS), step_constraints, min_size=1, max_size=2)
step_args = st.dictionaries(st.sampled_from(ARGUMENTS), step_constraints, max_size=2)
rules = st.fixed_dictionaries(
    {
        "effect": st.sampled_from(["deny", "deny", "allow", "review"]),
        "tools": st.lists(st.sampled_from(["github_*", "github_a", "*", "other"]), min_size=1),
        "args": rule_args,
    },
    optional={"roles": st.just(["dev"]), "groups": st.just(["staff"])},
)


def sampled_calls(args: dict[str, Any]) -> list[dict[str, Any]]:
    """Calls the step admits: for a pinned argument, sampled values satisfying its
    constraint; for a free one, sampled values of every kind or no value at all."""
    choices = []
    for name in ARGUMENTS:
        constraint = args.get(name)
        if constraint is None:
            choices.append([MISSING, *universe()[::7]])
        else:
            matches = compile_constraint(constraint)
            choices.append([value for value in universe(constraint) if matches(value)][:40])
    return [
        {name: value for name, value in zip(ARGUMENTS, values, strict=True) if value is not MISSING}
        for values in itertools.product(*choices)
    ]


@settings(max_examples=300)
@given(
    rules=st.lists(rules, min_size=1, max_size=3),
    tool=st.sampled_from(TOOLS),
    args=step_args,
    role=st.sampled_from([None, "dev"]),
    groups=st.sampled_from([[], ["staff"]]),
    default=st.sampled_from(["allow", "deny"]),
)
def test_a_step_refused_for_a_deny_with_args_has_every_call_refused(
    rules, tool, args, role, groups, default
):
    document = policy(*rules, default=default)
    step = {"tool": tool, **({"args": args} if args else {})}
    denials = evaluate_plan(document, plan(step), role=role, groups=groups)
    inside_deny = [
        denial
        for denial in denials
        if denial.rule is not None
        and document["rules"][denial.rule]["effect"] == "deny"
        and "args" in document["rules"][denial.rule]
    ]
    if not inside_deny:
        return
    (denial,) = inside_deny
    assert denial.argument in ARGUMENTS
    compiled = CompiledPolicy(document, role=role, groups=groups)
    calls = sampled_calls(args)
    assert calls
    for call in calls:
        decision = compiled.decide(tool, call)
        assert not decision.allowed, (call, decision)
        assert document["rules"][decision.rule]["effect"] == "deny", (call, decision)
