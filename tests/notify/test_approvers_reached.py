"""A waiting plan reaches a person who may decide it (docs/decisions/0057): the team's
approvers; when the only one is the plan's own member, the superusers; when nobody may
decide, the requester is warned in the 202 and the superusers are told."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from audit.models import AuditRecord
from plans.admin_timeline import timeline_url
from plans.approvals import APPROVAL_UNAVAILABLE, plan_approval_decide
from plans.models import Plan
from tests.admin.conftest import PASSWORD, logged_in
from tests.conftest import plan_document
from tests.notify.conftest import DEPLOY_PLAN_STEPS, make_person


def declare(persona) -> dict:
    """Declare the deploy plan through the API; its 202 body."""
    response = persona.client.post(
        "/v1/plans",
        {"plan": plan_document(goal="Deploy the fix", steps=DEPLOY_PLAN_STEPS)},
        format="json",
    )
    assert response.status_code == 202, response.content
    return response.json()


def emailed(plan_id: str) -> AuditRecord:
    (record,) = AuditRecord.objects.filter(
        plan_id=plan_id, kind=AuditRecord.Kind.APPROVAL_NOTIFIED, details__channel="email"
    )
    return record


def test_a_plan_whose_member_is_the_only_approver_is_sent_to_the_superusers(
    eager_tasks, review_agent, alice_approver, mailoutbox, django_capture_on_commit_callbacks
):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    User.objects.create_superuser("quiet", "", PASSWORD)  # no address: nobody to e-mail

    with django_capture_on_commit_callbacks(execute=True):
        body = declare(review_agent)

    # Someone can decide: no warning.
    assert body["warnings"] == []
    (mail,) = mailoutbox
    assert mail.to == ["root@example.test"]
    assert "You are asked as a superuser" in mail.body
    assert f"/admin/notify/approvalrequest/{body['id']}/change/" in mail.body
    record = emailed(body["id"])
    assert record.details == {
        "channel": "email",
        "to": ["root@example.test"],
        "reach": "superusers",
    }
    # And the superuser can indeed decide it.
    root = User.objects.get(username="root")
    plan = Plan.objects.get(pk=body["id"])
    assert plan_approval_decide(plan=plan, by_user=root, approve=True).approved


def test_a_plan_nobody_can_approve_warns_the_requester_and_tells_the_superusers(
    eager_tasks, review_agent, alice_approver, mailoutbox, django_capture_on_commit_callbacks
):
    # The only superuser is the plan's own member: nobody may decide.
    alice_admin = User.objects.create_superuser("alice-admin", "ALICE@acme.dev", PASSWORD)

    with django_capture_on_commit_callbacks(execute=True):
        body = declare(review_agent)

    (warning,) = body["warnings"]
    assert (warning["path"], warning["code"]) == ("plan", APPROVAL_UNAVAILABLE)
    assert "Nobody can approve this plan" in warning["detail"]
    assert "alice@acme.dev" in warning["detail"]
    # The plan waits all the same: an approver added within the window can decide it.
    plan = Plan.objects.get(pk=body["id"])
    assert (plan.status, plan.approval) == (Plan.Status.PENDING_APPROVAL, Plan.Approval.PENDING)
    requested = AuditRecord.objects.get(plan_id=plan.pk, kind=AuditRecord.Kind.APPROVAL_REQUESTED)
    assert requested.details["approval_unavailable"] == warning["detail"]
    # The superusers are told, the member among them (they can fix the team).
    (mail,) = mailoutbox
    assert mail.to == ["ALICE@acme.dev"]
    assert mail.subject == "[Plangate] Nobody can approve: Deploy the fix"
    assert "Add an approver to the team" in mail.body
    assert emailed(plan.pk).details["reach"] == "unavailable"
    # The timeline says so, not only "approval requested".
    html = logged_in(alice_admin).get(timeline_url(plan)).content.decode()
    assert "Nobody can approve this plan" in html
    assert "told that nobody can approve it" in html


def test_without_any_superuser_the_warning_is_all_there_is(
    eager_tasks, review_agent, alice_approver, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        body = declare(review_agent)

    assert [warning["code"] for warning in body["warnings"]] == [APPROVAL_UNAVAILABLE]
    assert mailoutbox == []
    assert not AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_NOTIFIED).exists()


def test_the_teams_approvers_are_asked_and_the_superusers_left_alone(
    eager_tasks, team, review_agent, approver, mailoutbox, django_capture_on_commit_callbacks
):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)

    with django_capture_on_commit_callbacks(execute=True):
        body = declare(review_agent)

    assert body["warnings"] == []
    (mail,) = mailoutbox
    assert mail.to == ["april@acme.dev"]
    assert emailed(body["id"]).details == {"channel": "email", "to": ["april@acme.dev"]}


def test_the_decide_permission_given_directly_makes_an_approver(
    eager_tasks, team, review_agent, mailoutbox, django_capture_on_commit_callbacks
):
    dora = make_person("dora", "dora@acme.dev", group=None, teams=[team])
    dora.user_permissions.add(
        Permission.objects.get(content_type__app_label="notify", codename="decide_approval")
    )

    with django_capture_on_commit_callbacks(execute=True):
        body = declare(review_agent)

    assert body["warnings"] == []
    assert [mail.to for mail in mailoutbox] == [["dora@acme.dev"]]


@pytest.mark.parametrize("reason", ["inactive", "not staff"])
def test_a_superuser_who_cannot_use_the_console_is_not_counted(
    reason, eager_tasks, review_agent, alice_approver, mailoutbox
):
    root = User.objects.create_superuser("root", "root@example.test", PASSWORD)
    if reason == "inactive":
        root.is_active = False
    else:
        root.is_staff = False
    root.save()

    body = declare(review_agent)

    assert [warning["code"] for warning in body["warnings"]] == [APPROVAL_UNAVAILABLE]
