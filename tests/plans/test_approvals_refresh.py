"""An approved plan's tokens after a policy change: the token endpoint and refresh sign with
the current policy, keep `apr` while the policy asks review of the same steps or fewer, and
answer approval_required when it asks review of a step nobody approved."""

from __future__ import annotations

import copy

import pytest

from audit.models import AuditRecord
from kernel.problems import Code
from plans.approvals import plan_approval_decide
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from policies.services import policy_set
from tests.conftest import plan_document

from .approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for
from .helpers import assert_problem, claims_of


@pytest.fixture
def approved(agent, team, policy_version) -> dict:
    """An approved plan and its first token (the answer of POST /v1/plans/{id}/token)."""
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    plan_id = agent.client.post(
        "/v1/plans", {"plan": plan_document(steps=REVIEWED_PLAN_STEPS)}, format="json"
    ).json()["id"]
    plan_approval_decide(
        plan=Plan.objects.get(pk=plan_id), by_user=approver_for(team), approve=True
    )
    response = agent.client.post(f"/v1/plans/{plan_id}/token")
    assert response.status_code == 200, response.content
    return response.json()


def publish(team, *extra_rules, drop_review=False):
    document = copy.deepcopy(REVIEW_POLICY)
    if drop_review:
        document["rules"] = [rule for rule in document["rules"] if rule["effect"] != "review"]
        document["rules"].append({"effect": "allow", "tools": ["send_email"]})
    document["rules"].extend(extra_rules)
    return policy_set(team=team, slug="default", document=document)


def refresh(agent, issued):
    return agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )


def test_refresh_under_a_policy_asking_the_same_review_keeps_the_approval(agent, team, approved):
    publish(team, {"effect": "allow", "tools": ["calendar_*"]})

    response = refresh(agent, approved)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["policy"]["version"] == 3
    assert claims_of(body["token"])["apr"] == claims_of(approved["token"])["apr"]


def test_refresh_under_a_policy_asking_fewer_reviews_keeps_the_approval(agent, team, approved):
    publish(team, drop_review=True)

    response = refresh(agent, approved)

    assert response.status_code == 200, response.content
    assert claims_of(response.json()["token"])["apr"]["by"] == "carol@acme.dev"


def test_a_policy_adding_review_to_a_step_makes_refresh_answer_approval_required(
    agent, team, approved
):
    document = copy.deepcopy(REVIEW_POLICY)
    document["rules"].insert(0, {"effect": "review", "tools": ["github_list_*"]})
    policy_set(team=team, slug="default", document=document)
    tokens_before = PlanToken.objects.count()

    body = assert_problem(refresh(agent, approved), 403, Code.APPROVAL_REQUIRED)

    assert [error["path"] for error in body["errors"]] == ["plan.steps[0]"]
    assert PlanToken.objects.count() == tokens_before
    record = AuditRecord.objects.filter(kind=AuditRecord.Kind.REFRESH_REFUSED).get()
    assert record.code == Code.APPROVAL_REQUIRED
    # The token endpoint answers the same: the approval does not cover the new review.
    assert_problem(
        agent.client.post(f"/v1/plans/{approved['id']}/token"), 403, Code.APPROVAL_REQUIRED
    )


def test_a_plan_issued_without_review_needs_approval_once_the_policy_asks_it(agent, team):
    issued = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    policy_set(
        team=team,
        slug="default",
        document={**REVIEW_POLICY, "rules": [{"effect": "review", "tools": ["github_*"]}]},
    )

    body = assert_problem(refresh(agent, issued), 403, Code.APPROVAL_REQUIRED)

    assert [error["path"] for error in body["errors"]] == ["plan.steps[0]", "plan.steps[1]"]


def test_the_token_endpoint_signs_with_the_current_policy_and_refuses_a_denial(
    agent, team, policy_version
):
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    plan_id = agent.client.post(
        "/v1/plans", {"plan": plan_document(steps=REVIEWED_PLAN_STEPS)}, format="json"
    ).json()["id"]
    plan_approval_decide(
        plan=Plan.objects.get(pk=plan_id), by_user=approver_for(team), approve=True
    )
    publish(team, {"effect": "deny", "tools": ["send_email"]})

    assert_problem(agent.client.post(f"/v1/plans/{plan_id}/token"), 403, Code.POLICY_DENIED)
    assert not PlanToken.objects.filter(plan_id=plan_id).exists()

    newer = publish(team, {"effect": "allow", "tools": ["calendar_*"]})
    response = agent.client.post(f"/v1/plans/{plan_id}/token")
    assert response.status_code == 200, response.content
    assert claims_of(response.json()["token"])["polh"] == newer.hash


def test_asking_again_signs_a_fresh_token_recorded_as_such(agent, approved):
    again = agent.client.post(f"/v1/plans/{approved['id']}/token")

    assert again.status_code == 200, again.content
    assert claims_of(again.json()["token"])["apr"] == claims_of(approved["token"])["apr"]
    kinds = AuditRecord.objects.filter(plan_id=approved["id"]).values_list("kind", flat=True)
    assert list(kinds.order_by("id")) == [
        AuditRecord.Kind.APPROVAL_REQUESTED,
        AuditRecord.Kind.APPROVAL_DECIDED,
        AuditRecord.Kind.PLAN_ISSUED,
        AuditRecord.Kind.TOKEN_REFRESHED,
    ]


def test_a_revoked_approved_plan_gets_no_token(agent, approved):
    plan_revoke(plan=Plan.objects.get(pk=approved["id"]), by="root")

    assert_problem(agent.client.post(f"/v1/plans/{approved['id']}/token"), 410, Code.PLAN_REVOKED)


def test_a_plan_that_needed_no_approval_has_no_token_to_fetch(agent):
    issued = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()

    assert_problem(
        agent.client.post(f"/v1/plans/{issued['id']}/token"), 409, Code.APPROVAL_NOT_PENDING
    )
