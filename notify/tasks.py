"""Celery doors of the notifications: the approvers' e-mail, and the webhook (one attempt
per run, retried with back-off)."""

from __future__ import annotations

import logging
from smtplib import SMTPException
from typing import Any

from celery import shared_task

from audit.doors import AuditedTask
from plans.models import Plan

from .notifications import approvers_email
from .webhooks import webhook_attempt

logger = logging.getLogger(__name__)

#: how often a failed e-mail is tried again (after 10, 20, 40 s)
EMAIL_RETRIES = 3


@shared_task(
    base=AuditedTask,
    bind=True,
    name="notify.tasks.deliver_webhook",
    soft_time_limit=60,
    time_limit=90,
    acks_late=True,
)
def deliver_webhook(
    self: Any,
    *,
    webhook_id: int,
    delivery_id: str,
    plan_id: str,
    event: str,
    payload: dict,
) -> int | None:
    """Deliver one notification: attempt ``retries + 1`` (each one a WebhookDelivery row);
    a failed attempt is retried after 2^n s (capped) until PLANGATE_WEBHOOK_MAX_ATTEMPTS.
    Returns the receiver's status code of the last attempt, None when the webhook is gone."""
    result = webhook_attempt(
        webhook_id=webhook_id,
        delivery_id=delivery_id,
        plan_id=plan_id,
        event=event,
        payload=payload,
        attempt=self.request.retries + 1,
    )
    if result is None:
        return None
    if result.retry_in is not None:
        # The attempt count lives in webhook_attempt's setting; Celery's own cap is off.
        raise self.retry(countdown=result.retry_in, max_retries=None)
    return result.delivery.status_code


@shared_task(
    base=AuditedTask,
    name="notify.tasks.email_approvers",
    soft_time_limit=60,
    time_limit=90,
    autoretry_for=(OSError, SMTPException),
    retry_backoff=10,
    retry_jitter=False,
    max_retries=EMAIL_RETRIES,
)
def email_approvers(*, plan_id: str) -> int:
    """E-mail the approvers of a plan that waits for a person; how many were e-mailed.
    A plan already decided (or gone) meanwhile is not e-mailed about."""
    plan = (
        Plan.objects.select_related("team", "agent", "member", "policy_version__policy")
        .filter(pk=plan_id, approval=Plan.Approval.PENDING)
        .first()
    )
    if plan is None:
        return 0
    return len(approvers_email(plan=plan))


def _retry_or_done(task: Any, result: Any) -> int | None:
    if result is None:
        return None
    if result.retry_in is not None:
        # The attempt count lives in PLANGATE_WEBHOOK_MAX_ATTEMPTS; Celery's own cap is off.
        raise task.retry(countdown=result.retry_in, max_retries=None)
    return result.delivery.status_code


@shared_task(
    base=AuditedTask,
    bind=True,
    name="notify.tasks.deliver_alert",
    soft_time_limit=60,
    time_limit=90,
    acks_late=True,
)
def deliver_alert(self: Any, *, alert_id: int, channel: str, delivery_id: str) -> int | None:
    """Deliver one alert on one channel: attempt ``retries + 1`` (an AlertDelivery row
    each), retried as approval webhooks are (``backoff_seconds``)."""
    from .alert_delivery import alert_delivery_attempt

    result = alert_delivery_attempt(
        alert_id=alert_id,
        channel=channel,
        delivery_id=delivery_id,
        attempt=self.request.retries + 1,
    )
    return _retry_or_done(self, result)


@shared_task(
    base=AuditedTask,
    bind=True,
    name="notify.tasks.post_slack_approval",
    soft_time_limit=60,
    time_limit=90,
    acks_late=True,
)
def post_slack_approval(self: Any, *, plan_id: str, delivery_id: str) -> int | None:
    """Post a waiting plan's approval request, with its buttons, to the team's Slack."""
    from .alert_delivery import slack_approval_attempt

    result = slack_approval_attempt(
        plan_id=plan_id, delivery_id=delivery_id, attempt=self.request.retries + 1
    )
    return _retry_or_done(self, result)


@shared_task(
    name="notify.tasks.slack_respond",
    soft_time_limit=30,
    time_limit=45,
    autoretry_for=(OSError,),
    retry_backoff=2,
    max_retries=3,
)
def slack_respond(*, response_url: str, message: dict) -> int | None:
    """Answer a button press through its ``response_url`` (Slack keeps one for 30 min)."""
    from .slack import slack_post

    status_code, error = slack_post(url=response_url, message=message)
    if error:
        logger.warning("answering a Slack interaction failed: %s", error)
    return status_code


@shared_task(base=AuditedTask, name="notify.tasks.scan_alerts", soft_time_limit=60, time_limit=90)
def scan_alerts() -> int:
    """Read the audit trail since each team's cursor and raise what the rules ask."""
    from .alerts import alerts_scan

    try:
        result = alerts_scan()
    except Exception:
        logger.exception("scanning for alerts failed")
        raise
    if result.raised:
        logger.info("alerts: %d raised from %d fact(s)", result.raised, result.read)
    return result.raised
