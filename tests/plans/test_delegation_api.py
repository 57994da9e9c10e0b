"""POST /v1/plans/{id}/delegations: child plans inside their parent, with the parent's
calls and budgets partitioned among them, stopped with it (docs/decisions/0070)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditRecord
from guard.claims import MAX_ACT_DEPTH
from guard.decisions import Decision
from kernel.problems import Code
from members.services import agent_update
from plans.delegation import plan_delegate
from plans.models import Plan, PlanToken
from plans.serializers import DelegatedTokenSerializer, delegated_token_body
from plans.services import plan_issue, plan_revoke, plans_expire
from plans.status_list import team_status_bits
from tests.conftest import make_agent, plan_document

from .helpers import assert_problem, claims_of, table_counts

AT = "2026-11-30T09:00:00.250Z"
REPO = {"repo": {"eq": "acme/public-app"}}


def declare(persona, document: dict | None = None) -> dict:
    response = persona.client.post(
        "/v1/plans", {"plan": document or plan_document()}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def delegate(persona, parent_id: str, steps: list | None = None, **body):
    document = body.pop("plan", None) or plan_document(
        goal="List the issues",
        steps=steps
        if steps is not None
        else [{"tool": "github_list_issues", "args": REPO, "maxCalls": 2}],
    )
    return persona.client.post(
        f"/v1/plans/{parent_id}/delegations", {"plan": document, **body}, format="json"
    )


def written() -> tuple[int, int, int]:
    plans, tokens = table_counts()
    return plans, tokens, AuditRecord.objects.exclude(kind=AuditRecord.Kind.PLAN_REFUSED).count()


def errors(body: dict) -> list[str]:
    return [error["path"] for error in body["errors"]]


def test_a_step_inside_the_parent_is_signed_as_a_child(agent):
    parent = declare(agent)

    response = delegate(agent, parent["id"])

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["parent"] == {"id": parent["id"], "planHash": parent["planHash"]}
    assert body["agent"] == agent.agent.pk
    assert body["reserved"] == {"calls": {"0": 2}, "budgets": {}, "steps": {"0": 0}}
    assert set(body) >= {"id", "token", "planHash", "expiresAt", "policy", "warnings"}
    claims = claims_of(body["token"])
    assert claims["parent"] == {"jti": parent["id"], "ph": parent["planHash"]}
    assert claims["act"] == {"sub": agent.agent.pk, "act": {"sub": agent.agent.pk}}
    assert claims["sub"] == "alice@acme.dev"
    child = Plan.objects.get(pk=body["id"])
    assert child.parent_id == parent["id"]
    assert child.expires_at <= Plan.objects.get(pk=parent["id"]).expires_at
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_DELEGATED)
    assert record.plan_id == parent["id"]
    assert record.details["child"] == body["id"]
    assert record.details["reserved"] == body["reserved"]


def test_a_narrower_argument_is_inside(agent):
    parent = declare(
        agent,
        plan_document(steps=[{"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}}]),
    )

    response = delegate(agent, parent["id"])

    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("step", "path"),
    [
        ({"tool": "send_email"}, "plan.steps[0].tool"),
        (
            {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/secret"}}},
            "plan.steps[0].args.repo",
        ),
        ({"tool": "github_list_issues"}, "plan.steps[0].args.repo"),
        (
            {"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}},
            "plan.steps[0].args.repo",
        ),
    ],
)
def test_a_widening_step_is_refused_at_its_path_and_writes_nothing(agent, step, path):
    parent = declare(agent)
    before = written()

    response = delegate(agent, parent["id"], steps=[step])

    body = assert_problem(response, 403, Code.DELEGATION_WIDENS)
    assert errors(body) == [path]
    assert written() == before
    refused = AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REFUSED).get()
    assert refused.code == Code.DELEGATION_WIDENS


def test_another_user_is_widening(agent, sre_member):
    parent = declare(agent)
    before = written()

    response = delegate(
        agent,
        parent["id"],
        plan=plan_document(
            user=sre_member.email, steps=[{"tool": "github_list_issues", "args": REPO}]
        ),
    )

    assert errors(assert_problem(response, 403, Code.DELEGATION_WIDENS)) == ["plan.user"]
    assert written() == before


def test_calls_are_partitioned_among_children(agent):
    parent = declare(agent)  # step 0: maxCalls 3
    first = delegate(agent, parent["id"])
    assert first.status_code == 201, first.content
    before = written()

    second = delegate(agent, parent["id"])

    body = assert_problem(second, 409, Code.BUDGET_UNAVAILABLE)
    assert errors(body) == ["plan.steps[0].maxCalls"]
    assert written() == before
    one = delegate(
        agent, parent["id"], steps=[{"tool": "github_list_issues", "args": REPO, "maxCalls": 1}]
    )
    assert one.status_code == 201, one.content


def test_a_child_step_takes_the_next_parent_step_with_calls_left(agent):
    step = {"tool": "github_list_issues", "args": REPO, "maxCalls": 2}
    parent = declare(agent, plan_document(steps=[step, step]))
    assert delegate(agent, parent["id"]).status_code == 201

    response = delegate(agent, parent["id"])

    assert response.status_code == 201, response.content
    assert response.json()["reserved"]["calls"] == {"1": 2}


def test_the_parents_recorded_calls_count(agent):
    parent = declare(agent)
    allowed = {
        "at": AT,
        "tool": "github_list_issues",
        "decision": Decision.ALLOWED,
        "step": 0,
        "argsDigest": "0" * 64,
    }
    events = agent.client.post(
        f"/v1/plans/{parent['id']}/events", {"events": [allowed, allowed]}, format="json"
    )
    assert events.status_code == 202, events.content

    response = delegate(agent, parent["id"])  # 2 wanted, 3 - 2 = 1 left

    assert errors(assert_problem(response, 409, Code.BUDGET_UNAVAILABLE)) == [
        "plan.steps[0].maxCalls"
    ]


def test_a_reservation_is_not_given_back_when_the_child_is_revoked(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()
    plan_revoke(plan=Plan.objects.get(pk=child["id"]), by="admin")

    response = delegate(agent, parent["id"])

    assert_problem(response, 409, Code.BUDGET_UNAVAILABLE)


def test_another_agents_or_teams_plan_is_not_found(agent, other_agent, team, policy_version):
    parent = declare(agent)
    colleague = make_agent(team, "colleague", policy_version)

    assert_problem(delegate(colleague, parent["id"]), 404, Code.PLAN_NOT_FOUND)
    assert_problem(delegate(other_agent, parent["id"]), 404, Code.PLAN_NOT_FOUND)
    assert Plan.objects.count() == 1


def test_another_agent_receives_only_when_it_accepts_delegations(agent, team, policy_version):
    parent = declare(agent)
    worker = make_agent(team, "worker", policy_version)

    refused = delegate(agent, parent["id"], agent=worker.agent.pk)
    assert errors(assert_problem(refused, 403, Code.DELEGATION_REFUSED)) == ["agent"]
    not_an_id = delegate(agent, parent["id"], agent="not-an-agent")
    assert errors(assert_problem(not_an_id, 403, Code.DELEGATION_REFUSED)) == ["agent"]

    agent_update(agent=worker.agent, accepts_delegations=True)
    response = delegate(agent, parent["id"], agent=worker.agent.pk)

    assert response.status_code == 201, response.content
    claims = claims_of(response.json()["token"])
    assert claims["agent"] == worker.agent.pk
    assert claims["act"] == {"sub": worker.agent.pk, "act": {"sub": agent.agent.pk}}
    # The child is the worker's: it refreshes it with its own key.
    refreshed = worker.client.post(
        f"/v1/plans/{response.json()['id']}/refresh",
        {"token": response.json()["token"]},
        format="json",
    )
    assert refreshed.status_code == 200, refreshed.content


def test_a_grandchild_nests_the_act_chain(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()

    grandchild = delegate(
        agent, child["id"], steps=[{"tool": "github_list_issues", "args": REPO, "maxCalls": 1}]
    )

    assert grandchild.status_code == 201, grandchild.content
    act = claims_of(grandchild.json()["token"])["act"]
    pk = agent.agent.pk
    assert act == {"sub": pk, "act": {"sub": pk, "act": {"sub": pk}}}


def test_revoking_the_parent_revokes_every_descendant(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()
    grandchild = delegate(
        agent, child["id"], steps=[{"tool": "github_list_issues", "args": REPO, "maxCalls": 1}]
    ).json()

    plan_revoke(plan=Plan.objects.get(pk=parent["id"]), by="admin", reason="leak")

    for descendant in (child, grandchild):
        row = Plan.objects.get(pk=descendant["id"])
        assert row.status == Plan.Status.REVOKED
        assert row.revoked_by == "admin"
        assert parent["id"] in row.revoke_reason
        refresh = agent.client.post(
            f"/v1/plans/{descendant['id']}/refresh", {"token": descendant["token"]}, format="json"
        )
        assert_problem(refresh, 410, Code.PLAN_REVOKED)
        feed = Client().get(
            f"/v1/plans/{descendant['id']}/status", HTTP_AUTHORIZATION=f"Bearer {agent.api_key}"
        )
        assert feed.json()["code"] == "plan_revoked"
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REVOKED).count() == 3


def test_ending_the_parent_ends_its_children(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()

    ended = agent.client.post(
        f"/v1/plans/{parent['id']}/events",
        {"end": {"outcome": "completed", "reason": "done"}},
        format="json",
    )

    assert ended.status_code == 202, ended.content
    assert Plan.objects.get(pk=child["id"]).status == Plan.Status.ENDED
    refresh = agent.client.post(
        f"/v1/plans/{child['id']}/refresh", {"token": child["token"]}, format="json"
    )
    assert_problem(refresh, 410, Code.PLAN_REVOKED)


def test_a_child_never_refreshes_past_its_parent(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()
    soon = timezone.now() + timedelta(seconds=60)
    Plan.objects.filter(pk=parent["id"]).update(expires_at=soon)

    refreshed = agent.client.post(
        f"/v1/plans/{child['id']}/refresh", {"token": child["token"]}, format="json"
    )
    assert refreshed.status_code == 200, refreshed.content
    assert claims_of(refreshed.json()["token"])["exp"] <= int(soon.timestamp())

    Plan.objects.filter(pk=parent["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = agent.client.post(
        f"/v1/plans/{child['id']}/refresh", {"token": child["token"]}, format="json"
    )
    assert_problem(expired, 410, Code.PLAN_EXPIRED)


def test_a_revoked_parent_delegates_nothing(agent):
    parent = declare(agent)
    plan_revoke(plan=Plan.objects.get(pk=parent["id"]), by="admin")
    before = written()

    assert_problem(delegate(agent, parent["id"]), 410, Code.PLAN_REVOKED)
    assert written() == before
    assert PlanToken.objects.count() == 1


def test_a_chain_deeper_than_the_act_limit_is_refused(agent):
    one = [{"tool": "github_list_issues", "args": REPO, "maxCalls": 1}]
    plan_id = declare(agent)["id"]
    for _ in range(MAX_ACT_DEPTH - 1):  # the root's agent and 7 more: 8 levels
        response = delegate(agent, plan_id, steps=one)
        assert response.status_code == 201, response.content
        plan_id = response.json()["id"]
    assert act_depth(claims_of(response.json()["token"])["act"]) == MAX_ACT_DEPTH

    deeper = delegate(agent, plan_id, steps=one)

    assert errors(assert_problem(deeper, 403, Code.DELEGATION_REFUSED)) == ["agent"]


def act_depth(act: dict) -> int:
    depth = 1
    while "act" in act:
        depth, act = depth + 1, act["act"]
    return depth


def test_an_undecidable_relation_is_refused_as_widening(agent):
    parent = declare(
        agent,
        plan_document(steps=[{"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}}]),
    )
    # (?i) is a regex feature guard.relation does not model: inside cannot be shown.
    step = {"tool": "github_list_issues", "args": {"repo": {"regex": "(?i)acme/app"}}}

    response = delegate(agent, parent["id"], steps=[step])

    body = assert_problem(response, 403, Code.DELEGATION_WIDENS)
    assert errors(body) == ["plan.steps[0].args.repo"]
    assert "cannot be shown" in body["errors"][0]["detail"]


def test_the_plan_read_names_its_parent_and_reservation(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()

    read = agent.client.get(f"/v1/plans/{child['id']}").json()
    root = agent.client.get(f"/v1/plans/{parent['id']}").json()

    assert (read["parent"], read["reserved"]) == (parent["id"], child["reserved"])
    assert (root["parent"], root["reserved"]) == (None, None)


def test_the_answer_is_what_its_serializer_declares(agent):
    parent = plan_issue(agent=agent.agent, document=plan_document()).plan

    delegated = plan_delegate(
        agent=agent.agent,
        parent_id=parent.pk,
        document=plan_document(steps=[{"tool": "github_get_issue", "args": REPO}]),
    )

    body = delegated_token_body(delegated)
    assert body == dict(DelegatedTokenSerializer(delegated).data)
    assert list(body) == list(DelegatedTokenSerializer(delegated).data)


def bit(team_id: int, idx: int) -> int:
    return (team_status_bits(team_id).data[idx // 8] >> (idx % 8)) & 1


def test_a_child_takes_a_status_list_index_and_its_bit_flips_with_the_parent(agent, team):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()
    status = claims_of(child["token"])["status"]["status_list"]
    assert status["idx"] == Plan.objects.get(pk=child["id"]).status_idx
    assert status["idx"] != claims_of(parent["token"])["status"]["status_list"]["idx"]
    assert bit(team.pk, status["idx"]) == 0

    plan_revoke(plan=Plan.objects.get(pk=parent["id"]), by="admin")

    assert bit(team.pk, status["idx"]) == 1


def test_a_refused_delegation_takes_no_status_list_index(agent, team):
    parent = declare(agent)
    assert delegate(agent, parent["id"]).status_code == 201
    team.refresh_from_db()
    before = team.status_list_next

    assert_problem(delegate(agent, parent["id"]), 409, Code.BUDGET_UNAVAILABLE)

    team.refresh_from_db()
    assert team.status_list_next == before


def test_expiring_plans_expires_a_child_with_its_parent(agent):
    parent = declare(agent)
    child = delegate(agent, parent["id"]).json()
    ends = Plan.objects.get(pk=parent["id"]).expires_at
    assert Plan.objects.get(pk=child["id"]).expires_at <= ends

    plans_expire(now=ends)

    assert set(Plan.objects.values_list("status", flat=True)) == {Plan.Status.EXPIRED}
