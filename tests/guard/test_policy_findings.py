"""The rules of a policy that never take effect (guard.policy_findings): a deny rule
shadowing an allow rule for every member, and a review rule that never asks anyone. A
finding is a certainty: a property test holds every finding to the policy's own decisions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy, evaluate_plan
from guard.policy_findings import ALLOW_SHADOWED, REVIEW_NEVER_APPLIES, policy_findings
from guard.policy_review import plan_reviews


def policy(*rules: dict[str, Any], default: str = "deny") -> dict[str, Any]:
    return validate_policy({"version": 1, "default": default, "rules": list(rules)})


def found(document: dict[str, Any], **names: Any) -> list[tuple[int, str, tuple[int, ...]]]:
    return [(f.rule, f.code, f.by) for f in policy_findings(document, **names)]


def test_a_deny_rule_on_the_same_tool_shadows_an_allow_rule():
    document = policy(
        {"effect": "allow", "tools": ["send_email"], "name": "mail"},
        {"effect": "deny", "tools": ["send_email"], "name": "no mail"},
    )
    (finding,) = policy_findings(document)
    assert (finding.rule, finding.code, finding.by) == (0, ALLOW_SHADOWED, (1,))
    assert finding.path == "rules[0]"
    assert finding.detail == (
        'allow rule "mail" (rules[0]) never admits a call: deny rule "no mail" (rules[1])'
        " forbids every tool it names (send_email) for every member it applies to"
    )


def test_a_wider_glob_or_several_deny_rules_together_shadow_an_allow_rule():
    assert found(
        policy({"effect": "allow", "tools": ["github_*"]}, {"effect": "deny", "tools": ["*"]})
    ) == [(0, ALLOW_SHADOWED, (1,))]
    shared = policy(
        {"effect": "deny", "tools": ["github_*"]},
        {"effect": "allow", "tools": ["github_list_issues", "send_[a-z]*"]},
        {"effect": "deny", "tools": ["send_*"]},
    )
    assert found(shared) == [(1, ALLOW_SHADOWED, (0, 2))]
    assert "deny rule (rules[0]) and deny rule (rules[2]) forbid every tool" in (
        policy_findings(shared)[0].detail
    )


def test_a_deny_rule_covering_only_part_of_the_allow_rule_is_no_finding():
    assert (
        found(
            policy(
                {"effect": "allow", "tools": ["github_*"]},
                {"effect": "deny", "tools": ["github_delete_*"]},
            )
        )
        == []
    )
    assert (
        found(
            policy(
                {"effect": "allow", "tools": ["github_list_issues", "send_email"]},
                {"effect": "deny", "tools": ["github_*"]},
            )
        )
        == []
    )


@pytest.mark.parametrize(
    ("allow", "deny", "shadowed"),
    [
        ({}, {"roles": ["sre"]}, False),  # the deny rule spares other roles
        ({"roles": ["sre"]}, {"roles": ["sre"]}, True),
        ({"roles": ["sre", "dev"]}, {"roles": ["sre"]}, False),
        ({"roles": ["sre"]}, {}, True),
        ({"groups": ["oncall"]}, {"groups": ["oncall", "platform"]}, True),
        ({"groups": ["oncall", "platform"]}, {"groups": ["oncall"]}, False),
        ({"roles": ["sre"], "groups": ["oncall"]}, {"groups": ["oncall"]}, True),
        ({"roles": ["sre"]}, {"groups": ["oncall"]}, False),
    ],
)
def test_the_deny_rule_must_apply_to_every_member_the_allow_rule_applies_to(allow, deny, shadowed):
    document = policy(
        {"effect": "allow", "tools": ["deploy"], **allow},
        {"effect": "deny", "tools": ["deploy"], **deny},
    )
    assert bool(found(document)) is shadowed


@pytest.mark.parametrize(
    ("allow_args", "deny_args", "shadowed"),
    [
        ({"repo": {"glob": "acme/public-*"}}, {"repo": {"glob": "acme/*"}}, True),
        ({"repo": {"eq": "acme/app"}}, {"repo": {"in": ["acme/app", "acme/web"]}}, True),
        ({"repo": {"glob": "acme/*"}}, {"repo": {"glob": "acme/public-*"}}, False),
        (None, {"repo": {"glob": "acme/*"}}, False),  # the agent may name another repo
        ({"number": {"lte": 5}}, {"repo": {"glob": "*"}}, False),
        ({"number": {"lte": 5}, "repo": {"eq": "x"}}, {"number": {"lte": 10}}, True),
    ],
)
def test_a_deny_rule_with_arguments_shadows_only_calls_inside_its_constraints(
    allow_args, deny_args, shadowed
):
    allow: dict[str, Any] = {"effect": "allow", "tools": ["github_get"]}
    if allow_args:
        allow["args"] = allow_args
    document = policy(allow, {"effect": "deny", "tools": ["github_*"], "args": deny_args})
    assert bool(found(document)) is shadowed


def test_a_review_rule_behind_a_deny_rule_never_asks_anyone():
    document = policy(
        {"effect": "deny", "tools": ["send_*"], "name": "no mail"},
        {"effect": "review", "tools": ["send_email"]},
    )
    (finding,) = policy_findings(document)
    assert (finding.rule, finding.code, finding.by) == (1, REVIEW_NEVER_APPLIES, (0,))
    assert "never asks anyone" in finding.detail and "at issuance" in finding.detail


def test_a_review_rule_behind_a_deny_rule_with_arguments_admits_no_call():
    document = policy(
        {"effect": "review", "tools": ["deploy"], "args": {"env": {"eq": "prod"}}},
        {"effect": "deny", "tools": ["deploy"], "args": {"env": {"in": ["prod", "staging"]}}},
    )
    (finding,) = policy_findings(document)
    assert (finding.code, finding.by) == (REVIEW_NEVER_APPLIES, (1,))
    assert 'env {"in":["prod","staging"]}' in finding.detail


def test_a_review_rule_naming_no_role_or_group_the_team_has_applies_to_no_member():
    document = policy(
        {"effect": "review", "tools": ["deploy"], "roles": ["sre", "ops"]},
        {"effect": "review", "tools": ["send_email"], "groups": ["oncall"]},
        {"effect": "allow", "tools": ["deploy"], "roles": ["nobody"]},
    )
    names = {"roles": {"engineer"}, "groups": {"platform"}}
    assert found(document, **names) == [
        (0, REVIEW_NEVER_APPLIES, ()),
        (1, REVIEW_NEVER_APPLIES, ()),
    ]
    details = [finding.detail for finding in policy_findings(document, **names)]
    assert details[0].endswith(
        'names no role the team has ("sre", "ops"), so it applies to no member'
    )
    # One name the team has is enough; unknown names judge nothing; allow rules are left
    # to the reference warnings.
    assert found(document, roles={"ops"}, groups={"oncall"}) == []
    assert found(document) == []


def test_a_policy_without_such_rules_has_no_finding():
    document = policy(
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}},
        {"effect": "deny", "tools": ["github_delete_*"]},
        {"effect": "review", "tools": ["send_email"]},
    )
    assert found(document, roles=set(), groups=set()) == []


# --- every finding is a certainty ---------------------------------------------------------

TOOLS = ["a", "ab", "b", "ba", "c"]
GLOBS = ["a", "a*", "*", "b?", "ab", "[ab]*", "c", "*b", "[!a]*"]
CONSTRAINTS = [
    {"eq": "p"},
    {"eq": "q"},
    {"glob": "p*"},
    {"glob": "*"},
    {"in": ["p", "q"]},
    {"lte": 3},
    {"gte": 1},
]
VALUES: list[Any] = ["p", "pq", "q", "z", 0, 2, 5, None]
ROLES = [None, "r1", "r2"]
GROUPS = [(), ("g1",), ("g2",), ("g1", "g2")]

rules = st.fixed_dictionaries(
    {
        "effect": st.sampled_from(["allow", "deny", "review"]),
        "tools": st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2),
    },
    optional={
        "roles": st.lists(st.sampled_from(["r1", "r2"]), min_size=1, max_size=2, unique=True),
        "groups": st.lists(st.sampled_from(["g1", "g2"]), min_size=1, max_size=2, unique=True),
        "args": st.dictionaries(
            st.sampled_from(["x", "y"]), st.sampled_from(CONSTRAINTS), min_size=1, max_size=2
        ),
    },
)
calls = st.tuples(
    st.sampled_from(TOOLS),
    st.dictionaries(st.sampled_from(["x", "y"]), st.sampled_from(VALUES), max_size=2),
)


def assert_never_takes_effect(document: dict[str, Any], calls: list[tuple[str, Any]]) -> int:
    """Every shadowed rule of ``document`` admits none of ``calls`` for any member, and a
    review rule shadowed by deny rules without arguments asks for no review. The number of
    such findings."""
    findings = [f for f in policy_findings(document) if f.by]
    for finding in findings:
        for role in ROLES:
            for groups in GROUPS:
                compiled = CompiledPolicy(document, role=role, groups=groups)
                for tool, args in calls:
                    decision = compiled.decide(tool, args)
                    assert not (decision.allowed and decision.rule == finding.rule), (
                        finding,
                        role,
                        groups,
                        tool,
                        args,
                    )
                    if finding.code == REVIEW_NEVER_APPLIES and not any(
                        document["rules"][deny].get("args") for deny in finding.by
                    ):
                        plan = {"steps": [{"tool": tool}]}
                        denials = evaluate_plan(document, plan, role=role, groups=groups)
                        reviews = plan_reviews(
                            document, plan, role=role, groups=groups, denials=denials
                        )
                        assert all(review.rule != finding.rule for review in reviews)
    return len(findings)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(rules, min_size=1, max_size=5),
    st.sampled_from(["allow", "deny"]),
    st.lists(calls, min_size=1, max_size=12),
)
def test_a_shadowed_rule_never_admits_a_call_nor_asks_for_a_review(rule_list, default, sampled):
    assert_never_takes_effect(policy(*rule_list, default=default), sampled)


@st.composite
def shadow_candidates(draw: st.DrawFn) -> dict[str, Any]:
    """An allow or review rule and a deny rule over the same argument, often shadowing it."""
    argument = draw(st.sampled_from(["x", "y"]))
    admitting: dict[str, Any] = {
        "effect": draw(st.sampled_from(["allow", "review"])),
        "tools": draw(st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2)),
        "args": {argument: draw(st.sampled_from(CONSTRAINTS))},
    }
    deny: dict[str, Any] = {
        "effect": "deny",
        "tools": draw(st.sampled_from([admitting["tools"], ["*"], ["a*", "b*"], ["[ab]*"]])),
        "args": {argument: draw(st.sampled_from(CONSTRAINTS))},
    }
    return policy(*draw(st.permutations([admitting, deny])))


@settings(max_examples=300, deadline=None)
@given(shadow_candidates(), st.lists(calls, min_size=1, max_size=12))
def test_a_deny_rule_with_arguments_reported_as_shadowing_refuses_every_admitted_call(
    document, sampled
):
    # Every value a rule constraint admits, on both arguments, among the calls tried.
    exhaustive = [
        (tool, {name: value}) for tool in TOOLS for name in ("x", "y") for value in VALUES
    ]
    assert_never_takes_effect(document, [*sampled, *exhaustive])
