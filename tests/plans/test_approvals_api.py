"""The approval flow through the API: 202 on declaration, then POST /v1/plans/{id}/token
answering 409 while it waits, 200 once approved, 403 once denied, 410 once expired."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from audit.models import AuditRecord
from kernel.problems import Code
from plans.admin_timeline import plan_timeline
from plans.approvals import plan_approval_decide, plans_approval_expire
from plans.models import Plan, PlanToken
from policies.services import policy_set
from tests.conftest import plan_document

from .approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for
from .helpers import assert_problem, claims_of


@pytest.fixture
def review_policy(team, policy_version):
    return policy_set(team=team, slug="default", document=REVIEW_POLICY)


def declare_reviewed(agent):
    return agent.client.post(
        "/v1/plans", {"plan": plan_document(steps=REVIEWED_PLAN_STEPS)}, format="json"
    )


def ask_token(agent, plan_id):
    return agent.client.post(f"/v1/plans/{plan_id}/token")


def test_a_plan_with_a_reviewed_step_waits_for_a_person_and_nothing_is_signed(
    agent, team, review_policy
):
    response = declare_reviewed(agent)

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending_approval"
    assert body["review"] == [
        {
            "path": "plan.steps[1]",
            "step": 1,
            "stepIndex": 1,
            "stepNumber": 2,  # as the approval page and the guard's messages count it
            "tool": "send_email",
            "rule": {"index": 2, "description": "mail leaves the company (rules[2])"},
        }
    ]
    # Where a person decides: the plan's page in the approval queue.
    assert body["approvalUrl"] == (
        f"{settings.PLANGATE_ISSUER}/admin/notify/approvalrequest/{body['id']}/change/"
    )
    assert "token" not in body
    assert response["Location"].endswith(f"/v1/plans/{body['id']}/token")
    plan = Plan.objects.get(pk=body["id"])
    assert plan.status == Plan.Status.PENDING_APPROVAL
    assert plan.approval == Plan.Approval.PENDING
    assert plan.approval_deadline == plan.created_at + timedelta(seconds=3600)
    assert not PlanToken.objects.filter(plan=plan).exists()
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.APPROVAL_REQUESTED)
    assert record.plan_id == plan.id and record.user == "alice@acme.dev"
    assert record.details["review"][0]["step"] == 1


def test_a_plan_with_only_allowed_steps_needs_nobody(agent, review_policy):
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert response.status_code == 201, response.content
    assert "apr" not in claims_of(response.json()["token"])


def test_the_token_endpoint_answers_pending_then_the_approved_token(agent, team, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]

    pending = ask_token(agent, plan_id)
    assert_problem(pending, 409, Code.APPROVAL_PENDING)
    assert pending["Retry-After"] == "5"
    assert not AuditRecord.objects.filter(code=Code.APPROVAL_PENDING).exists()

    approver = approver_for(team)
    plan = Plan.objects.get(pk=plan_id)
    decision = plan_approval_decide(plan=plan, by_user=approver, approve=True)

    response = ask_token(agent, plan_id)
    assert response.status_code == 200, response.content
    body = response.json()
    claims = claims_of(body["token"])
    assert claims["apr"] == {
        "by": "carol@acme.dev",
        "at": int(decision.at.timestamp()),
        "ph": body["planHash"],
    }
    assert claims["ph"] == body["planHash"] and claims["jti"] == plan_id
    assert set(body) >= {"id", "token", "planHash", "expiresAt", "policy", "warnings"}
    plan.refresh_from_db()
    assert plan.status == Plan.Status.ACTIVE
    assert list(plan.tokens.values_list("kind", flat=True)) == ["issue"]

    detail = agent.client.get(f"/v1/plans/{plan_id}").json()
    assert detail["status"] == "active"
    assert detail["approval"]["state"] == "approved"
    assert detail["approval"]["decidedBy"] == "carol@acme.dev"


def test_a_denied_plan_answers_the_approvers_reason(agent, team, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]
    plan_approval_decide(
        plan=Plan.objects.get(pk=plan_id),
        by_user=approver_for(team),
        approve=False,
        reason="no mail to outsiders this week",
    )

    body = assert_problem(ask_token(agent, plan_id), 403, Code.APPROVAL_DENIED)

    assert "no mail to outsiders this week" in body["detail"]
    assert not PlanToken.objects.filter(plan_id=plan_id).exists()
    detail = agent.client.get(f"/v1/plans/{plan_id}").json()
    assert detail["status"] == "approval_denied"
    assert detail["approval"]["reason"] == "no mail to outsiders this week"


def test_nobody_deciding_within_the_window_expires_the_request(agent, team, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]
    later = timezone.now() + timedelta(seconds=3601)

    assert plans_approval_expire(now=later) == 1
    assert plans_approval_expire(now=later) == 0  # idempotent

    assert_problem(ask_token(agent, plan_id), 410, Code.APPROVAL_EXPIRED)
    plan = Plan.objects.get(pk=plan_id)
    assert plan.status == Plan.Status.APPROVAL_EXPIRED
    assert (
        AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_EXPIRED, plan_id=plan_id).count()
        == 1
    )


def test_the_token_endpoint_expires_a_request_past_its_deadline_itself(agent, team, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]
    Plan.objects.filter(pk=plan_id).update(approval_deadline=timezone.now() - timedelta(seconds=1))

    assert_problem(ask_token(agent, plan_id), 410, Code.APPROVAL_EXPIRED)
    assert Plan.objects.get(pk=plan_id).approval == Plan.Approval.EXPIRED


def test_another_agents_plan_is_not_found(agent, other_agent, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]

    assert_problem(ask_token(other_agent, plan_id), 404, Code.PLAN_NOT_FOUND)


def test_the_teams_window_sets_the_deadline_and_the_plan_shows_where_it_stands(
    agent, team, review_policy
):
    team.approval_window_seconds = 120
    team.save(update_fields=["approval_window_seconds"])

    body = declare_reviewed(agent).json()

    plan = Plan.objects.get(pk=body["id"])
    assert plan.approval_deadline == plan.created_at + timedelta(seconds=120)
    detail = agent.client.get(f"/v1/plans/{body['id']}").json()
    assert detail["status"] == "pending_approval"
    assert detail["approval"]["state"] == "pending"
    assert detail["approval"]["review"] == body["review"]
    assert detail["approval"]["expiresAt"] == body["expiresAt"]
    assert (detail["approval"]["decidedBy"], detail["approval"]["reason"]) == (None, None)
    assert detail["tokens"] == []


def test_the_schema_documents_the_202_and_the_token_endpoint(anonymous_client):
    schema = anonymous_client.get("/v1/schema", HTTP_ACCEPT="application/json").json()

    declare = schema["paths"]["/v1/plans"]["post"]["responses"]
    assert declare["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ApprovalRequested"
    }
    token = schema["paths"]["/v1/plans/{plan_id}/token"]["post"]
    assert {"200", "403", "404", "409", "410"} <= set(token["responses"])
    assert "approval_pending" in token["description"]
    detail = schema["components"]["schemas"]["PlanDetail"]["properties"]
    assert "approval" in detail
    assert set(schema["components"]["schemas"]["StatusEnum"]["enum"]) >= {
        "pending_approval",
        "approval_denied",
        "approval_expired",
    }


def test_the_status_feed_stops_calls_of_a_plan_until_it_is_approved(agent, team, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]

    def feed_code():
        response = Client().get(
            f"/v1/plans/{plan_id}/status", HTTP_AUTHORIZATION=f"Bearer {agent.api_key}"
        )
        assert response.status_code == 200, response.content
        return response.json()["status"], response.json()["code"]

    assert feed_code() == ("pending_approval", Code.APPROVAL_PENDING)
    plan_approval_decide(
        plan=Plan.objects.get(pk=plan_id), by_user=approver_for(team), approve=True
    )
    assert feed_code() == ("active", None)


def test_the_plans_timeline_shows_the_request_and_the_decision(agent, team, review_policy):
    plan_id = declare_reviewed(agent).json()["id"]
    plan_approval_decide(
        plan=Plan.objects.get(pk=plan_id),
        by_user=approver_for(team),
        approve=False,
        reason="not to outsiders",
    )

    timeline = plan_timeline(Plan.objects.get(pk=plan_id))

    entries = [(entry.label, str(entry.html)) for entry in timeline.head + timeline.tail]
    labels = [label for label, _ in entries]
    assert labels == ["plan declared", "approval requested", "approval decided"]
    assert "review of step 2" in entries[1][1]
    assert "denied by carol@acme.dev" in entries[2][1] and "not to outsiders" in entries[2][1]
