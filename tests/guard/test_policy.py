"""Policy validation, the issuance check of a plan and call-time decisions."""

from __future__ import annotations

import copy
import fnmatch
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.constraints import compile_args
from guard.deny import compile_deny_args
from guard.errors import DocumentInvalid
from guard.plan import validate_plan
from guard.policy import MAX_RULES, policy_hash, validate_policy
from guard.policy_evaluation import CompiledPolicy, PolicyDecision, StepDenial, evaluate_plan

from .strategies import group_names, policies, role_names, wild_values

DESIGN_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}},
        {"effect": "deny", "tools": ["github_delete_*"]},
        {
            "effect": "allow",
            "tools": ["deploy"],
            "roles": ["sre"],
            "groups": ["oncall"],
            "maxCalls": 5,
        },
    ],
}


def policy(*rules: dict[str, Any], default: str = "deny") -> dict[str, Any]:
    return validate_policy({"version": 1, "default": default, "rules": list(rules)})


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return validate_plan(
        {"version": 1, "goal": "g", "user": "alice@acme.dev", "steps": list(steps)}
    )


def error_paths(document: object) -> list[str]:
    with pytest.raises(DocumentInvalid) as caught:
        validate_policy(document)
    return [error.path for error in caught.value.errors]


# --- validation ----------------------------------------------------------------------------


def test_design_policy_is_valid_and_normalised() -> None:
    assert validate_policy(DESIGN_POLICY) == DESIGN_POLICY
    assert validate_policy(DESIGN_POLICY) is not DESIGN_POLICY


def test_rules_default_to_an_empty_list() -> None:
    assert validate_policy({"version": 1, "default": "allow"}) == {
        "version": 1,
        "default": "allow",
        "rules": [],
    }


def test_optional_rule_fields_are_kept() -> None:
    rule = {
        "effect": "allow",
        "tools": ["a"],
        "args": {"n": {"lte": 1}},
        "roles": ["sre"],
        "groups": ["oncall"],
        "maxCalls": 3,
        "name": "small deploys",
        "description": "Only a few.",
    }
    assert policy(rule)["rules"] == [rule]


@given(policies())
def test_validate_policy_is_idempotent(document: dict[str, Any]) -> None:
    normalised = validate_policy(document)
    assert validate_policy(normalised) == normalised
    assert policy_hash(validate_policy(normalised)) == policy_hash(normalised)


def test_policy_hash_ignores_key_order() -> None:
    reordered = {
        "rules": [dict(reversed(list(rule.items()))) for rule in DESIGN_POLICY["rules"]],
        "default": "deny",
        "version": 1,
    }
    assert policy_hash(validate_policy(reordered)) == policy_hash(validate_policy(DESIGN_POLICY))
    changed = copy.deepcopy(DESIGN_POLICY)
    changed["rules"][2]["maxCalls"] = 6
    assert policy_hash(validate_policy(changed)) != policy_hash(validate_policy(DESIGN_POLICY))


@pytest.mark.parametrize(
    ("document", "paths"),
    [
        ({"version": 1}, ["default"]),
        ({"default": "deny"}, ["version"]),
        ({"version": True, "default": "deny"}, ["version"]),
        ({"version": 1, "default": "maybe"}, ["default"]),
        ({"version": 1, "default": "deny", "rules": {}}, ["rules"]),
        ({"version": 1, "default": "deny", "extra": 1}, ["extra"]),
        ({"version": 1, "default": "deny", "rules": ["x"]}, ["rules[0]"]),
        (
            {"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": ["a"]}] * 501},
            ["rules"],
        ),
    ],
)
def test_policy_level_rules(document: object, paths: list[str]) -> None:
    assert error_paths(document) == paths


@pytest.mark.parametrize(
    ("rule", "paths"),
    [
        ({"tools": ["a"]}, ["rules[0].effect"]),
        ({"effect": "allow"}, ["rules[0].tools"]),
        ({"effect": "permit", "tools": ["a"]}, ["rules[0].effect"]),
        ({"effect": "allow", "tools": []}, ["rules[0].tools"]),
        ({"effect": "allow", "tools": "github_*"}, ["rules[0].tools"]),
        ({"effect": "allow", "tools": ["a", ""]}, ["rules[0].tools[1]"]),
        ({"effect": "allow", "tools": ["a", "github.*"]}, ["rules[0].tools[1]"]),
        ({"effect": "allow", "tools": ["a", "b", "github_[del"]}, ["rules[0].tools[2]"]),
        ({"effect": "allow", "tools": [7]}, ["rules[0].tools[0]"]),
        ({"effect": "allow", "tools": ["a"], "tool": ["b"]}, ["rules[0].tool"]),
        (
            {"effect": "allow", "tools": ["a"], "args": {"r": {"regx": "a"}}},
            ["rules[0].args.r.regx"],
        ),
        ({"effect": "allow", "tools": ["a"], "roles": []}, ["rules[0].roles"]),
        ({"effect": "allow", "tools": ["a"], "roles": "sre"}, ["rules[0].roles"]),
        ({"effect": "allow", "tools": ["a"], "groups": ["ok", ""]}, ["rules[0].groups[1]"]),
        ({"effect": "allow", "tools": ["a"], "maxCalls": 0}, ["rules[0].maxCalls"]),
        ({"effect": "allow", "tools": ["a"], "maxCalls": True}, ["rules[0].maxCalls"]),
        ({"effect": "allow", "tools": ["a"], "name": "n" * 201}, ["rules[0].name"]),
        ({"effect": "allow", "tools": ["a"], "description": 1}, ["rules[0].description"]),
    ],
)
def test_rule_level_rules(rule: dict[str, Any], paths: list[str]) -> None:
    assert error_paths({"version": 1, "default": "deny", "rules": [rule]}) == paths


def test_errors_name_the_rule_by_index() -> None:
    rules = [{"effect": "allow", "tools": ["a"]}, {"effect": "deny", "tools": ["ok", "bad.*"]}]
    assert error_paths({"version": 1, "default": "deny", "rules": rules}) == ["rules[1].tools[1]"]


def test_max_rules_is_accepted() -> None:
    validate_policy(
        {
            "version": 1,
            "default": "deny",
            "rules": [{"effect": "allow", "tools": ["a"]}] * MAX_RULES,
        }
    )


@given(wild_values)
def test_garbage_only_ever_raises_document_invalid(document: object) -> None:
    try:
        policy_hash(validate_policy(document))
    except DocumentInvalid as invalid:
        assert invalid.errors
        assert all(error.detail for error in invalid.errors)


@given(policies(), st.data())
def test_garbage_inside_a_valid_policy_only_raises_document_invalid(
    document: dict[str, Any], data: Any
) -> None:
    document["rules"].append({"effect": "allow", "tools": ["x"]})
    rule = data.draw(st.sampled_from(document["rules"]))
    field = data.draw(
        st.sampled_from(["effect", "tools", "args", "roles", "groups", "maxCalls", "name", "x"])
    )
    rule[field] = data.draw(wild_values)
    try:
        normalised = validate_policy(document)
    except DocumentInvalid as invalid:
        assert all(error.path.startswith("rules[") for error in invalid.errors)
    else:
        policy_hash(normalised)
        CompiledPolicy(normalised, role="sre", groups=["oncall"]).decide("x", {})


# --- evaluate_plan (issuance) --------------------------------------------------------------


def denials(
    policy_document: dict[str, Any],
    *steps: dict[str, Any],
    role: str | None = None,
    groups: Sequence[str] = (),
) -> list[StepDenial]:
    return evaluate_plan(policy_document, plan(*steps), role=role, groups=groups)


def test_allowed_plan_has_no_denials() -> None:
    assert denials(validate_policy(DESIGN_POLICY), {"tool": "github_list_issues"}) == []


def test_deny_wins_over_allow() -> None:
    result = denials(
        validate_policy(DESIGN_POLICY),
        {"tool": "github_list_issues"},
        {"tool": "github_delete_repo"},
    )
    assert result == [
        StepDenial(step=1, tool="github_delete_repo", rule=1, reason=result[0].reason)
    ]
    assert "github_delete_repo" in result[0].reason
    assert result[0].path == "steps[1]"


def test_deny_rule_is_named_in_the_reason() -> None:
    document = policy(
        {"effect": "allow", "tools": ["*"]},
        {"effect": "deny", "tools": ["drop_*"], "name": "no drops"},
    )
    (denial,) = denials(document, {"tool": "drop_table"})
    assert denial.rule == 1
    assert "no drops" in denial.reason


def test_deny_rule_with_args_does_not_refuse_a_step_at_issuance() -> None:
    document = policy(
        {"effect": "allow", "tools": ["github_*"]},
        {"effect": "deny", "tools": ["github_*"], "args": {"repo": {"glob": "secret/*"}}},
    )
    assert denials(document, {"tool": "github_get_issue"}) == []


def test_allow_rule_with_args_admits_the_step_at_issuance() -> None:
    document = policy({"effect": "allow", "tools": ["github_*"], "args": {"repo": {"eq": "x"}}})
    assert denials(document, {"tool": "github_get_issue"}) == []


def test_default_deny_refuses_a_tool_no_rule_admits() -> None:
    (denial,) = denials(validate_policy(DESIGN_POLICY), {"tool": "send_email"})
    assert denial == StepDenial(
        step=0,
        tool="send_email",
        rule=None,
        reason="no allow rule admits tool send_email for this member",
    )


def test_default_allow_admits_a_tool_no_rule_mentions() -> None:
    document = policy({"effect": "deny", "tools": ["rm"]}, default="allow")
    assert denials(document, {"tool": "send_email"}) == []
    assert [d.step for d in denials(document, {"tool": "ls"}, {"tool": "rm"})] == [1]


def test_role_scoping() -> None:
    document = policy({"effect": "allow", "tools": ["deploy"], "roles": ["sre", "admin"]})
    assert denials(document, {"tool": "deploy"}, role="sre") == []
    assert denials(document, {"tool": "deploy"}, role="admin") == []
    assert len(denials(document, {"tool": "deploy"}, role="dev")) == 1
    assert len(denials(document, {"tool": "deploy"}, role=None)) == 1


def test_group_scoping_needs_any_one_group() -> None:
    document = policy({"effect": "allow", "tools": ["deploy"], "groups": ["oncall", "platform"]})
    assert denials(document, {"tool": "deploy"}, groups=["platform"]) == []
    assert denials(document, {"tool": "deploy"}, groups=["x", "oncall"]) == []
    assert len(denials(document, {"tool": "deploy"}, groups=["x"])) == 1
    assert len(denials(document, {"tool": "deploy"}, groups=[])) == 1


def test_roles_and_groups_must_both_hold() -> None:
    document = policy(
        {"effect": "allow", "tools": ["deploy"], "roles": ["sre"], "groups": ["oncall"]}
    )
    assert denials(document, {"tool": "deploy"}, role="sre", groups=["oncall"]) == []
    assert len(denials(document, {"tool": "deploy"}, role="sre", groups=[])) == 1
    assert len(denials(document, {"tool": "deploy"}, role="dev", groups=["oncall"])) == 1


def test_scoped_deny_only_applies_to_its_members() -> None:
    document = policy(
        {"effect": "allow", "tools": ["*"]},
        {"effect": "deny", "tools": ["deploy"], "groups": ["interns"]},
    )
    assert denials(document, {"tool": "deploy"}, groups=["staff"]) == []
    assert [d.rule for d in denials(document, {"tool": "deploy"}, groups=["interns"])] == [1]


def test_max_calls_cap() -> None:
    document = validate_policy(DESIGN_POLICY)
    member = {"role": "sre", "groups": ["oncall"]}
    assert denials(document, {"tool": "deploy", "maxCalls": 5}, **member) == []
    assert denials(document, {"tool": "deploy", "maxCalls": 1}, **member) == []
    (denial,) = denials(document, {"tool": "deploy"}, **member)  # default 20
    assert denial.rule == 2
    assert denial.reason == "maxCalls 20 exceeds this rule's limit of 5"


def test_an_uncapped_allow_rule_lifts_the_cap() -> None:
    document = policy(
        {"effect": "allow", "tools": ["deploy"], "maxCalls": 5},
        {"effect": "allow", "tools": ["dep*"]},
    )
    assert denials(document, {"tool": "deploy", "maxCalls": 100}) == []


def test_the_widest_cap_applies_and_is_named() -> None:
    document = policy(
        {"effect": "allow", "tools": ["deploy"], "maxCalls": 5},
        {"effect": "allow", "tools": ["deploy"], "maxCalls": 10},
    )
    assert denials(document, {"tool": "deploy", "maxCalls": 10}) == []
    (denial,) = denials(document, {"tool": "deploy", "maxCalls": 11})
    assert denial.rule == 1
    assert "limit of 10" in denial.reason


def test_cap_of_a_rule_that_does_not_apply_is_ignored() -> None:
    document = policy(
        {"effect": "allow", "tools": ["deploy"]},
        {"effect": "allow", "tools": ["deploy"], "maxCalls": 1, "roles": ["dev"]},
    )
    assert denials(document, {"tool": "deploy", "maxCalls": 50}, role="dev") == []


def test_every_denied_step_is_reported() -> None:
    result = denials(
        validate_policy(DESIGN_POLICY),
        {"tool": "github_delete_repo"},
        {"tool": "github_list_issues"},
        {"tool": "send_email"},
        {"tool": "deploy"},
    )
    assert [(d.step, d.rule) for d in result] == [(0, 1), (2, None), (3, None)]


# --- CompiledPolicy (call time) ------------------------------------------------------------


def test_args_are_checked_at_call_time() -> None:
    compiled = CompiledPolicy(validate_policy(DESIGN_POLICY), role=None, groups=[])
    allowed = compiled.decide("github_get_issue", {"repo": "acme/app"})
    assert allowed.allowed
    assert allowed.rule == 0
    refused = compiled.decide("github_get_issue", {"repo": "evil/app"})
    assert refused == PolicyDecision(allowed=False, rule=None, reason=refused.reason)
    assert not compiled.decide("github_get_issue", {}).allowed  # pinned `repo` missing


def test_deny_wins_at_call_time() -> None:
    compiled = CompiledPolicy(validate_policy(DESIGN_POLICY), role=None, groups=[])
    decision = compiled.decide("github_delete_repo", {"repo": "acme/app"})
    assert not decision.allowed
    assert decision.rule == 1


def test_deny_rule_with_args_denies_only_matching_calls() -> None:
    document = policy(
        {"effect": "allow", "tools": ["github_*"]},
        {"effect": "deny", "tools": ["github_*"], "args": {"repo": {"glob": "secret/*"}}},
    )
    compiled = CompiledPolicy(document, role=None, groups=[])
    assert compiled.decide("github_get", {"repo": "acme/x"}).allowed
    denied = compiled.decide("github_get", {"repo": "secret/x"})
    assert (denied.allowed, denied.rule) == (False, 1)
    # Deny rules fail closed: a pinned argument left out, or of another type, may be the
    # forbidden one (tests/guard/test_policy_deny_fail_closed.py has the whole rule).
    assert not compiled.decide("github_get", {}).allowed
    assert not compiled.decide("github_get", {"repo": ["secret/x"]}).allowed


def test_default_decides_when_no_rule_matches_the_call() -> None:
    allow_all = CompiledPolicy(policy(default="allow"), role=None, groups=[])
    assert allow_all.decide("anything", {}) == PolicyDecision(
        True, None, allow_all.decide("x", {}).reason
    )
    deny_all = CompiledPolicy(policy(default="deny"), role=None, groups=[])
    assert not deny_all.decide("anything", {}).allowed
    assert deny_all.decide("anything", {}).rule is None


def test_scoping_at_call_time() -> None:
    document = validate_policy(DESIGN_POLICY)
    assert CompiledPolicy(document, role="sre", groups=["oncall"]).decide("deploy", {}).allowed
    assert not CompiledPolicy(document, role="sre", groups=[]).decide("deploy", {}).allowed
    assert not CompiledPolicy(document, role=None, groups=["oncall"]).decide("deploy", {}).allowed


def test_odd_tool_names_and_arguments_do_not_raise() -> None:
    compiled = CompiledPolicy(validate_policy(DESIGN_POLICY), role=None, groups=[])
    assert not compiled.decide(["github_x"], {}).allowed  # type: ignore[arg-type]
    assert not compiled.decide(None, {}).allowed  # type: ignore[arg-type]
    assert not compiled.decide("github_x", None).allowed
    assert not compiled.decide("github_x", ["repo"]).allowed


def reference_decision(
    document: dict[str, Any], role: str | None, groups: Sequence[str], tool: str, args: Any
) -> tuple[bool, int | None]:
    """The policy semantics written as plainly as possible, with no caching."""
    concerned = []
    for index, rule in enumerate(document["rules"]):
        if "roles" in rule and role not in rule["roles"]:
            continue
        if "groups" in rule and not set(rule["groups"]) & set(groups):
            continue
        if not any(fnmatch.fnmatchcase(tool, glob) for glob in rule["tools"]):
            continue
        compile_rule = compile_deny_args if rule["effect"] == "deny" else compile_args
        if compile_rule(rule.get("args", {}))(args):
            concerned.append((index, rule["effect"]))
    for index, effect in concerned:
        if effect == "deny":
            return False, index
    for index, effect in concerned:
        # A review rule admits a call like an allow: the token exists once approved.
        if effect in ("allow", "review"):
            return True, index
    return document["default"] == "allow", None


calls = st.tuples(
    st.sampled_from(["a", "b", "ab", "a_b", "b-a", "aaa", "_"]),
    st.dictionaries(
        st.sampled_from(["repo", "n"]),
        st.sampled_from(["a", "abc", "b", 1, 2, 5, True]),
        max_size=2,
    ),
)


@given(
    policies(),
    st.none() | role_names,
    st.lists(group_names, max_size=2),
    st.lists(calls, max_size=12),
)
def test_compiled_policy_agrees_with_an_uncached_reference(
    document: dict[str, Any],
    role: str | None,
    groups: list[str],
    call_sequence: list[tuple[str, dict[str, Any]]],
) -> None:
    normalised = validate_policy(document)
    compiled = CompiledPolicy(normalised, role=role, groups=groups)
    for tool, args in call_sequence + call_sequence:  # the second pass hits the cache
        decision = compiled.decide(tool, args)
        assert (decision.allowed, decision.rule) == reference_decision(
            normalised, role, groups, tool, args
        )


@given(policies(), st.none() | role_names, st.lists(group_names, max_size=2), st.data())
def test_no_rule_without_args_refuses_a_call_of_an_admitted_step(
    document: dict[str, Any], role: str | None, groups: list[str], data: Any
) -> None:
    normalised = validate_policy(document)
    tool = data.draw(st.sampled_from(["a", "b", "ab", "a_b", "_"]))
    admitted = not evaluate_plan(
        normalised, plan({"tool": tool, "maxCalls": 1}), role=role, groups=groups
    )
    if admitted:
        # A call without arguments satisfies no allow rule that pins one, and matches every
        # deny rule that pins one (they fail closed); so only the default or a deny rule
        # with args may still refuse it.
        decision = CompiledPolicy(normalised, role=role, groups=groups).decide(tool, {})
        refused_by = None if decision.rule is None else normalised["rules"][decision.rule]
        assert (
            decision.allowed
            or refused_by is None
            or (refused_by["effect"] == "deny" and refused_by.get("args"))
        )
