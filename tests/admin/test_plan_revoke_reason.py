"""Revoking a plan in the admin records who, when and the reason typed on the confirmation
page: on the plan, in a plan_revoked audit record, on the plan page and for the agent."""

from __future__ import annotations

from django.urls import reverse

from audit.models import AuditRecord
from kernel.problems import Code
from plans.models import Plan
from tests.plans.helpers import assert_problem


def revoke(client, plan: Plan, **fields):
    return client.post(
        reverse("admin:plans_plan_changelist"),
        {
            "action": "revoke_plans",
            "_selected_action": [plan.pk],
            "post": "yes",
            "next": reverse("admin:plans_plan_change", args=[plan.pk]),
            **fields,
        },
    )


def test_the_confirmation_page_asks_for_an_optional_reason(team_admin_client, plan):
    page = team_admin_client.get(reverse("admin:plans_plan_revoke_plans", args=[plan.pk]))

    assert page.status_code == 200
    html = page.content.decode()
    assert '<textarea name="reason"' in html
    assert "Optional." in html


def test_revoking_with_a_reason_records_who_when_and_why(
    team_admin_client, team_admin, agent, issued, plan
):
    response = revoke(team_admin_client, plan, reason="  Leaked in a support ticket  ")

    assert response.status_code == 302
    plan.refresh_from_db()
    assert plan.status == Plan.Status.REVOKED
    assert plan.revoked_by == team_admin.get_username()
    assert plan.revoke_reason == "Leaked in a support ticket"
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_REVOKED)
    assert record.plan_id == plan.pk
    assert record.actor == team_admin.get_username()
    assert record.at == plan.revoked_at
    assert record.details == {"reason": "Leaked in a support ticket"}
    assert (record.user, record.plan_hash) == ("alice@acme.dev", plan.hash)
    page = team_admin_client.get(reverse("admin:plans_plan_change", args=[plan.pk]))
    assert team_admin.get_username() in page.content.decode()
    assert "Leaked in a support ticket" in page.content.decode()
    detail = agent.client.get(f"/v1/plans/{plan.pk}").json()
    assert detail["status"] == "revoked"
    assert detail["revokeReason"] == "Leaked in a support ticket"
    refresh = agent.client.post(
        f"/v1/plans/{plan.pk}/refresh", {"token": issued.token}, format="json"
    )
    assert_problem(refresh, 410, Code.PLAN_REVOKED)


def test_revoking_without_a_reason_keeps_none(team_admin_client, team_admin, agent, plan):
    revoke(team_admin_client, plan)

    plan.refresh_from_db()
    assert (plan.revoked_by, plan.revoke_reason) == (team_admin.get_username(), "")
    assert AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_REVOKED).details == {"reason": ""}
    assert agent.client.get(f"/v1/plans/{plan.pk}").json()["revokeReason"] is None


def test_a_reason_too_long_shows_the_page_again_and_revokes_nothing(team_admin_client, plan):
    response = revoke(team_admin_client, plan, reason="x" * 1001)

    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    plan.refresh_from_db()
    assert plan.status == Plan.Status.ACTIVE
    assert not AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REVOKED).exists()


def test_a_second_revocation_changes_nothing_and_records_nothing(team_admin_client, plan):
    revoke(team_admin_client, plan, reason="first")
    revoke(team_admin_client, plan, reason="second")

    plan.refresh_from_db()
    assert plan.revoke_reason == "first"
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REVOKED).count() == 1
