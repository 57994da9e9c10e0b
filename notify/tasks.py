"""Celery door of the approval webhook: one attempt per run, retried with back-off."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from audit.doors import AuditedTask

from .webhooks import webhook_attempt


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
