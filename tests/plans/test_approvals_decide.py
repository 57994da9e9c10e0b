"""plan_approval_decide and manage.py decide_plan: who may decide, denials say why, a
decision is final, and every request, decision and expiry is in the audit trail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from audit.models import AuditRecord
from kernel.problems import Code, DomainError
from members.services import member_disable
from plans.approvals import (
    approval_requested,
    plan_approval_decide,
    plan_approver_may_decide,
    plan_approvers,
    plans_approval_expire,
    plans_awaiting_approval,
)
from plans.models import Plan
from plans.services import plan_issue, plan_revoke
from plans.tasks import expire_approvals
from policies.services import policy_set
from tests.conftest import plan_document

from .approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for, staff_of


@pytest.fixture
def pending(agent, team, policy_version) -> Plan:
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    requested = plan_issue(agent=agent.agent, document=plan_document(steps=REVIEWED_PLAN_STEPS))
    return Plan.objects.select_related("team", "member").get(pk=requested.plan.pk)


def decide(plan, user, approve=True, reason="", **kwargs):
    return plan_approval_decide(plan=plan, by_user=user, approve=approve, reason=reason, **kwargs)


def refused(code, plan, user, **kwargs):
    before = AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_DECIDED).count()
    with pytest.raises(DomainError) as excinfo:
        decide(plan, user, **kwargs)
    assert excinfo.value.code == code
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_DECIDED).count() == before
    return excinfo.value


def test_nobody_approves_a_plan_made_for_themselves_whatever_the_case(pending, team):
    alice = approver_for(team, email="Alice@ACME.dev", username="alice")

    refused(Code.SELF_APPROVAL, pending, alice)
    refused(Code.SELF_APPROVAL, pending, alice, approve=False, reason="no")
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


def test_a_denial_needs_a_reason(pending, team):
    error = refused(Code.INVALID_REQUEST, pending, approver_for(team), approve=False, reason="  ")

    assert [e.path for e in error.errors] == ["reason"]
    assert Plan.objects.get(pk=pending.pk).approval == Plan.Approval.PENDING


def test_only_the_teams_staff_or_a_superuser_decide(pending, team, other_team):
    outsider = User.objects.create_user("olga", "olga@globex.test", "x", is_staff=True)
    other_team.staff.add(outsider)
    refused(Code.PERMISSION_DENIED, pending, outsider)
    inactive = approver_for(team, email="ivy@acme.dev", username="ivy")
    inactive.is_active = False
    refused(Code.PERMISSION_DENIED, pending, inactive)

    root = User.objects.create_superuser("root", "root@acme.dev", "x")
    assert decide(pending, root).approved


def test_a_decision_is_final(pending, team):
    decide(pending, approver_for(team))

    refused(
        Code.APPROVAL_NOT_PENDING,
        pending,
        approver_for(team, "dan@acme.dev", "dan"),
        approve=False,
        reason="too late",
    )
    assert Plan.objects.get(pk=pending.pk).approval == Plan.Approval.APPROVED


def test_a_decision_past_the_deadline_expires_the_request(pending, team):
    refused(
        Code.APPROVAL_EXPIRED,
        pending,
        approver_for(team),
        now=timezone.now() + timedelta(hours=2),
    )

    assert Plan.objects.get(pk=pending.pk).status == Plan.Status.APPROVAL_EXPIRED
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_EXPIRED).count() == 1


def test_the_decision_is_kept_on_the_plan_and_in_the_trail(pending, team):
    decision = decide(pending, approver_for(team), approve=False, reason="not this week")

    plan = Plan.objects.get(pk=pending.pk)
    assert (plan.status, plan.approval) == (Plan.Status.APPROVAL_DENIED, Plan.Approval.DENIED)
    assert (plan.approval_by, plan.approval_reason) == ("carol@acme.dev", "not this week")
    assert plan.approval_decided_at == decision.at
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.APPROVAL_DECIDED)
    assert record.plan_id == plan.pk and record.user == "alice@acme.dev"
    assert record.details == {
        "by": "carol@acme.dev",
        "decision": "denied",
        "reason": "not this week",
    }
    assert record.at == decision.at


def test_the_request_is_in_the_trail_and_its_signal_goes_out_after_commit(
    agent, team, policy_version, django_capture_on_commit_callbacks
):
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    received = []

    def receiver(sender, plan, **kwargs):
        received.append((sender, plan.pk, plan.status))

    approval_requested.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            requested = plan_issue(
                agent=agent.agent, document=plan_document(steps=REVIEWED_PLAN_STEPS)
            )
            assert received == []  # not before the commit
    finally:
        approval_requested.disconnect(receiver)

    assert len(callbacks) == 1
    assert received == [(Plan, requested.plan.pk, Plan.Status.PENDING_APPROVAL)]
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.APPROVAL_REQUESTED)
    assert record.actor == f"agent:{agent.agent.pk}"
    assert record.rule == {"index": 2, "description": "mail leaves the company (rules[2])"}


def test_a_failing_receiver_never_undoes_the_request(
    agent, team, policy_version, django_capture_on_commit_callbacks
):
    policy_set(team=team, slug="default", document=REVIEW_POLICY)

    def broken(sender, plan, **kwargs):
        raise RuntimeError("the mail server is down")

    approval_requested.connect(broken)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            requested = plan_issue(
                agent=agent.agent, document=plan_document(steps=REVIEWED_PLAN_STEPS)
            )
    finally:
        approval_requested.disconnect(broken)

    assert Plan.objects.get(pk=requested.plan.pk).status == Plan.Status.PENDING_APPROVAL


def test_the_beat_task_expires_requests_past_the_window_as_itself(pending, team):
    Plan.objects.filter(pk=pending.pk).update(
        approval_deadline=timezone.now() - timedelta(seconds=1)
    )

    assert expire_approvals.apply().get() == 1
    assert plans_approval_expire() == 0

    plan = Plan.objects.get(pk=pending.pk)
    assert (plan.status, plan.approval) == (Plan.Status.APPROVAL_EXPIRED, Plan.Approval.EXPIRED)
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.APPROVAL_EXPIRED)
    assert record.actor == "celery plans.tasks.expire_approvals"
    assert record.plan_id == plan.pk


def test_the_command_approves_as_the_person_it_names(pending, team, capsys):
    approver_for(team)

    call_command("decide_plan", pending.pk.lower(), "approve", "--by", "CAROL@acme.dev")

    assert f"approved {pending.pk}" in capsys.readouterr().out
    plan = Plan.objects.get(pk=pending.pk)
    assert (plan.approval, plan.approval_by) == (Plan.Approval.APPROVED, "carol@acme.dev")
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.APPROVAL_DECIDED)
    assert record.actor == "manage.py decide_plan"
    assert record.details["by"] == "carol@acme.dev"


def test_the_command_refuses_what_the_service_refuses(pending, team):
    approver_for(team)
    approver_for(team, email="alice@acme.dev", username="alice")

    with pytest.raises(CommandError, match="reason"):
        call_command("decide_plan", pending.pk, "deny", "--by", "carol@acme.dev")
    with pytest.raises(CommandError, match=Code.SELF_APPROVAL):
        call_command("decide_plan", pending.pk, "approve", "--by", "alice@acme.dev")
    with pytest.raises(CommandError, match="no user"):
        call_command("decide_plan", pending.pk, "approve", "--by", "nobody@acme.dev")
    with pytest.raises(CommandError, match="no plan"):
        call_command("decide_plan", "01JAAAAAAAAAAAAAAAAAAAAAAA", "approve", "--by", "x@y.z")
    assert Plan.objects.get(pk=pending.pk).approval == Plan.Approval.PENDING

    call_command("decide_plan", pending.pk, "deny", "--by", "carol@acme.dev", "--reason", "no")
    assert Plan.objects.get(pk=pending.pk).approval_reason == "no"


def test_a_plan_revoked_while_it_waits_leaves_the_queue_and_is_never_decided(pending, team):
    plan_revoke(plan=pending, by="root", reason="wrong goal")

    assert not plans_awaiting_approval().filter(pk=pending.pk).exists()
    refused(Code.APPROVAL_NOT_PENDING, pending, approver_for(team))
    assert plans_approval_expire(now=timezone.now() + timedelta(days=2)) == 0
    assert Plan.objects.get(pk=pending.pk).status == Plan.Status.REVOKED


def test_the_queue_lists_the_waiting_plans(pending, agent):
    plan_issue(agent=agent.agent, document=plan_document())  # needs nobody

    assert list(plans_awaiting_approval()) == [pending]


def test_a_member_disabled_after_the_approval_gets_no_token(pending, team, agent, member):
    decide(pending, approver_for(team))
    member_disable(team=team, email=member.email)

    response = agent.client.post(f"/v1/plans/{pending.pk}/token")

    assert response.status_code == 403 and response.json()["code"] == Code.USER_DISABLED


# One rule for who may decide (docs/decisions/0057): the people asked are the people who
# may decide, in plan_approval_decide and so in every door that calls it.


def nothing_written(plan: Plan) -> None:
    current = Plan.objects.get(pk=plan.pk)
    assert (current.status, current.approval) == (
        Plan.Status.PENDING_APPROVAL,
        Plan.Approval.PENDING,
    )
    assert (current.approval_by, current.approval_decided_at) == ("", None)
    assert not AuditRecord.objects.filter(
        plan_id=plan.pk, kind=AuditRecord.Kind.APPROVAL_DECIDED
    ).exists()


def test_staff_of_the_team_not_allowed_to_decide_approvals_is_refused(pending, team):
    staff = staff_of(team, "sam@acme.dev", "sam")

    error = refused(Code.PERMISSION_DENIED, pending, staff)

    assert "allowed to decide approvals" in error.detail
    with pytest.raises(CommandError, match=r"^permission_denied: Only a superuser") as excinfo:
        call_command("decide_plan", pending.pk, "approve", "--by", "sam@acme.dev")
    assert excinfo.value.returncode == 1
    assert "\n" not in str(excinfo.value)
    nothing_written(pending)


def test_a_person_who_is_not_console_staff_is_refused(pending, team):
    user = approver_for(team, "nat@acme.dev", "nat")
    user.is_staff = False
    user.save()

    refused(Code.PERMISSION_DENIED, pending, user)
    with pytest.raises(CommandError, match=r"^permission_denied"):
        call_command("decide_plan", pending.pk, "approve", "--by", "nat@acme.dev")
    nothing_written(pending)


def test_the_plans_member_who_is_an_approver_cannot_approve_it_by_the_command(pending, team):
    approver_for(team, "alice@acme.dev", "alice")

    for decision in (["approve"], ["deny", "--reason", "no"]):
        with pytest.raises(CommandError, match=r"^self_approval: Nobody decides"):
            call_command("decide_plan", pending.pk, *decision, "--by", "ALICE@acme.dev")
    nothing_written(pending)


def test_a_team_approver_and_a_superuser_decide_by_the_command(pending, agent, team, capsys):
    approver_for(team)
    User.objects.create_superuser("root", "root@example.test", "x")
    second = plan_issue(agent=agent.agent, document=plan_document(steps=REVIEWED_PLAN_STEPS))

    call_command("decide_plan", pending.pk, "approve", "--by", "carol@acme.dev")
    call_command("decide_plan", second.plan.pk, "approve", "--by", "root@example.test")

    assert Plan.objects.get(pk=pending.pk).approval_by == "carol@acme.dev"
    assert Plan.objects.get(pk=second.plan.pk).approval_by == "root@example.test"
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_DECIDED).count() == 2


def test_who_may_decide_is_who_is_asked(pending, team, other_team):
    """plan_approver_may_decide and plan_approvers agree on every kind of person."""
    people = [
        approver_for(team),
        approver_for(team, "alice@acme.dev", "alice"),  # the plan's member
        staff_of(team, "sam@acme.dev", "sam"),  # no permission
        approver_for(other_team, "olga@globex.test", "olga"),  # another team
        approver_for(team, "", "nomail"),  # no e-mail address
        User.objects.create_superuser("root", "root@example.test", "x"),
        User.objects.create_superuser("alice-root", "Alice@Acme.dev", "x"),  # the member
    ]
    asked = set(plan_approvers(pending).values_list("pk", flat=True))

    assert {p.username for p in people if plan_approver_may_decide(pending, p)} == {
        "carol",
        "root",
    }
    assert {p.username for p in people if p.pk in asked} == {"carol", "root"}
