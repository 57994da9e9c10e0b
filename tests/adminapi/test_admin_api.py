"""The admin API: each resource through its door, the token's team only, read-only tokens
refused writes, every refusal problem+json naming its fields, and nothing written then."""

from __future__ import annotations

import pytest

from adminapi.models import AdminToken
from adminapi.tokens import admin_token_create, admin_token_revoke
from audit.models import AuditRecord
from kernel.problems import Code
from members.models import Agent, ApiKey, Member
from plans.models import Plan
from policies.models import Policy, PolicyVersion
from teams.models import Group, Role
from tests.conftest import POLICY, plan_document
from tests.plans.approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for

from .conftest import token_client

pytestmark = pytest.mark.django_db

PROBLEM = "application/problem+json"


def problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(PROBLEM)
    body = response.json()
    assert body["code"] == code
    return body


def paths(body: dict) -> list[str]:
    return [error["path"] for error in body.get("errors", [])]


# --- authentication and scope -------------------------------------------------------------


def test_no_token_unknown_token_and_revoked_token_are_refused(team, anonymous_client):
    problem(anonymous_client.get("/v1/admin/members"), 401, Code.INVALID_ADMIN_TOKEN)
    anonymous_client.credentials(HTTP_AUTHORIZATION="Bearer pgadm_000000000000_nope")
    problem(anonymous_client.get("/v1/admin/members"), 401, Code.INVALID_ADMIN_TOKEN)
    token, plaintext = admin_token_create(team=team, can_write=True)
    admin_token_revoke(token=token)
    anonymous_client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    problem(anonymous_client.get("/v1/admin/members"), 401, Code.INVALID_ADMIN_TOKEN)


def test_an_agents_api_key_is_not_an_admin_token(agent):
    problem(agent.client.get("/v1/admin/members"), 401, Code.INVALID_ADMIN_TOKEN)


def test_a_read_only_token_reads_but_cannot_write(read_api, member):
    assert read_api.get("/v1/admin/members").status_code == 200
    body = problem(
        read_api.post("/v1/admin/members", {"email": "new@acme.dev"}, format="json"),
        403,
        Code.READ_ONLY_TOKEN,
    )
    assert "write" in body["detail"]
    assert not Member.objects.filter(email="new@acme.dev").exists()


def test_another_teams_rows_are_not_found(admin_api, outsider, other_agent):
    assert admin_api.get("/v1/admin/members").json()["count"] == 0
    problem(admin_api.get(f"/v1/admin/members/{outsider.pk}"), 404, Code.NOT_FOUND)
    problem(admin_api.get(f"/v1/admin/agents/{other_agent.agent.pk}"), 404, Code.NOT_FOUND)
    problem(
        admin_api.patch(f"/v1/admin/members/{outsider.pk}", {"active": False}, format="json"),
        404,
        Code.NOT_FOUND,
    )
    outsider.refresh_from_db()
    assert outsider.is_active


def test_a_successful_call_records_the_tokens_last_use(team):
    client = token_client(team, write=False)
    token = AdminToken.objects.get()
    assert token.last_used_at is None
    client.get("/v1/admin/roles")
    token.refresh_from_db()
    assert token.last_used_at is not None


# --- members, roles, groups ---------------------------------------------------------------


def test_members_are_created_listed_changed_and_disabled(admin_api, team):
    created = admin_api.post(
        "/v1/admin/members",
        {"email": "Bob@Acme.dev", "name": "Bob", "role": "sre", "groups": ["oncall"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["email"] == "bob@acme.dev"
    assert body["role"] == "sre" and body["groups"] == ["oncall"] and body["active"] is True

    listed = admin_api.get("/v1/admin/members", {"email": "BOB@acme.dev"}).json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == body["id"]

    changed = admin_api.patch(
        f"/v1/admin/members/{body['id']}",
        {"groups": ["oncall", "platform"], "role": None, "active": False},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["groups"] == ["oncall", "platform"]
    assert changed.json()["role"] is None
    member = Member.objects.get(pk=body["id"])
    assert not member.is_active
    records = AuditRecord.objects.filter(team=team, details__object="member").order_by("id")
    assert records.last().actor.startswith("admin token pgadm_")


def test_disabling_a_member_stops_their_plans_refresh(admin_api, agent, member):
    declared = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert declared.status_code == 201
    admin_api.patch(f"/v1/admin/members/{member.pk}", {"active": False}, format="json")
    refreshed = agent.client.post(
        f"/v1/plans/{declared.json()['id']}/refresh",
        {"token": declared.json()["token"]},
        format="json",
    )
    problem(refreshed, 403, Code.USER_DISABLED)


def test_a_bad_member_body_names_each_field_and_writes_nothing(admin_api, team):
    before = AuditRecord.objects.count()
    body = problem(
        admin_api.post(
            "/v1/admin/members",
            {"email": "not-an-email", "groups": "oncall", "active": "yes", "colour": 1},
            format="json",
        ),
        400,
        Code.INVALID_REQUEST,
    )
    assert sorted(paths(body)) == ["active", "colour", "email", "groups"]
    assert not Member.objects.exists()
    assert AuditRecord.objects.count() == before


def test_a_second_member_with_the_same_email_is_refused(admin_api, member):
    body = problem(
        admin_api.post("/v1/admin/members", {"email": "ALICE@acme.dev"}, format="json"),
        400,
        Code.INVALID_REQUEST,
    )
    assert paths(body) == ["email"]
    assert Member.objects.count() == 1


def test_roles_and_groups_are_created_once(admin_api, team):
    assert admin_api.post("/v1/admin/roles", {"name": "sre"}, format="json").status_code == 201
    again = problem(
        admin_api.post("/v1/admin/roles", {"name": "sre"}, format="json"),
        400,
        Code.INVALID_REQUEST,
    )
    assert paths(again) == ["name"]
    made = admin_api.post(
        "/v1/admin/groups", {"name": "oncall", "description": "pager"}, format="json"
    )
    assert made.status_code == 201 and made.json()["description"] == "pager"
    assert [row["name"] for row in admin_api.get("/v1/admin/roles").json()["results"]] == ["sre"]
    assert Role.objects.filter(team=team).count() == 1
    assert Group.objects.filter(team=team, name="oncall").exists()


# --- agents and keys ----------------------------------------------------------------------


def test_agents_and_their_keys(admin_api, policy_version, team):
    made = admin_api.post(
        "/v1/admin/agents", {"name": "triage", "policy": "default"}, format="json"
    )
    assert made.status_code == 201, made.content
    agent_id = made.json()["id"]
    key = admin_api.post(f"/v1/admin/agents/{agent_id}/keys", {"name": "ci"}, format="json")
    assert key.status_code == 201
    plaintext = key.json()["key"]
    assert plaintext.startswith("pg_")
    listed = admin_api.get(f"/v1/admin/agents/{agent_id}/keys").json()
    assert [row["prefix"] for row in listed] == [key.json()["prefix"]]
    assert "key" not in listed[0]
    assert plaintext not in str(ApiKey.objects.values_list())

    revoked = admin_api.post(f"/v1/admin/agents/{agent_id}/keys/{key.json()['prefix']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revokedAt"] is not None

    disabled = admin_api.patch(f"/v1/admin/agents/{agent_id}", {"active": False}, format="json")
    assert disabled.json()["active"] is False
    assert not Agent.objects.get(pk=agent_id).is_active


def test_an_agent_naming_an_unknown_policy_is_refused(admin_api, policy_version):
    body = problem(
        admin_api.post("/v1/admin/agents", {"name": "x", "policy": "nope"}, format="json"),
        400,
        Code.INVALID_REQUEST,
    )
    assert paths(body) == ["policy"]
    assert not Agent.objects.exists()


# --- policies -----------------------------------------------------------------------------


def test_publishing_with_expected_base_and_the_published_meanwhile_guard(admin_api, team):
    first = admin_api.post(
        "/v1/admin/policies/ops/versions",
        {"document": POLICY, "expectedBase": None, "comment": "first"},
        format="json",
    )
    assert first.status_code == 201, first.content
    assert first.json()["version"]["number"] == 1
    same = admin_api.post(
        "/v1/admin/policies/ops/versions",
        {"document": POLICY, "expectedBase": 1},
        format="json",
    )
    assert same.status_code == 200 and same.json()["published"] is False

    second = {**POLICY, "default": "allow"}
    assert (
        admin_api.post(
            "/v1/admin/policies/ops/versions",
            {"document": second, "expectedBase": 1},
            format="json",
        ).status_code
        == 201
    )
    stale = problem(
        admin_api.post(
            "/v1/admin/policies/ops/versions",
            {"document": {**POLICY, "rules": []}, "expectedBase": 1},
            format="json",
        ),
        409,
        Code.PUBLISHED_MEANWHILE,
    )
    assert paths(stale) == ["expectedBase"]
    assert PolicyVersion.objects.filter(policy__slug="ops").count() == 2

    read = admin_api.get("/v1/admin/policies/ops").json()
    assert read["active"]["number"] == 2 and read["active"]["document"]["default"] == "allow"
    versions = admin_api.get("/v1/admin/policies/ops/versions").json()
    assert [row["number"] for row in versions["results"]] == [2, 1]
    assert admin_api.get("/v1/admin/policies/ops/versions/1").json()["comment"] == "first"


def test_expected_base_is_required_and_a_bad_document_names_its_paths(admin_api):
    missing = problem(
        admin_api.post("/v1/admin/policies/ops/versions", {"document": POLICY}, format="json"),
        400,
        Code.INVALID_REQUEST,
    )
    assert paths(missing) == ["expectedBase"]
    bad = problem(
        admin_api.post(
            "/v1/admin/policies/ops/versions",
            {"document": {**POLICY, "default": "maybe"}, "expectedBase": None},
            format="json",
        ),
        400,
        Code.INVALID_POLICY,
    )
    assert any("default" in path for path in paths(bad))
    assert not Policy.objects.filter(slug="ops").exists()


def test_a_new_policy_with_an_expected_base_is_refused(admin_api):
    problem(
        admin_api.post(
            "/v1/admin/policies/ops/versions",
            {"document": POLICY, "expectedBase": 3},
            format="json",
        ),
        400,
        Code.INVALID_REQUEST,
    )
    assert not Policy.objects.filter(slug="ops").exists()


def test_preview_counts_the_live_plans_a_document_would_refuse(read_api, agent):
    assert (
        agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").status_code == 201
    )
    deny_github = {**POLICY, "rules": [{"effect": "allow", "tools": ["send_email"]}]}
    answer = read_api.post(
        "/v1/admin/policies/default/preview", {"document": deny_github}, format="json"
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["plansChecked"] == 1 and body["plansAffected"] == 1
    assert body["plans"][0]["steps"][0]["tool"] == "github_list_issues"
    assert body["team"] == "default"
    new = read_api.post("/v1/admin/policies/brand-new/preview", {"document": POLICY}, format="json")
    assert new.json()["currentVersion"] is None and new.json()["plansChecked"] == 0


def test_simulate_a_version_and_a_draft(read_api, policy_version, member):
    allowed = read_api.post(
        "/v1/admin/policies/default/simulate",
        {
            "user": "alice@acme.dev",
            "plan": plan_document(),
            "call": {"tool": "github_list_issues", "args": {"repo": "acme/public-app"}},
        },
        format="json",
    )
    assert allowed.status_code == 200, allowed.content
    assert allowed.json()["call"]["decision"] == "allowed"
    draft = read_api.post(
        "/v1/admin/policies/default/simulate",
        {"user": "alice@acme.dev", "plan": plan_document(), "document": {**POLICY, "rules": []}},
        format="json",
    )
    assert draft.json()["plan"]["draft"] is True
    assert draft.json()["plan"]["decision"] != "issued"
    problem(
        read_api.post(
            "/v1/admin/policies/default/simulate",
            {"user": "nobody@acme.dev", "plan": plan_document()},
            format="json",
        ),
        403,
        Code.UNKNOWN_USER,
    )


# --- plans and approvals ------------------------------------------------------------------


def test_plans_are_listed_read_and_revoked(admin_api, agent):
    declared = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    listed = admin_api.get("/v1/admin/plans", {"status": "active"}).json()
    assert [row["id"] for row in listed["results"]] == [declared["id"]]
    detail = admin_api.get(f"/v1/admin/plans/{declared['id']}").json()
    assert detail["user"] == "alice@acme.dev" and len(detail["tokens"]) == 1

    revoked = admin_api.post(
        f"/v1/admin/plans/{declared['id']}/revoke", {"reason": "leaked"}, format="json"
    )
    assert revoked.json() == {"id": declared["id"], "revoked": True, "status": "revoked"}
    plan = Plan.objects.get(pk=declared["id"])
    assert plan.revoke_reason == "leaked" and plan.revoked_by.startswith("admin token")
    problem(
        agent.client.post(
            f"/v1/plans/{declared['id']}/refresh", {"token": declared["token"]}, format="json"
        ),
        410,
        Code.PLAN_REVOKED,
    )
    again = admin_api.post(f"/v1/admin/plans/{declared['id']}/revoke", format="json")
    assert again.json()["revoked"] is False
    problem(admin_api.get("/v1/admin/plans/not-a-plan"), 404, Code.PLAN_NOT_FOUND)


@pytest.fixture
def waiting_plan(team, member, agent) -> str:
    from policies.services import policy_set

    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    answer = agent.client.post(
        "/v1/plans", {"plan": plan_document(steps=REVIEWED_PLAN_STEPS)}, format="json"
    )
    assert answer.status_code == 202, answer.content
    return answer.json()["id"]


def test_approvals_are_listed_and_decided_as_the_tokens_person(team, waiting_plan):
    approver = approver_for(team)
    client = token_client(team, write=True, user=approver)
    listed = client.get("/v1/admin/approvals").json()
    assert [row["id"] for row in listed["results"]] == [waiting_plan]
    decided = client.post(
        f"/v1/admin/approvals/{waiting_plan}/decide", {"decision": "approve"}, format="json"
    )
    assert decided.status_code == 200, decided.content
    assert decided.json()["approved"] is True and decided.json()["by"] == approver.email
    assert Plan.objects.get(pk=waiting_plan).approval == Plan.Approval.APPROVED


def test_a_token_for_nobody_or_for_the_plans_own_member_cannot_decide(team, waiting_plan):
    from django.contrib.auth.models import User

    nobody = token_client(team, write=True)
    problem(
        nobody.post(
            f"/v1/admin/approvals/{waiting_plan}/decide", {"decision": "approve"}, format="json"
        ),
        403,
        Code.PERMISSION_DENIED,
    )
    # alice may decide approvals, but this plan is made for her
    alice = approver_for(team, email="alice@acme.dev", username="alice")
    self_approval = token_client(team, write=True, user=alice)
    problem(
        self_approval.post(
            f"/v1/admin/approvals/{waiting_plan}/decide", {"decision": "approve"}, format="json"
        ),
        403,
        Code.SELF_APPROVAL,
    )
    # staff of the team without the permission to decide
    bystander = User.objects.create_user("bea", "bea@acme.dev", "pw", is_staff=True)
    team.staff.add(bystander)
    problem(
        token_client(team, write=True, user=bystander).post(
            f"/v1/admin/approvals/{waiting_plan}/decide",
            {"decision": "deny", "reason": "no"},
            format="json",
        ),
        403,
        Code.PERMISSION_DENIED,
    )
    assert Plan.objects.get(pk=waiting_plan).approval == Plan.Approval.PENDING
