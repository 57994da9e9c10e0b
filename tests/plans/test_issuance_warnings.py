"""POST /v1/plans and its refresh answer `warnings` naming each step argument the policy
constrains and the step leaves free, and the rule that sets the condition."""

from __future__ import annotations

import pytest

from guard.plan import validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import (
    POLICY_DENY_OVERLAPS,
    UNPINNED_POLICY_ARGUMENT,
    evaluate_plan,
    plan_argument_warnings,
)
from members.services import member_upsert
from plans.models import Plan
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

# tests.conftest.POLICY's rules[0] admits github_* only when repo matches acme/*.
ORG_ONLY = {"tool": "github_list_issues", "args": {"org": {"eq": "acme"}}}
REPO_PINNED = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}}
NO_ARGS_RULE = {"tool": "send_email"}


def declare(persona, *steps: dict):
    return persona.client.post(
        "/v1/plans", {"plan": plan_document(steps=list(steps))}, format="json"
    )


def test_a_step_that_does_not_pin_the_rules_argument_is_issued_with_a_warning(agent):
    response = declare(agent, REPO_PINNED, ORG_ONLY)

    assert response.status_code == 201, response.content
    warnings = response.json()["warnings"]
    assert [(warning["path"], warning["code"]) for warning in warnings] == [
        ("plan.steps[1].args.repo", UNPINNED_POLICY_ARGUMENT)
    ]
    assert warnings[0]["rule"] == 0
    detail = warnings[0]["detail"]
    assert "github_list_issues" in detail
    assert 'rule rules[0] requires repo {"glob":"acme/*"}' in detail
    assert Plan.objects.filter(pk=response.json()["id"], status=Plan.Status.ACTIVE).exists()


def test_a_step_without_any_args_is_warned_about_too(agent):
    response = declare(agent, {"tool": "github_get_issue"})

    assert response.status_code == 201, response.content
    assert [warning["path"] for warning in response.json()["warnings"]] == [
        "plan.steps[0].args.repo"
    ]


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(REPO_PINNED, id="argument pinned"),
        pytest.param(
            # Pinned with another constraint than the rule's: the guard compares per call.
            {"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}},
            id="argument pinned by another operator",
        ),
        pytest.param(NO_ARGS_RULE, id="rule without args"),
    ],
)
def test_no_warning_when_the_step_pins_what_the_rule_constrains(agent, step):
    response = declare(agent, step)

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_no_warning_when_another_rule_admits_the_tool_without_conditions(agent, team):
    policy_set(
        team=team,
        slug="default",
        document={
            **POLICY,
            "rules": [*POLICY["rules"], {"effect": "allow", "tools": ["github_list_*"]}],
        },
    )

    response = declare(agent, ORG_ONLY)

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_no_warning_when_the_policy_default_allows(agent, team):
    policy_set(team=team, slug="default", document={**POLICY, "default": "allow"})

    response = declare(agent, ORG_ONLY)

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_a_refused_plan_answers_the_refusal_not_warnings(agent):
    response = declare(agent, ORG_ONLY, {"tool": "unknown_tool"})

    assert response.status_code == 403, response.content
    assert response.json()["code"] == "policy_denied"
    assert "warnings" not in response.json()


def test_a_refresh_warns_against_the_policy_in_force_now(agent, team):
    issued = declare(agent, ORG_ONLY)
    assert issued.status_code == 201, issued.content
    assert len(issued.json()["warnings"]) == 1
    # The new version admits github_* unconditionally: the warning goes away.
    policy_set(
        team=team,
        slug="default",
        document={
            **POLICY,
            "rules": [{"effect": "allow", "tools": ["github_*"]}, *POLICY["rules"][1:]],
        },
    )

    refreshed = agent.client.post(
        f"/v1/plans/{issued.json()['id']}/refresh", {"token": issued.json()["token"]}, format="json"
    )

    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["warnings"] == []


def test_a_rule_for_another_role_is_not_a_condition_of_this_members_step(agent, team):
    policy_set(
        team=team,
        slug="default",
        document={
            "version": 1,
            "default": "deny",
            "rules": [
                {"effect": "allow", "tools": ["deploy"]},
                # Applies only to sre members; alice is an engineer.
                {
                    "effect": "allow",
                    "tools": ["deploy"],
                    "roles": ["sre"],
                    "args": {"env": {"eq": "prod"}},
                },
            ],
        },
    )

    response = declare(agent, {"tool": "deploy"})

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_each_team_is_warned_by_its_own_policy(agent, other_agent, other_team):
    # The other team admits github_* without conditions.
    policy_set(
        team=other_team,
        slug="default",
        document={"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": ["*"]}]},
    )
    member_upsert(team=other_team, email="alice@acme.dev", name="Alice of Globex")

    ours = declare(agent, ORG_ONLY)
    theirs = declare(other_agent, ORG_ONLY)

    assert ours.status_code == theirs.status_code == 201
    assert len(ours.json()["warnings"]) == 1
    assert theirs.json()["warnings"] == []


# --- the guard core's predicate ---------------------------------------------------------------


def test_the_predicate_names_every_admitting_rule_and_only_the_arguments_left_free():
    policy = validate_policy(
        {
            "version": 1,
            "default": "deny",
            "rules": [
                {"effect": "allow", "tools": ["ship"], "args": {"repo": {"eq": "a"}}},
                {"effect": "deny", "tools": ["ship"], "args": {"force": {"eq": True}}},
                {
                    "effect": "allow",
                    "tools": ["sh*"],
                    "args": {"org": {"eq": "acme"}, "env": {"in": ["dev", "test"]}},
                },
            ],
        }
    )
    plan = validate_plan(
        {
            "version": 1,
            "goal": "ship",
            "user": "a@b.test",
            "steps": [{"tool": "ship", "args": {"org": {"eq": "acme"}}}],
        }
    )

    assert evaluate_plan(policy, plan, role=None, groups=[]) == []
    repo, env, force = plan_argument_warnings(policy, plan, role=None, groups=[])

    assert (repo.path, repo.rules, env.path, env.rules) == (
        "steps[0].args.repo",
        (0,),
        "steps[0].args.env",
        (2,),
    )
    assert "rules[0] requires repo" in repo.detail
    assert "rules[2] requires env" in env.detail
    for warning in (repo, env):
        assert "rules[1]" not in warning.detail  # a deny rule is no condition of admission
    # The deny rule refuses the calls passing force true, or leaving it out (0016, 0055).
    assert (force.path, force.rules, force.code) == (
        "steps[0].args.force",
        (1,),
        POLICY_DENY_OVERLAPS,
    )


def test_the_predicate_leaves_out_the_steps_evaluate_plan_refuses():
    policy = validate_policy(
        {
            "version": 1,
            "default": "deny",
            "rules": [
                {"effect": "allow", "tools": ["ship"], "args": {"repo": {"eq": "a"}}},
                {"effect": "deny", "tools": ["ship"], "name": "no shipping on Fridays"},
                {"effect": "allow", "tools": ["build"], "args": {"repo": {"eq": "a"}}},
            ],
        }
    )
    plan = validate_plan(
        {
            "version": 1,
            "goal": "ship",
            "user": "a@b.test",
            "steps": [{"tool": "ship"}, {"tool": "build"}, {"tool": "unknown"}],
        }
    )

    warnings = plan_argument_warnings(policy, plan, role=None, groups=[])

    assert [warning.path for warning in warnings] == ["steps[1].args.repo"]
