"""A version-2 policy's ``maxSum`` through the API (docs/decisions/0066, section 4): a plan
whose budget keeps to the ceiling is issued; one over it is refused (``policy_denied``, at
the step's argument path) and writes nothing; a ceiling lowered after issuance refuses the
refresh, and the impact preview and the simulator say so beforehand."""

from __future__ import annotations

import copy

import pytest

from kernel.problems import Code
from plans.models import Plan
from policies.services import policy_set
from rehearsal.impact import policy_impact
from rehearsal.simulator import policy_draft, simulate_call, simulate_plan
from tests.conftest import plan_document

from .helpers import assert_problem, claims_of, table_counts

POLICY_V2 = {
    "version": 2,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}},
        {
            "effect": "allow",
            "tools": ["refund"],
            "args": {"order": {"glob": "o-*"}, "amount": {"type": "number"}},
            "additionalArgs": False,
            "maxSum": {"amount": 1000},
            "name": "refunds capped",
        },
    ],
}


def with_ceiling(ceiling: float) -> dict:
    document = copy.deepcopy(POLICY_V2)
    document["rules"][1]["maxSum"] = {"amount": ceiling}
    return document


def refund_plan(maximum: float, goal: str = "Refund the late orders") -> dict:
    return plan_document(
        version=2,
        goal=goal,
        steps=[
            {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/shop"}}},
            {
                "tool": "refund",
                "id": "refund",
                "args": {"order": {"glob": "o-*"}},
                "additionalArgs": False,
            },
        ],
        budgets=[{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": maximum}],
    )


@pytest.fixture
def version_2(agent, team):
    return policy_set(team=team, slug="default", document=POLICY_V2)


def declare(persona, document):
    return persona.client.post("/v1/plans", {"plan": document}, format="json")


def refresh(persona, plan_id, token):
    return persona.client.post(f"/v1/plans/{plan_id}/refresh", {"token": token}, format="json")


def test_a_plan_whose_budget_keeps_to_the_ceiling_is_issued(agent, version_2):
    response = declare(agent, refund_plan(1000))

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["warnings"] == []
    assert body["policy"]["version"] == version_2.number
    claims = claims_of(body["token"])
    assert claims["pol"]["version"] == 2
    assert claims["plan"]["budgets"] == [
        {"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 1000}
    ]
    assert Plan.objects.filter(pk=body["id"], status=Plan.Status.ACTIVE).exists()


def test_a_plan_whose_budget_passes_the_ceiling_is_refused_and_writes_nothing(agent, version_2):
    before = table_counts()

    problem = assert_problem(declare(agent, refund_plan(1500)), 403, Code.POLICY_DENIED)

    (error,) = problem["errors"]
    assert error["path"] == "plan.steps[1].args.amount"
    assert (
        'allow rule "refunds capped" caps the sum of amount at 1000 (maxSum)' in (error["detail"])
    )
    assert "'refunds' lets this step spend 1500" in error["detail"]
    assert "(rules[1])" in error["detail"]
    assert table_counts() == before


def test_a_lowered_ceiling_refuses_the_refresh_and_signs_nothing(agent, team, version_2):
    issued = declare(agent, refund_plan(800)).json()
    policy_set(team=team, slug="default", document=with_ceiling(500))
    before = table_counts()

    problem = assert_problem(refresh(agent, issued["id"], issued["token"]), 403, Code.POLICY_DENIED)

    assert [error["path"] for error in problem["errors"]] == ["plan.steps[1].args.amount"]
    assert table_counts() == before
    # A ceiling the budget still keeps to renews it.
    policy_set(team=team, slug="default", document=with_ceiling(800))
    assert refresh(agent, issued["id"], issued["token"]).status_code == 200


def test_the_impact_preview_lists_the_plan_a_lowered_ceiling_refuses(agent, version_2):
    tight = declare(agent, refund_plan(800, goal="tight")).json()
    small = declare(agent, refund_plan(300, goal="small")).json()

    impact = policy_impact(policy=agent.agent.policy, document=with_ceiling(500))

    assert (impact.plans_checked, impact.plans_affected) == (2, 1)
    (refused,) = impact.plans
    assert refused.id == tight["id"]
    (step,) = refused.steps
    assert (step.index, step.path, step.rule) == (1, "steps[1].args.amount", 1)
    assert "caps the sum of amount at 500" in step.reason
    assert small["id"] not in {plan.id for plan in (*impact.plans, *impact.warned)}
    # The policy as published refuses neither: each step is judged with its budgets.
    unchanged = policy_impact(policy=agent.agent.policy, document=POLICY_V2)
    assert unchanged.plans_affected == 0


def test_the_simulator_answers_the_refusal_issuance_gives(agent, member, version_2):
    lowered = policy_draft(policy=agent.agent.policy, document=with_ceiling(500))

    refused = simulate_plan(version=lowered, member=member, document=refund_plan(800))
    admitted = simulate_plan(version=lowered, member=member, document=refund_plan(500))

    assert refused.decision == Code.POLICY_DENIED
    assert [(step.index, step.tool, step.rule) for step in refused.denials] == [(1, "refund", 1)]
    (shown,) = refused.as_json()["steps"]
    assert shown["path"] == "steps[1].args.amount"
    assert "caps the sum of amount at 500" in shown["reason"]
    assert admitted.allowed
    call = simulate_call(
        version=lowered,
        member=member,
        document=refund_plan(500),
        tool="refund",
        args={"order": "o-7", "amount": 120},
    )
    assert call.allowed
    extra = simulate_call(
        version=lowered,
        member=member,
        document=refund_plan(500),
        tool="refund",
        args={"order": "o-7", "amount": 120, "note": "x"},
    )
    assert not extra.allowed
