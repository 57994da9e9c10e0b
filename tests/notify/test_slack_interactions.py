"""Approving and denying from Slack: the approval request is posted with buttons, and
``POST /v1/slack/interactions`` verifies Slack's signature, then decides through the
queue's own rules (self-approval refused, the approver must be allowed)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest

from kernel.problems import Code
from notify.models import AlertDelivery, SlackUserLink
from notify.slack import team_slack_save
from plans.models import Plan
from tests.notify.conftest import request_approval

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
pytestmark = [pytest.mark.usefixtures("eager_tasks")]


@pytest.fixture(autouse=True)
def slack_settings(settings) -> None:
    """Slack's signing secret, and the local receiver allowed as a Slack URL."""
    settings.SLACK_SIGNING_SECRET = SIGNING_SECRET
    settings.SLACK_EXTRA_URL_PREFIXES = ["http://127.0.0.1:"]


def signed_headers(body: bytes, *, timestamp: int | None = None, secret: str = SIGNING_SECRET):
    """What Slack sends, computed here as Slack's documentation says, not by our code."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + stamp.encode() + b":" + body
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"HTTP_X_SLACK_REQUEST_TIMESTAMP": stamp, "HTTP_X_SLACK_SIGNATURE": signature}


def press(
    plan: Plan,
    *,
    action: str = "plangate_approve",
    slack_user: str = "U0APRIL",
    reason: str | None = None,
    response_url: str = "",
) -> dict:
    state = {"values": {"plangate_reason": {"reason": {"type": "plain_text_input"}}}}
    if reason is not None:
        state["values"]["plangate_reason"]["reason"]["value"] = reason
    return {
        "type": "block_actions",
        "user": {"id": slack_user, "username": "someone", "team_id": "T0ACME"},
        "team": {"id": "T0ACME"},
        "response_url": response_url,
        "actions": [{"action_id": action, "block_id": "plangate_decide", "value": plan.pk}],
        "state": state,
    }


def post(client, payload: dict | None = None, *, body: bytes | None = None, **headers):
    if body is None:
        body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = {**signed_headers(body), **headers}
    return client.post(
        "/v1/slack/interactions",
        data=body,
        content_type="application/x-www-form-urlencoded",
        **headers,
    )


@pytest.fixture
def slack_team(team, receiver):
    team_slack_save(team=team, webhook_url=receiver.url)
    return team


@pytest.fixture
def pending(slack_team, review_agent):
    return request_approval(review_agent)


@pytest.fixture
def linked_approver(slack_team, approver):
    SlackUserLink.objects.create(team=slack_team, slack_user_id="U0APRIL", user=approver)
    return approver


def test_a_waiting_plan_is_posted_to_slack_with_approve_and_deny(
    slack_team, review_agent, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        plan = request_approval(review_agent)

    (request,) = receiver.received
    message = json.loads(request.body)
    (actions,) = [block for block in message["blocks"] if block["type"] == "actions"]
    assert [(b["action_id"], b["value"]) for b in actions["elements"]] == [
        ("plangate_approve", plan.pk),
        ("plangate_deny", plan.pk),
    ]
    assert any(block["type"] == "input" for block in message["blocks"])
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.plan_id, delivery.channel, delivery.status_code) == (plan.pk, "slack", 200)


def test_approve_from_slack_decides_the_plan_and_answers_through_the_response_url(
    client, pending, linked_approver, receiver
):
    response = post(client, press(pending, response_url=receiver.url))

    assert response.status_code == 200, response.content
    pending.refresh_from_db()
    assert (pending.approval, pending.status) == (Plan.Approval.APPROVED, Plan.Status.ACTIVE)
    assert pending.approval_by == "april@acme.dev"
    (answer,) = [json.loads(r.body) for r in receiver.received if b"replace_original" in r.body]
    assert answer["replace_original"] is True
    assert answer["text"].startswith("Approved by april@acme.dev")


def test_deny_from_slack_with_a_reason_denies_the_plan(client, pending, linked_approver):
    response = post(client, press(pending, action="plangate_deny", reason="not on Friday"))

    assert response.status_code == 200
    assert response.json()["text"].startswith("Denied by april@acme.dev")
    pending.refresh_from_db()
    assert (pending.approval, pending.approval_reason) == (Plan.Approval.DENIED, "not on Friday")


def test_deny_without_a_reason_is_refused_ephemerally(client, pending, linked_approver):
    response = post(client, press(pending, action="plangate_deny", reason=""))

    assert response.json()["response_type"] == "ephemeral"
    assert Code.INVALID_REQUEST in response.json()["text"]
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


def test_self_approval_from_slack_is_refused(client, slack_team, pending, alice_approver):
    SlackUserLink.objects.create(team=slack_team, slack_user_id="U0ALICE", user=alice_approver)

    response = post(client, press(pending, slack_user="U0ALICE"))

    assert response.status_code == 200
    assert response.json()["response_type"] == "ephemeral"
    assert f"({Code.SELF_APPROVAL})" in response.json()["text"]
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


def test_a_person_not_allowed_to_decide_is_refused(
    client, slack_team, pending, other_team_approver
):
    SlackUserLink.objects.create(team=slack_team, slack_user_id="U0OSCAR", user=other_team_approver)

    response = post(client, press(pending, slack_user="U0OSCAR"))

    assert f"({Code.PERMISSION_DENIED})" in response.json()["text"]
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


def test_a_slack_user_linked_to_nobody_is_told_so(client, pending, approver):
    response = post(client, press(pending, slack_user="U0NOBODY"))

    assert "U0NOBODY" in response.json()["text"]
    assert "not linked" in response.json()["text"]
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


def test_a_bad_signature_is_refused_with_401_and_nothing_decided(
    client, pending, linked_approver, receiver
):
    body = urlencode({"payload": json.dumps(press(pending, response_url=receiver.url))}).encode()
    forged = signed_headers(body, secret="not-the-signing-secret")
    before = len(receiver.received)

    response = post(client, body=body, **forged)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == Code.INVALID_SLACK_SIGNATURE
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING
    assert len(receiver.received) == before


def test_a_body_changed_after_signing_is_refused(client, pending, linked_approver):
    body = urlencode({"payload": json.dumps(press(pending))}).encode()
    headers = signed_headers(body)

    response = post(client, body=body.replace(b"approve", b"deny__"), **headers)

    assert response.status_code == 401
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


@pytest.mark.parametrize("age", [301, -301, 3600])
def test_a_stale_timestamp_is_refused_even_when_signed(client, pending, linked_approver, age):
    body = urlencode({"payload": json.dumps(press(pending))}).encode()

    response = post(client, body=body, **signed_headers(body, timestamp=int(time.time()) - age))

    assert response.status_code == 401
    assert "five minutes" in response.json()["detail"]
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


@pytest.mark.parametrize("timestamp", ["", "abc", "1e9", "9" * 40])
def test_a_malformed_timestamp_is_refused(client, pending, timestamp):
    body = urlencode({"payload": json.dumps(press(pending))}).encode()
    headers = signed_headers(body)
    headers["HTTP_X_SLACK_REQUEST_TIMESTAMP"] = timestamp

    response = post(client, body=body, **headers)

    assert response.status_code == 401
    assert response.json()["code"] == Code.INVALID_SLACK_SIGNATURE


@pytest.mark.parametrize("body", [b"", b"payload=not-json", b"payload=%5B%5D", b"\xff\xfe"])
def test_a_signed_body_that_is_no_interaction_is_a_400_at_payload(client, body):
    response = post(client, body=body)

    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"path": "payload", "detail": "a form field holding one JSON object"}
    ]


def test_without_a_signing_secret_every_request_is_refused(
    client, pending, linked_approver, settings
):
    settings.SLACK_SIGNING_SECRET = ""
    response = post(client, press(pending))

    assert response.status_code == 401
    pending.refresh_from_db()
    assert pending.approval == Plan.Approval.PENDING


def test_only_post_is_answered(client):
    response = client.get("/v1/slack/interactions")
    assert response.status_code == 405
    assert response.json()["code"] == Code.METHOD_NOT_ALLOWED
