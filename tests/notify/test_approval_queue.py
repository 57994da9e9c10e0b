"""The approval queue in the admin: an approver sees their teams' waiting plans only,
approves or denies (a denial needs a reason) through plan_approval_decide, and nobody
decides on a plan made for themselves: no control is drawn, and the service refuses."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.urls import reverse

from audit.models import AuditRecord
from plans.models import Plan
from tests.admin.conftest import PASSWORD, logged_in
from tests.notify.conftest import make_person, request_approval

QUEUE = reverse("admin:notify_approvalrequest_changelist")


def plan_url(plan: Plan) -> str:
    return reverse("admin:notify_approvalrequest_change", args=[plan.pk])


def action_url(plan: Plan, action: str) -> str:
    return reverse(f"admin:notify_approvalrequest_{action}", args=[plan.pk])


def decide(client, plan: Plan, action: str, reason: str = ""):
    return client.post(
        QUEUE,
        {
            "action": action,
            ACTION_CHECKBOX_NAME: [plan.pk],
            "post": "yes",
            "reason": reason,
            "next": plan_url(plan),
        },
    )


@pytest.fixture
def pending(review_agent) -> Plan:
    return request_approval(review_agent)


@pytest.fixture
def other_pending(other_review_agent) -> Plan:
    return request_approval(other_review_agent, user="olga@globex.test")


def test_an_approver_sees_only_their_teams_waiting_plans(
    approver, pending, other_pending, plan_allowed
):
    client = logged_in(approver)

    listing = client.get(QUEUE)

    assert listing.status_code == 200
    assert pending.pk in listing.content.decode()
    assert other_pending.pk not in listing.content.decode()
    assert plan_allowed.pk not in listing.content.decode()  # needs no approval
    assert client.get(plan_url(other_pending)).status_code in (302, 404)
    assert decide(client, other_pending, "approve_plans").status_code in (302, 200)
    assert Plan.objects.get(pk=other_pending.pk).approval == Plan.Approval.PENDING


def test_the_request_shows_the_whole_plan_and_why_it_waits(approver, pending, sre_member):
    page = logged_in(approver).get(plan_url(pending)).content.decode()

    for text in (
        "Deploy the fix",
        "alice@acme.dev",
        "deployer",
        "deploys need a person",
        "github_list_issues",
        "staging",
        "engineer",
        "platform",
        pending.hash,
        action_url(pending, "approve_plans"),
        action_url(pending, "deny_plans"),
    ):
        assert text in page, text


def test_an_approver_approves_from_the_queue(approver, pending):
    client = logged_in(approver)
    confirmation = client.get(action_url(pending, "approve_plans"))
    assert confirmation.status_code == 200
    assert "Yes, approve" in confirmation.content.decode()

    response = decide(client, pending, "approve_plans")

    assert (response.status_code, response["Location"]) == (302, QUEUE)
    plan = Plan.objects.get(pk=pending.pk)
    assert (plan.approval, plan.status, plan.approval_by) == (
        Plan.Approval.APPROVED,
        Plan.Status.ACTIVE,
        "april@acme.dev",
    )
    assert AuditRecord.objects.filter(
        plan_id=plan.pk, kind=AuditRecord.Kind.APPROVAL_DECIDED
    ).exists()
    assert f"Approved 1 plan(s): {pending.pk}" in client.get(QUEUE).content.decode()
    assert pending.pk not in client.get(QUEUE).content.decode()


def test_a_denial_needs_a_reason(approver, pending):
    client = logged_in(approver)

    without = decide(client, pending, "deny_plans", reason="   ")

    assert without.status_code == 200  # the page again, with the form's error
    assert "This field is required" in without.content.decode()
    assert Plan.objects.get(pk=pending.pk).approval == Plan.Approval.PENDING

    decide(client, pending, "deny_plans", reason="prod is frozen this week")

    plan = Plan.objects.get(pk=pending.pk)
    assert (plan.approval, plan.approval_reason) == (
        Plan.Approval.DENIED,
        "prod is frozen this week",
    )


def test_nobody_is_offered_or_allowed_to_decide_on_their_own_plan(alice_approver, pending):
    client = logged_in(alice_approver)

    page = client.get(plan_url(pending)).content.decode()

    assert "This plan acts for you" in page
    assert action_url(pending, "approve_plans") not in page
    assert action_url(pending, "deny_plans") not in page
    response = decide(client, pending, "approve_plans")
    assert response.status_code == 302
    assert Plan.objects.get(pk=pending.pk).approval == Plan.Approval.PENDING
    messages = client.get(QUEUE).content.decode()
    assert "Nobody decides on a plan made for themselves" in messages


def test_an_auditor_reads_the_queue_but_cannot_decide(team, pending):
    auditor = make_person("audrey", "audrey@acme.dev", group="Auditors", teams=[team])
    client = logged_in(auditor)

    page = client.get(plan_url(pending))

    assert page.status_code == 200
    assert action_url(pending, "approve_plans") not in page.content.decode()
    assert decide(client, pending, "approve_plans").status_code == 403
    assert client.get(action_url(pending, "approve_plans")).status_code == 403
    assert Plan.objects.get(pk=pending.pk).approval == Plan.Approval.PENDING


def test_a_team_admin_decides_too(team, pending):
    admin = make_person("tessa", "tessa@acme.dev", group="Team admins", teams=[team])

    decide(logged_in(admin), pending, "approve_plans")

    assert Plan.objects.get(pk=pending.pk).approval_by == "tessa@acme.dev"


@pytest.fixture
def plan_allowed(agent) -> Plan:
    from plans.services import plan_issue
    from tests.conftest import plan_document

    return plan_issue(agent=agent.agent, document=plan_document()).plan


def test_every_link_an_approver_is_shown_opens(approver, pending):
    """No control is drawn that would only answer "forbidden": from the queue and the
    request's page, every admin link an approver sees opens for them."""
    import re

    client = logged_in(approver)
    seen: set[str] = set()
    for start in (QUEUE, plan_url(pending)):
        html = client.get(start).content.decode()
        for href in re.findall(r'href="(/admin/[^"#]*)"', html):
            href = href.replace("&amp;", "&")
            if href in seen or "logout" in href or href.startswith("/admin/password_change"):
                continue
            seen.add(href)
            status = client.get(href).status_code
            assert status in (200, 302), (href, status)
    assert plan_url(pending) in seen, sorted(seen)
    assert any(href.startswith("/admin/members/member/") for href in seen), sorted(seen)
    assert action_url(pending, "approve_plans") in seen


# One rule for who may decide (plans.approvals.plan_approver_refusal): the queue draws the
# controls only for a person the service lets decide, says why to anyone else holding the
# permission, and a decision posted anyway writes nothing.


def nothing_written(plan: Plan) -> None:
    current = Plan.objects.get(pk=plan.pk)
    assert (current.status, current.approval, current.approval_by) == (
        Plan.Status.PENDING_APPROVAL,
        Plan.Approval.PENDING,
        "",
    )
    assert not AuditRecord.objects.filter(
        plan_id=plan.pk, kind=AuditRecord.Kind.APPROVAL_DECIDED
    ).exists()
    assert not LogEntry.objects.filter(object_id=plan.pk).exists()


def test_the_plans_member_holding_the_permission_decides_nothing_in_the_queue(
    alice_approver, pending
):
    client = logged_in(alice_approver)

    for action, reason in (("approve_plans", ""), ("deny_plans", "no")):
        response = decide(client, pending, action, reason)
        assert response.status_code == 302

    messages = client.get(QUEUE).content.decode()
    assert messages.count("Not decided: ") == 2
    assert "Nobody decides on a plan made for themselves" in messages
    nothing_written(pending)


def test_an_approver_without_an_e_mail_address_is_told_why_and_offered_nothing(team, pending):
    nameless = make_person("nomail", "", group="Approvers", teams=[team])
    client = logged_in(nameless)

    page = client.get(plan_url(pending)).content.decode()

    assert 'id="not-an-approver"' in page
    assert "Only an active person with an e-mail address can decide." in page
    assert action_url(pending, "approve_plans") not in page
    assert action_url(pending, "deny_plans") not in page
    assert decide(client, pending, "approve_plans").status_code == 302
    assert "Only an active person with an e-mail address" in client.get(QUEUE).content.decode()
    nothing_written(pending)


def test_a_superuser_decides_in_the_queue(pending):
    root = User.objects.create_superuser("root", "root@example.test", PASSWORD)
    client = logged_in(root)

    page = client.get(plan_url(pending)).content.decode()
    assert action_url(pending, "approve_plans") in page
    assert 'id="not-an-approver"' not in page

    decide(client, pending, "approve_plans")

    plan = Plan.objects.get(pk=pending.pk)
    assert (plan.approval, plan.approval_by) == (Plan.Approval.APPROVED, "root@example.test")
    assert AuditRecord.objects.filter(
        plan_id=plan.pk, kind=AuditRecord.Kind.APPROVAL_DECIDED
    ).exists()


def step_rows(html: str, section: str, tool: str) -> list[str]:
    """The numbers in the first column of ``section``'s rows naming ``tool``."""
    part = html.split(f'id="{section}"', 1)[1].split("</table>", 1)[0]
    return re.findall(rf"<tr[^>]*>\s*<td>([^<]*)</td>\s*<td><code>{tool}</code>", part)


def test_the_approval_page_numbers_the_step_as_the_plans_page_does(pending):
    """The deploy step is the second (index 1): "2" on the approval page, in its review
    and steps tables, and in the plan page's steps table (docs/decisions/0058)."""
    client = logged_in(User.objects.create_superuser("root", "root@example.test", PASSWORD))

    approval = client.get(plan_url(pending)).content.decode()
    plan_page = client.get(reverse("admin:plans_plan_change", args=[pending.pk])).content.decode()

    assert pending.review[0]["step"] == 1
    assert step_rows(approval, "review", "deploy") == ["2"]
    assert step_rows(approval, "steps", "deploy") == ["2"]
    assert step_rows(plan_page, "steps", "deploy") == ["2"]
