"""One attempt to deliver an alert on one channel, or an approval request to Slack, and
its ``AlertDelivery`` row. The Celery tasks (``notify.tasks``) retry a failed attempt
after ``backoff_seconds``, up to PLANGATE_WEBHOOK_MAX_ATTEMPTS, as approval webhooks are.

The webhook channel is the team's approval webhook (``TeamWebhook``: the same URL,
secret and signature, ``X-Plangate-Event: alert``); e-mail is Django's mail; Slack is the
team's incoming webhook (``notify.slack``).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from smtplib import SMTPException
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from plans.keys.encryption import EncryptionKeyError
from plans.models import Plan

from .models import Alert, AlertDelivery, AlertRule, TeamSlack, TeamWebhook
from .slack import alert_message, approval_message, slack_post, slack_webhook_url
from .webhooks import backoff_seconds, webhook_post

logger = logging.getLogger(__name__)

ALERT_EVENT = "alert"
Channel = AlertRule.Channel


@dataclass(frozen=True)
class DeliveryAttempt:
    delivery: AlertDelivery
    #: seconds until the next attempt, or None: delivered, or no attempt left
    retry_in: int | None


def alert_payload(alert: Alert) -> dict[str, Any]:
    """The webhook's JSON body for an alert (docs/alerts.md documents it)."""
    return {
        "event": ALERT_EVENT,
        "alert": {
            "id": alert.pk,
            "kind": alert.kind,
            "subject": alert.subject,
            "summary": alert.summary,
            "url": alert.url,
            "count": alert.count,
            "firstAt": alert.first_at.isoformat(),
            "details": alert.details,
        },
        "team": alert.team.slug,
    }


def _send(alert: Alert, channel: str, delivery_id: str) -> tuple[int | None, str]:
    if channel == Channel.WEBHOOK:
        webhook = TeamWebhook.objects.filter(team=alert.team_id, active=True).first()
        if webhook is None:
            return None, "the team has no active webhook"
        body = json.dumps(alert_payload(alert), separators=(",", ":"), sort_keys=True).encode()
        return webhook_post(webhook=webhook, body=body, event=ALERT_EVENT, delivery_id=delivery_id)
    if channel == Channel.EMAIL:
        recipients = alert.rule.email_recipients()
        if not recipients:
            return None, "the rule names no e-mail address"
        try:
            send_mail(
                subject=f"[Plangate] Alert: {alert.summary[:120]}",
                message=f"{alert.summary}\n\nWhat happened and what to do: {alert.url}\n",
                from_email=None,
                recipient_list=recipients,
            )
        except (OSError, SMTPException) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return None, ""
    if channel == Channel.SLACK:
        return _slack_send(alert.team_id, alert_message(alert))
    return None, f"unknown channel {channel!r}"


def _slack_send(team_id: int, message: dict[str, Any]) -> tuple[int | None, str]:
    slack = TeamSlack.objects.filter(team=team_id, active=True).first()
    if slack is None:
        return None, "the team has no active Slack connection"
    try:
        url = slack_webhook_url(slack)
    except EncryptionKeyError as exc:
        return None, str(exc)
    return slack_post(url=url, message=message)


def _store(
    *,
    team_id: int,
    alert: Alert | None,
    plan_id: str,
    channel: str,
    delivery_id: str,
    attempt: int,
    status_code: int | None,
    error: str,
) -> DeliveryAttempt:
    retry_in = None
    if error and attempt < settings.PLANGATE_WEBHOOK_MAX_ATTEMPTS:
        retry_in = backoff_seconds(attempt)
    now = timezone.now()
    delivery = AlertDelivery.objects.create(
        team_id=team_id,
        alert=alert,
        plan_id=plan_id,
        channel=channel,
        delivery_id=uuid.UUID(delivery_id),
        attempt=attempt,
        status_code=status_code,
        error=error[:500],
        sent_at=now,
        next_retry_at=now + timedelta(seconds=retry_in) if retry_in is not None else None,
    )
    if error:
        logger.warning(
            "%s delivery %s of team %s, attempt %d failed: %s%s",
            channel,
            delivery_id,
            team_id,
            attempt,
            error,
            f"; next attempt in {retry_in} s" if retry_in is not None else "; giving up",
        )
    return DeliveryAttempt(delivery=delivery, retry_in=retry_in)


def alert_delivery_attempt(
    *, alert_id: int, channel: str, delivery_id: str, attempt: int
) -> DeliveryAttempt | None:
    """Send alert ``alert_id`` on ``channel`` once and record the attempt; None when the
    alert is gone (nothing sent, nothing recorded)."""
    alert = Alert.objects.select_related("team", "rule").filter(pk=alert_id).first()
    if alert is None:
        return None
    status_code, error = _send(alert, channel, delivery_id)
    return _store(
        team_id=alert.team_id,
        alert=alert,
        plan_id=str(alert.details.get("plan", ""))[:26],
        channel=channel,
        delivery_id=delivery_id,
        attempt=attempt,
        status_code=status_code,
        error=error,
    )


def slack_approval_attempt(
    *, plan_id: str, delivery_id: str, attempt: int
) -> DeliveryAttempt | None:
    """Post the approval request of ``plan_id`` with its buttons to the team's Slack once;
    None when the plan no longer waits or the team has no active Slack connection."""
    plan = (
        Plan.objects.select_related("team", "agent", "member")
        .filter(pk=plan_id, approval=Plan.Approval.PENDING)
        .first()
    )
    if plan is None or not TeamSlack.objects.filter(team=plan.team_id, active=True).exists():
        return None
    status_code, error = _slack_send(plan.team_id, approval_message(plan))
    return _store(
        team_id=plan.team_id,
        alert=None,
        plan_id=plan.pk,
        channel=Channel.SLACK,
        delivery_id=delivery_id,
        attempt=attempt,
        status_code=status_code,
        error=error,
    )


def slack_approval_queue(*, plan: Plan) -> str | None:
    """Queue the Slack approval request of ``plan`` when its team has Slack; the delivery
    id, or None. Never raises (the plan's issuance never depends on Slack)."""
    from .tasks import post_slack_approval

    try:
        if not TeamSlack.objects.filter(team=plan.team_id, active=True).exists():
            return None
        delivery_id = str(uuid.uuid4())
        post_slack_approval.apply_async(kwargs={"plan_id": plan.pk, "delivery_id": delivery_id})
    except Exception:
        logger.exception("could not queue the Slack approval request of plan %s", plan.pk)
        return None
    return delivery_id
