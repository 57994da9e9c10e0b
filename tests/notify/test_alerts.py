"""Alert rules fire from the facts the system already writes (the audit trail, the waiting
plans, the rotation task's failure), are deduplicated within a window, and are delivered
by the team's signed webhook, e-mail and Slack, each attempt recorded and retried."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.test import override_settings
from django.utils import timezone

from audit.services import records_seal
from guard.decisions import Decision
from kernel.problems import Code, DomainError
from notify.alert_delivery import alert_payload
from notify.alerts import alert_raise, alert_rule_save, alerts_scan
from notify.models import Alert, AlertDelivery, AlertRule, TeamSlack
from notify.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, webhook_signature_valid
from notify.slack import slack_webhook_url, team_slack_save
from notify.tasks import deliver_alert
from notify.webhooks import team_webhook_save
from plans.keys import signing_keys_bootstrap
from plans.tasks import rotate_signing_keys
from tests.conftest import plan_document
from tests.notify.conftest import request_approval
from tests.plans.keys_helpers import OTHER_ENCRYPTION_KEY, age_keys

SECRET = "whsec-0123456789abcdef"
AT = "2026-11-30T09:00:00.250Z"
STREAM = "0f3c9a7be2d84c51a6b0e1f2d3c4b5a6"
LOCAL = override_settings(SLACK_EXTRA_URL_PREFIXES=["http://127.0.0.1:"])

Kind = AlertRule.Kind


def rule(team, kind: str, channels: list[str] | None = None, **fields) -> AlertRule:
    return alert_rule_save(
        rule=AlertRule(
            team=team,
            kind=kind,
            channels=channels or ["email"],
            email_to=fields.pop("email_to", "oncall@acme.dev"),
            **fields,
        )
    )


def declare(persona, **overrides):
    return persona.client.post("/v1/plans", {"plan": plan_document(**overrides)}, format="json")


def blocked(at: str | None = None) -> dict:
    return {
        "at": at or timezone.now().isoformat().replace("+00:00", "Z"),
        "tool": "github_delete_repo",
        "decision": Decision.NOT_IN_PLAN,
        "step": None,
        "policyVersion": 1,
        "argsDigest": "0" * 64,
    }


def post_events(persona, plan_id: str, seq: int, **body):
    response = persona.client.post(
        f"/v1/plans/{plan_id}/events", {"stream": STREAM, "seq": seq, **body}, format="json"
    )
    assert response.status_code == 202, response.content
    return response


def scan(**kwargs):
    records_seal()
    return alerts_scan(**kwargs)


# --- each kind fires from its fact --------------------------------------------------


def test_blocked_calls_over_the_threshold_within_the_window_fire_once_per_plan(agent, team):
    rule(team, Kind.BLOCKED_CALLS, threshold=2, window_minutes=10)
    plan_id = declare(agent).json()["id"]

    post_events(agent, plan_id, 1, events=[blocked(), blocked()])
    assert scan().raised == 0 and not Alert.objects.exists()  # 2 is not over 2

    post_events(agent, plan_id, 2, events=[blocked()])
    scan()

    (alert,) = Alert.objects.all()
    assert (alert.kind, alert.subject, alert.count) == (Kind.BLOCKED_CALLS, plan_id, 1)
    assert alert.details["blocked"] == 3
    assert alert.url == f"https://plangate.test/admin/plans/plan/{plan_id}/change/"


def test_blocked_calls_outside_the_window_do_not_count(agent, team):
    rule(team, Kind.BLOCKED_CALLS, threshold=1, window_minutes=5)
    plan_id = declare(agent).json()["id"]
    old = (timezone.now() - timedelta(minutes=30)).isoformat().replace("+00:00", "Z")

    post_events(agent, plan_id, 1, events=[blocked(old), blocked(old), blocked()])
    scan()

    assert not Alert.objects.exists()


def test_allowed_calls_never_count_as_blocked(agent, team):
    rule(team, Kind.BLOCKED_CALLS, threshold=1)
    plan_id = declare(agent).json()["id"]
    allowed = {**blocked(), "tool": "github_list_issues", "decision": Decision.ALLOWED, "step": 0}

    post_events(agent, plan_id, 1, events=[allowed, allowed, allowed])
    scan()

    assert not Alert.objects.exists()


def test_a_declaration_for_a_disabled_member_fires_with_the_member_page(
    agent, team, disabled_member
):
    rule(team, Kind.DISABLED_MEMBER_DECLARATION)

    response = declare(agent, user="dora@acme.dev")
    assert response.json()["code"] == Code.USER_DISABLED
    scan()

    (alert,) = Alert.objects.all()
    assert alert.subject == "dora@acme.dev"
    assert "dora@acme.dev" in alert.summary and "summariser" in alert.summary
    assert alert.url == (f"https://plangate.test/admin/members/member/{disabled_member.pk}/change/")


def test_a_token_the_guard_refused_fires(agent, team):
    rule(team, Kind.TOKEN_REFUSED)
    plan_id = declare(agent).json()["id"]
    end = {"outcome": "token_refused", "reason": "plan_swapped: the token carries another plan"}

    post_events(agent, plan_id, 1, end=end)
    scan()

    (alert,) = Alert.objects.all()
    assert alert.subject == plan_id
    assert "plan_swapped" in alert.summary
    assert alert.url.endswith(f"/admin/plans/plan/{plan_id}/change/")


def test_lost_decisions_fire(agent, team):
    rule(team, Kind.DECISIONS_LOST)
    plan_id = declare(agent).json()["id"]

    post_events(agent, plan_id, 1, events=[], lost=7)
    scan()

    (alert,) = Alert.objects.all()
    assert (alert.subject, alert.details["lost"]) == (plan_id, 7)


def test_an_approval_waiting_longer_than_the_rule_allows_fires_once(team, review_agent):
    rule(team, Kind.APPROVAL_WAITING, wait_minutes=15)
    plan = request_approval(review_agent)

    assert scan(now=timezone.now() + timedelta(minutes=10)).raised == 0
    scan(now=timezone.now() + timedelta(minutes=16))
    scan(now=timezone.now() + timedelta(minutes=20))

    (alert,) = Alert.objects.all()
    assert alert.subject == plan.pk
    assert alert.url.endswith(f"/admin/notify/approvalrequest/{plan.pk}/change/")


def test_a_failed_key_rotation_fires_for_every_team_with_the_rule(team, other_team):
    rule(team, Kind.KEY_ROTATION_FAILED)
    rule(other_team, Kind.KEY_ROTATION_FAILED, enabled=False)
    signing_keys_bootstrap()
    age_keys(86400)

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        assert rotate_signing_keys.apply().failed()

    (alert,) = Alert.objects.all()
    assert alert.team == team and alert.subject == "signing-keys"
    assert "cannot be decrypted" in alert.summary or "signing key" in alert.summary
    assert alert.url == "https://plangate.test/admin/plans/signingkey/"


def test_facts_before_the_first_rule_and_of_other_teams_do_not_fire(
    agent, other_agent, team, other_team
):
    plan_id = declare(agent).json()["id"]
    post_events(agent, plan_id, 1, events=[], lost=1)
    records_seal()
    rule(team, Kind.DECISIONS_LOST)
    other_plan = declare(other_agent, user="olga@globex.test").json()["id"]
    post_events(other_agent, other_plan, 1, events=[], lost=1)

    scan()

    assert not Alert.objects.exists()


def test_a_second_scan_reads_nothing_twice(agent, team):
    rule(team, Kind.DECISIONS_LOST, dedup_minutes=1)
    plan_id = declare(agent).json()["id"]
    post_events(agent, plan_id, 1, events=[], lost=1)

    assert scan().raised == 1
    assert scan(now=timezone.now() + timedelta(hours=1)).raised == 0
    assert Alert.objects.get().count == 1


# --- deduplication ------------------------------------------------------------------


def test_the_same_subject_within_the_window_is_one_alert_counted(agent, team):
    rule(team, Kind.DECISIONS_LOST, dedup_minutes=30)
    plan_id = declare(agent).json()["id"]
    post_events(agent, plan_id, 1, events=[], lost=1)
    post_events(agent, plan_id, 2, events=[], lost=1)
    other_plan = declare(agent).json()["id"]
    post_events(agent, other_plan, 1, events=[], lost=1)

    scan()

    alerts = {alert.subject: alert.count for alert in Alert.objects.all()}
    assert alerts == {plan_id: 2, other_plan: 1}


def test_after_the_window_the_same_subject_is_a_new_alert(team):
    lost = rule(team, Kind.DECISIONS_LOST, dedup_minutes=30)
    now = timezone.now()
    first = alert_raise(rule=lost, subject="p1", summary="s", url="https://x.test/", now=now)
    again = alert_raise(
        rule=lost, subject="p1", summary="s", url="https://x.test/", now=now + timedelta(minutes=29)
    )
    later = alert_raise(
        rule=lost, subject="p1", summary="s", url="https://x.test/", now=now + timedelta(minutes=31)
    )

    assert (first.new, again.new, later.new) == (True, False, True)
    assert again.alert.pk == first.alert.pk and again.alert.count == 2
    assert Alert.objects.count() == 2


def test_a_folded_alert_is_not_sent_again(
    team, receiver, eager_tasks, django_capture_on_commit_callbacks
):
    team_webhook_save(team=team, url=receiver.url, secret=SECRET)
    lost = rule(team, Kind.DECISIONS_LOST, channels=["webhook"])

    with django_capture_on_commit_callbacks(execute=True):
        alert_raise(rule=lost, subject="p1", summary="s", url="https://x.test/")
    with django_capture_on_commit_callbacks(execute=True):
        alert_raise(rule=lost, subject="p1", summary="s", url="https://x.test/")

    assert len(receiver.received) == 1
    assert AlertDelivery.objects.count() == 1


# --- channels -----------------------------------------------------------------------


def test_an_alert_goes_to_the_teams_webhook_signed_like_approval_webhooks(
    agent, team, receiver, eager_tasks, django_capture_on_commit_callbacks
):
    team_webhook_save(team=team, url=receiver.url, secret=SECRET)
    rule(team, Kind.DECISIONS_LOST, channels=["webhook"])
    plan_id = declare(agent).json()["id"]
    post_events(agent, plan_id, 1, events=[], lost=4)

    with django_capture_on_commit_callbacks(execute=True):
        scan()

    (request,) = receiver.received
    headers = {name.lower(): value for name, value in request.headers.items()}
    assert headers["x-plangate-event"] == "alert"
    assert webhook_signature_valid(
        secret=SECRET,
        timestamp=headers[TIMESTAMP_HEADER.lower()],
        body=request.body,
        signature=headers[SIGNATURE_HEADER.lower()],
    )
    body = json.loads(request.body)
    assert body["alert"]["kind"] == "decisions_lost"
    assert body["alert"]["url"].endswith(f"/admin/plans/plan/{plan_id}/change/")
    assert body["team"] == team.slug
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.channel, delivery.attempt, delivery.status_code, delivery.error) == (
        "webhook",
        1,
        200,
        "",
    )
    assert str(delivery.delivery_id) == headers["x-plangate-delivery"]


def test_a_receiver_answering_500_is_retried_with_back_off_until_delivered(team, receiver):
    team_webhook_save(team=team, url=receiver.url, secret=SECRET)
    lost = rule(team, Kind.DECISIONS_LOST, channels=["webhook"])
    alert = alert_raise(rule=lost, subject="p1", summary="lost", url="https://x.test/").alert
    receiver.statuses = [500, 500]

    deliver_alert.apply(
        kwargs={"alert_id": alert.pk, "channel": "webhook", "delivery_id": str(alert.pk).zfill(32)}
    )

    rows = list(AlertDelivery.objects.order_by("attempt"))
    assert [(row.attempt, row.status_code, row.error) for row in rows] == [
        (1, 500, "answered 500"),
        (2, 500, "answered 500"),
        (3, 200, ""),
    ]
    assert [round((row.next_retry_at - row.sent_at).total_seconds()) for row in rows[:2]] == [2, 4]
    assert rows[2].next_retry_at is None
    assert len({request.body for request in receiver.received}) == 1


def test_an_alert_is_e_mailed_to_the_rules_addresses(
    agent, team, eager_tasks, django_capture_on_commit_callbacks
):
    rule(team, Kind.TOKEN_REFUSED, email_to="oncall@acme.dev, sre@acme.dev")
    plan_id = declare(agent).json()["id"]
    post_events(agent, plan_id, 1, end={"outcome": "token_refused", "reason": "expired"})

    with django_capture_on_commit_callbacks(execute=True):
        scan()

    (message,) = mail.outbox
    assert message.to == ["oncall@acme.dev", "sre@acme.dev"]
    assert message.subject.startswith("[Plangate] Alert: The guard of plan")
    assert f"/admin/plans/plan/{plan_id}/change/" in message.body
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.channel, delivery.error, delivery.succeeded) == ("email", "", True)


@LOCAL
def test_an_alert_is_posted_to_the_teams_slack(
    agent, team, receiver, eager_tasks, django_capture_on_commit_callbacks
):
    team_slack_save(team=team, webhook_url=receiver.url)
    rule(team, Kind.DECISIONS_LOST, channels=["slack"])
    plan_id = declare(agent).json()["id"]
    post_events(agent, plan_id, 1, events=[], lost=2)

    with django_capture_on_commit_callbacks(execute=True):
        scan()

    (request,) = receiver.received
    message = json.loads(request.body)
    assert "2 decision(s) were lost" in message["text"]
    link = message["blocks"][1]["elements"][0]["text"]
    assert f"/admin/plans/plan/{plan_id}/change/|Open in Plangate>" in link
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.channel, delivery.status_code) == ("slack", 200)


@LOCAL
def test_a_slack_answer_of_500_is_retried(team, receiver):
    team_slack_save(team=team, webhook_url=receiver.url)
    lost = rule(team, Kind.DECISIONS_LOST, channels=["slack"])
    alert = alert_raise(rule=lost, subject="p1", summary="lost", url="https://x.test/").alert
    receiver.statuses = [500]

    deliver_alert.apply(kwargs={"alert_id": alert.pk, "channel": "slack", "delivery_id": "0" * 32})

    rows = list(AlertDelivery.objects.order_by("attempt"))
    assert [(row.attempt, row.status_code) for row in rows] == [(1, 500), (2, 200)]


def test_the_slack_url_is_stored_encrypted(team):
    url = "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX"
    slack = team_slack_save(team=team, webhook_url=url)

    stored = TeamSlack.objects.get(pk=slack.pk)
    assert "hooks.slack.com" not in stored.webhook_url_encrypted
    assert slack_webhook_url(stored) == url
    team_slack_save(team=team, active=False)  # an empty URL keeps the stored one
    assert slack_webhook_url(TeamSlack.objects.get(pk=slack.pk)) == url


def test_a_slack_url_of_another_host_is_refused_and_nothing_written(team):
    with pytest.raises(DomainError) as refused:
        team_slack_save(team=team, webhook_url="https://evil.test/hook")
    assert refused.value.errors[0].path == "webhook_url"
    assert not TeamSlack.objects.exists()


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"channels": []}, "channels"),
        ({"channels": ["pager"]}, "channels"),
        ({"channels": ["webhook"]}, "channels"),  # the team has no webhook
        ({"channels": ["slack"]}, "channels"),  # nor Slack
        ({"channels": ["email"], "email_to": ""}, "email_to"),
        ({"channels": ["email"], "email_to": "not-an-address"}, "email_to"),
        ({"channels": ["email"], "threshold": 0}, "threshold"),
    ],
)
def test_a_rule_that_cannot_work_is_refused_and_nothing_written(team, fields, path):
    values = {"email_to": "oncall@acme.dev", **fields}
    with pytest.raises(DomainError) as refused:
        alert_rule_save(rule=AlertRule(team=team, kind=Kind.DECISIONS_LOST, **values))
    assert refused.value.code == Code.INVALID_REQUEST
    assert path in {error.path for error in refused.value.errors}
    assert not AlertRule.objects.exists()


def test_the_webhook_payload_names_the_alert(team):
    lost = rule(team, Kind.DECISIONS_LOST)
    alert = alert_raise(rule=lost, subject="p1", summary="lost", url="https://x.test/a").alert
    payload = alert_payload(alert)
    assert payload["event"] == "alert"
    assert payload["alert"]["subject"] == "p1" and payload["alert"]["count"] == 1
