"""Approvers are told when a plan starts waiting: an e-mail (Django's test outbox) to the
team's Approvers and team admins except the plan's own member, and the team's webhook;
neither can make the plan's issuance fail."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from audit.models import AuditRecord
from notify.models import WebhookDelivery
from notify.webhooks import team_webhook_save
from plans.models import Plan
from tests.notify.conftest import TEAM_ADMINS, make_person, request_approval

SECRET = "whsec-0123456789abcdef"


@pytest.fixture
def people(team, other_team, approver, other_team_approver, alice_approver):
    """Who is and is not told: a team admin of the team, an auditor, staff who is no
    approver, an inactive approver, and an approver without a team."""
    make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team])
    make_person("audrey", "audrey@acme.dev", group="Auditors", teams=[team])
    make_person("stan", "stan@acme.dev", group=None, teams=[team])
    idle = make_person("ivan", "ivan@acme.dev", group="Approvers", teams=[team])
    idle.is_active = False
    idle.save()
    make_person("nora", "nora@acme.dev", group="Approvers", teams=[])


def test_the_teams_approvers_are_emailed_except_the_plans_own_member(
    eager_tasks, review_agent, people, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        plan = request_approval(review_agent)

    (mail,) = mailoutbox
    assert sorted(mail.to) == ["april@acme.dev", "tessa@acme.dev"]
    assert "Deploy the fix" in mail.subject
    assert "alice@acme.dev" in mail.body
    assert f"/admin/notify/approvalrequest/{plan.pk}/change/" in mail.body
    (record,) = AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_NOTIFIED)
    assert (record.plan_id, record.user, record.team_id) == (
        plan.pk,
        "alice@acme.dev",
        plan.team_id,
    )
    assert record.details == {"channel": "email", "to": ["april@acme.dev", "tessa@acme.dev"]}


def test_nothing_is_sent_before_the_plan_is_committed(
    eager_tasks, review_agent, approver, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        request_approval(review_agent)
    assert mailoutbox == []
    for callback in callbacks:
        callback()
    assert len(mailoutbox) == 1


def test_another_teams_plan_is_not_emailed_to_this_teams_approvers(
    eager_tasks,
    other_review_agent,
    approver,
    other_team_approver,
    mailoutbox,
    django_capture_on_commit_callbacks,
):
    with django_capture_on_commit_callbacks(execute=True):
        request_approval(other_review_agent, user="olga@globex.test")

    (mail,) = mailoutbox
    assert mail.to == ["oscar@globex.test"]


def test_the_webhook_is_delivered_when_a_plan_starts_waiting(
    team, review_agent, approver, receiver, eager_tasks, django_capture_on_commit_callbacks
):
    team_webhook_save(team=team, url=receiver.url, secret=SECRET)

    with django_capture_on_commit_callbacks(execute=True):
        plan = request_approval(review_agent)

    assert len(receiver.received) == 1
    (row,) = WebhookDelivery.objects.all()
    assert (row.plan_id, row.status_code) == (plan.pk, 200)


def test_a_failing_webhook_and_mail_server_do_not_stop_the_plan_from_waiting(
    team, review_agent, approver, eager_tasks, settings, django_capture_on_commit_callbacks
):
    settings.PLANGATE_WEBHOOK_MAX_ATTEMPTS = 2
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    team_webhook_save(team=team, url="http://127.0.0.1:9/nothing-listens", secret=SECRET)

    with django_capture_on_commit_callbacks(execute=True):
        plan = request_approval(review_agent)

    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.PENDING_APPROVAL
    assert WebhookDelivery.objects.filter(plan_id=plan.pk).count() == 2


def _fresh_broker_connections(app) -> None:
    """Forget the app's broker pools, so the next publish uses the broker URL now set
    (kombu keeps one pool per broker URL; none is closed, the original one is reused)."""
    app._pool = None
    app.amqp._producer_pool = None


def test_a_broker_that_is_away_at_enqueue_is_logged_not_raised(
    team, review_agent, approver, caplog, django_capture_on_commit_callbacks
):
    from controlplane.celery import app

    team_webhook_save(team=team, url="https://hooks.example.test/a", secret=SECRET)
    previous = (
        app.conf.broker_write_url,
        app.conf.task_publish_retry,
        app.conf.broker_transport,
        app.conf.broker_transport_options,
    )
    # Nothing listens on port 9; no publish retries and no connection retries, so the
    # failure comes at once. Without max_retries kombu retries the connection until Celery's
    # broker_connection_timeout (4 s) has passed, about 6 s for each of the two tasks. The
    # embedded broker's transport and its options (for filesystem:// only) must not carry over.
    app.conf.broker_write_url, app.conf.task_publish_retry = "redis://127.0.0.1:9/0", False
    app.conf.broker_transport = None
    app.conf.broker_transport_options = {"max_retries": 0}
    _fresh_broker_connections(app)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            plan = request_approval(review_agent)
    finally:
        (
            app.conf.broker_write_url,
            app.conf.task_publish_retry,
            app.conf.broker_transport,
            app.conf.broker_transport_options,
        ) = previous
        _fresh_broker_connections(app)

    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.PENDING_APPROVAL
    assert f"could not queue the approval webhook of plan {plan.pk}" in caplog.text
    assert f"could not queue the approvers' e-mail of plan {plan.pk}" in caplog.text
    assert "Connection refused" in caplog.text or "Error 111" in caplog.text


def test_no_mail_is_sent_when_the_team_has_no_approver_with_an_email(
    eager_tasks, team, review_agent, mailoutbox, django_capture_on_commit_callbacks
):
    User.objects.create_user("noemail", "", "x", is_staff=True)
    with django_capture_on_commit_callbacks(execute=True):
        request_approval(review_agent)
    assert mailoutbox == []
