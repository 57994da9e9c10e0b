"""The approval webhook against a real local HTTP server: what is signed, how failures are
retried with back-off (one WebhookDelivery row per attempt), and the secret at rest."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from audit.models import AuditRecord
from notify.models import TeamWebhook, WebhookDelivery
from notify.notifications import approval_delivery
from notify.signing import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signed_string,
    webhook_signature_valid,
)
from notify.tasks import deliver_webhook
from notify.webhooks import backoff_seconds, team_webhook_save, webhook_secret
from tests.notify.conftest import request_approval

SECRET = "whsec-0123456789abcdef"


def deliver(webhook: TeamWebhook, plan) -> str:
    """Run the task as the worker would, in this process (Celery's eager apply: its
    retries run at once, their countdowns recorded but not waited for)."""
    delivery = approval_delivery(webhook=webhook, plan=plan)
    deliver_webhook.apply(kwargs=delivery)
    return delivery["delivery_id"]


@pytest.fixture
def pending_plan(review_agent):
    return request_approval(review_agent)


def test_the_body_is_signed_with_the_timestamp_and_the_team_secret(team, pending_plan, receiver):
    webhook = team_webhook_save(team=team, url=receiver.url, secret=SECRET)

    delivery_id = deliver(webhook, pending_plan)

    (request,) = receiver.received
    headers = {name.lower(): value for name, value in request.headers.items()}
    timestamp = headers[TIMESTAMP_HEADER.lower()]
    signature = headers[SIGNATURE_HEADER.lower()]
    assert webhook_signature_valid(
        secret=SECRET, timestamp=timestamp, body=request.body, signature=signature
    )
    # Independently of our helper: sha256=HMAC-SHA256(secret, "<timestamp>.<body>").
    import hashlib
    import hmac

    expected = hmac.new(
        SECRET.encode(), f"{timestamp}.".encode() + request.body, hashlib.sha256
    ).hexdigest()
    assert signature == f"sha256={expected}"
    assert signed_string(int(timestamp), request.body).startswith(timestamp.encode() + b".")
    # Another secret, or the same body with another timestamp, does not verify.
    assert not webhook_signature_valid(
        secret="another-secret-0123", timestamp=timestamp, body=request.body, signature=signature
    )
    assert not webhook_signature_valid(
        secret=SECRET, timestamp=str(int(timestamp) + 1), body=request.body, signature=signature
    )
    assert headers[DELIVERY_HEADER.lower()] == delivery_id
    body = json.loads(request.body)
    assert body["event"] == "approval_requested"
    assert body["team"] == team.slug
    assert body["plan"]["id"] == pending_plan.pk
    assert body["plan"]["user"] == "alice@acme.dev"
    assert body["plan"]["agent"]["name"] == "deployer"
    assert [step["tool"] for step in body["plan"]["steps"]] == ["github_list_issues", "deploy"]
    assert [entry["tool"] for entry in body["plan"]["review"]] == ["deploy"]
    assert body["url"].endswith(f"/admin/notify/approvalrequest/{pending_plan.pk}/change/")
    (row,) = WebhookDelivery.objects.all()
    assert (row.attempt, row.status_code, row.error, row.next_retry_at) == (1, 200, "", None)


def test_a_receiver_that_fails_twice_gets_three_attempts_each_recorded(
    team, pending_plan, receiver
):
    receiver.statuses = [500, 503]
    webhook = team_webhook_save(team=team, url=receiver.url, secret=SECRET)

    delivery_id = deliver(webhook, pending_plan)

    rows = list(WebhookDelivery.objects.order_by("attempt"))
    assert [(row.attempt, row.status_code) for row in rows] == [(1, 500), (2, 503), (3, 200)]
    assert {str(row.delivery_id) for row in rows} == {delivery_id}
    assert [row.error for row in rows] == ["answered 500", "answered 503", ""]
    # Back-off: the failed attempts say when the next one is due, 2 s then 4 s later.
    assert [round((row.next_retry_at - row.sent_at).total_seconds()) for row in rows[:2]] == [2, 4]
    assert rows[2].next_retry_at is None
    # The same body every time; each attempt signed with its own timestamp.
    assert len({request.body for request in receiver.received}) == 1
    assert len(receiver.received) == 3
    # One record in the plan's trail once the notification is through, by the task.
    (record,) = AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_NOTIFIED)
    assert record.plan_id == pending_plan.pk
    assert record.actor == "celery notify.tasks.deliver_webhook"
    assert record.details == {
        "channel": "webhook",
        "url": receiver.url,
        "delivery": delivery_id,
        "attempts": 3,
        "delivered": True,
        "status": 200,
        "error": "",
    }


def test_delivery_gives_up_after_the_configured_attempts(team, pending_plan, receiver, settings):
    settings.PLANGATE_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.statuses = [500] * 10
    webhook = team_webhook_save(team=team, url=receiver.url, secret=SECRET)

    deliver(webhook, pending_plan)

    rows = list(WebhookDelivery.objects.order_by("attempt"))
    assert [row.attempt for row in rows] == [1, 2, 3]
    assert rows[-1].next_retry_at is None
    assert len(receiver.received) == 3
    (record,) = AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_NOTIFIED)
    assert (record.details["delivered"], record.details["attempts"]) == (False, 3)
    assert record.details["error"] == "answered 500"


def test_an_unreachable_receiver_is_recorded_as_an_error(team, pending_plan, receiver, settings):
    settings.PLANGATE_WEBHOOK_MAX_ATTEMPTS = 2
    webhook = team_webhook_save(team=team, url="http://127.0.0.1:9/nothing-listens", secret=SECRET)

    deliver(webhook, pending_plan)

    rows = list(WebhookDelivery.objects.order_by("attempt"))
    assert [row.status_code for row in rows] == [None, None]
    assert all(row.error.startswith("ConnectError") for row in rows)


def test_back_off_doubles_and_is_capped(settings):
    settings.PLANGATE_WEBHOOK_MAX_BACKOFF = 20
    assert [backoff_seconds(attempt) for attempt in range(1, 7)] == [2, 4, 8, 16, 20, 20]


def test_a_switched_off_webhook_sends_nothing(team, pending_plan, receiver):
    webhook = team_webhook_save(team=team, url=receiver.url, secret=SECRET, active=False)

    deliver(webhook, pending_plan)

    assert receiver.received == []
    assert not WebhookDelivery.objects.exists()


def test_the_secret_is_stored_encrypted_and_kept_when_left_empty(team):
    webhook = team_webhook_save(team=team, url="https://hooks.example.test/a", secret=SECRET)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {TeamWebhook._meta.db_table}")  # noqa: S608
        stored = repr(cursor.fetchall())
    assert SECRET not in stored
    assert webhook_secret(webhook) == SECRET

    updated = team_webhook_save(team=team, url="https://hooks.example.test/b", secret="")

    assert updated.pk == webhook.pk
    assert webhook_secret(TeamWebhook.objects.get()) == SECRET
    assert TeamWebhook.objects.get().url == "https://hooks.example.test/b"
