"""Celery tasks: thin doors into the key and plan services, run by beat (see settings).

Both are idempotent, so a retried or duplicated run is harmless. Their changes are recorded
in the activity log as the task's (``celery <task name>``, ``audit.doors.AuditedTask``).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import DatabaseError

from audit.doors import AuditedTask
from kernel.ratelimit import rate_limit_windows_purge

from .approvals import plans_approval_expire
from .keys import EncryptionKeyError, signing_key_rotate, signing_key_rotation_failed
from .models import SigningKey
from .retention import apply_retention  # noqa: F401 (registered with the worker here)
from .services import plans_expire

logger = logging.getLogger(__name__)


def _rotation_failed(detail: str) -> None:
    for receiver, outcome in signing_key_rotation_failed.send_robust(
        sender=SigningKey, detail=detail
    ):
        if isinstance(outcome, Exception):
            logger.error("rotation-failure receiver %r failed: %r", receiver, outcome)


def _active_kid() -> str:
    """The active kid for a failure message; the database may be what failed."""
    try:
        kid = (
            SigningKey.objects.filter(state=SigningKey.State.ACTIVE)
            .values_list("kid", flat=True)
            .first()
        )
    except DatabaseError:
        return "unknown (database unavailable)"
    return kid or "none"


@shared_task(
    base=AuditedTask,
    name="plans.tasks.rotate_signing_keys",
    soft_time_limit=60,
    time_limit=90,
    autoretry_for=(DatabaseError,),
    retry_backoff=5,
    max_retries=5,
)
def rotate_signing_keys() -> dict:
    """Scheduled rotation: skipped when the last rotation is recent (a duplicate tick)."""
    try:
        result = signing_key_rotate()
    except EncryptionKeyError as exc:
        # The message names the kid that cannot be decrypted; retrying will not fix it.
        logger.error("signing-key rotation refused: %s", exc)
        _rotation_failed(str(exc))
        raise
    except Exception as exc:
        active = _active_kid()
        logger.exception("signing-key rotation failed; active key %s", active)
        _rotation_failed(f"{type(exc).__name__}: {exc} (active key {active})")
        raise
    return {
        "outcome": result.outcome,
        "retired": result.retired,
        "activated": result.activated,
        "created": result.created,
        "removed": list(result.removed),
    }


@shared_task(base=AuditedTask, name="plans.tasks.expire_plans", soft_time_limit=60, time_limit=90)
def expire_plans() -> int:
    """Mark active plans past their absolute lifetime as expired."""
    try:
        count = plans_expire()
        # The same sweep deletes the rate-limit counters of finished windows.
        rate_limit_windows_purge()
    except Exception:
        logger.exception("marking expired plans failed")
        raise
    if count:
        logger.info("marked %d plan(s) expired", count)
    return count


@shared_task(
    base=AuditedTask, name="plans.tasks.expire_approvals", soft_time_limit=60, time_limit=90
)
def expire_approvals() -> int:
    """Mark requests for approval that nobody decided within their window as expired."""
    try:
        count = plans_approval_expire()
    except Exception:
        logger.exception("marking expired requests for approval failed")
        raise
    if count:
        logger.info("marked %d request(s) for approval expired", count)
    return count
