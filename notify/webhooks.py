"""A team's approval webhook: saving it (its secret encrypted at rest) and one attempt to
deliver a notification to it. The Celery task ``notify.tasks.deliver_webhook`` is the door
that retries; this module decides what one attempt sends and records.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import InvalidToken
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.changes import change_append
from guard.errors import FieldError
from kernel.problems import Code, DomainError
from plans.keys.encryption import EncryptionKeyError, encryption_keys
from plans.models import Plan
from teams.models import Team

from .models import TeamWebhook, WebhookDelivery
from .records import approval_notified_record
from .signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    webhook_signature,
)

logger = logging.getLogger(__name__)

#: a secret shorter than this is refused: the HMAC is only as strong as its key
WEBHOOK_SECRET_MIN_LENGTH = 16
WEBHOOK_SECRET_MAX_LENGTH = 200


def webhook_secret_encrypt(secret: str) -> str:
    return encryption_keys().encrypt(secret.encode()).decode("ascii")


def webhook_secret(webhook: TeamWebhook) -> str:
    """The plaintext secret, to sign with. Raises EncryptionKeyError (a DomainError) when
    KEY_ENCRYPTION_KEY cannot decrypt it."""
    try:
        return encryption_keys().decrypt(webhook.secret_encrypted.encode("ascii")).decode()
    except InvalidToken as exc:
        raise EncryptionKeyError(
            f"the approval webhook of team {webhook.team_id} cannot be decrypted with "
            "KEY_ENCRYPTION_KEY"
        ) from exc


def team_webhook_save(
    *, team: Team, url: str, secret: str = "", active: bool = True
) -> TeamWebhook:
    """Create or update the team's webhook. An empty ``secret`` keeps the stored one (a new
    webhook needs one). The activity log records the URL and on/off, and a changed secret
    only as changed."""
    secret = secret.strip()
    if secret and not WEBHOOK_SECRET_MIN_LENGTH <= len(secret) <= WEBHOOK_SECRET_MAX_LENGTH:
        raise DomainError(
            Code.INVALID_REQUEST,
            "The webhook secret is too short or too long.",
            errors=[
                FieldError(
                    "secret",
                    f"Use {WEBHOOK_SECRET_MIN_LENGTH} to {WEBHOOK_SECRET_MAX_LENGTH} characters.",
                )
            ],
        )
    with transaction.atomic():
        webhook = TeamWebhook.objects.select_for_update().filter(team=team).first()
        created = webhook is None
        if webhook is None:
            if not secret:
                raise DomainError(
                    Code.INVALID_REQUEST,
                    "A new webhook needs a secret.",
                    errors=[FieldError("secret", "Set the secret the requests are signed with.")],
                )
            webhook = TeamWebhook(team=team)
        before = {
            "url": "" if created else webhook.url,
            "active": None if created else webhook.active,
        }
        webhook.url, webhook.active, webhook.updated_at = url, active, timezone.now()
        if secret:
            webhook.secret_encrypted = webhook_secret_encrypt(secret)
        webhook.save()
        changes: dict[str, list[Any]] = {
            field: [before[field], value]
            for field, value in (("url", url), ("active", active))
            if before[field] != value
        }
        if secret:
            changes["secret"] = [None if created else "(set)", "(changed)"]
        if changes:
            change_append(
                team=team,
                object_type="approval_webhook",
                object_id=webhook.pk,
                name=url,
                action="created" if created else "updated",
                changes=changes,
            )
    return webhook


def backoff_seconds(attempt: int) -> int:
    """How long to wait after failed attempt ``attempt`` (1, 2, ...): 2^n s, capped."""
    return int(min(2**attempt, settings.PLANGATE_WEBHOOK_MAX_BACKOFF))


def webhook_post(
    *, webhook: TeamWebhook, body: bytes, event: str, delivery_id: str
) -> tuple[int | None, str]:
    """POST ``body`` to ``webhook`` once, signed (notify.signing): the receiver's status
    code (None when none answered) and an error, "" when it answered 2xx. Never raises
    for the receiver's or the network's failures. Approval notifications and alerts both
    send through it."""
    # Here, not at import: only the worker sends; the web server never loads an HTTP client
    # (tests/policies/test_simulator_imports.py).
    import httpx

    status_code: int | None = None
    error = ""
    try:
        secret = webhook_secret(webhook)
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Plangate-Webhook/1",
            EVENT_HEADER: event,
            DELIVERY_HEADER: delivery_id,
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: webhook_signature(secret=secret, timestamp=timestamp, body=body),
        }
        response = httpx.post(
            webhook.url,
            content=body,
            headers=headers,
            timeout=settings.PLANGATE_WEBHOOK_TIMEOUT,
            follow_redirects=False,
        )
        status_code = response.status_code
        if not 200 <= status_code < 300:
            error = f"answered {status_code}"
    except EncryptionKeyError as exc:
        error = str(exc)
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return status_code, error


@dataclass(frozen=True)
class AttemptResult:
    delivery: WebhookDelivery
    #: seconds until the next attempt, or None: delivered, or no attempt left
    retry_in: int | None


def webhook_attempt(
    *, webhook_id: int, delivery_id: str, plan_id: str, event: str, payload: dict, attempt: int
) -> AttemptResult | None:
    """POST ``payload`` to the webhook once and record the attempt. None when the webhook
    is gone or switched off meanwhile (nothing is sent, nothing recorded).

    The body is the same bytes on every attempt; the timestamp, and so the signature, is
    the attempt's own (notify.signing says what is signed).
    """
    webhook = TeamWebhook.objects.filter(pk=webhook_id, active=True).first()
    if webhook is None:
        return None
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    status_code, error = webhook_post(
        webhook=webhook, body=body, event=event, delivery_id=str(delivery_id)
    )
    delivered = not error
    retry_in = None
    if not delivered and attempt < settings.PLANGATE_WEBHOOK_MAX_ATTEMPTS:
        retry_in = backoff_seconds(attempt)
    now = timezone.now()
    with transaction.atomic():
        delivery = _attempt_store(
            webhook, delivery_id, plan_id, event, attempt, now, retry_in, status_code, error
        )
    if not delivered:
        logger.warning(
            "approval webhook of team %s, plan %s, attempt %d failed: %s%s",
            webhook.team_id,
            plan_id,
            attempt,
            error,
            f"; next attempt in {retry_in} s" if retry_in is not None else "; giving up",
        )
    return AttemptResult(delivery=delivery, retry_in=retry_in)


def _attempt_store(
    webhook: TeamWebhook,
    delivery_id: str,
    plan_id: str,
    event: str,
    attempt: int,
    now: datetime,
    retry_in: int | None,
    status_code: int | None,
    error: str,
) -> WebhookDelivery:
    """The attempt's row; and, once the notification is delivered or given up on, its
    ``approval_notified`` record in the plan's audit trail (in the same transaction)."""
    delivery = WebhookDelivery.objects.create(
        webhook=webhook,
        delivery_id=uuid.UUID(str(delivery_id)),
        plan_id=plan_id,
        event=event,
        attempt=attempt,
        status_code=status_code,
        error=error[:500],
        sent_at=now,
        next_retry_at=now + timedelta(seconds=retry_in) if retry_in is not None else None,
    )
    if retry_in is None:
        plan = (
            Plan.objects.select_related("agent", "member", "policy_version__policy")
            .filter(pk=plan_id)
            .first()
        )
        if plan is not None:
            approval_notified_record(
                plan=plan,
                at=now,
                details={
                    "channel": "webhook",
                    "url": webhook.url,
                    "delivery": str(delivery_id),
                    "attempts": attempt,
                    "delivered": delivery.succeeded,
                    "status": status_code,
                    "error": delivery.error,
                },
            )
    return delivery
