"""Celery tasks of the audit trail, run by beat (see CELERY_BEAT_SCHEDULE in settings)."""

from __future__ import annotations

import logging

from celery import shared_task

from .services import records_seal

logger = logging.getLogger(__name__)


@shared_task(name="audit.tasks.seal_audit_records", soft_time_limit=60, time_limit=90)
def seal_audit_records() -> int:
    """Number and chain the records appended since the last run (``records_seal``).

    Idempotent: a duplicated or overlapping run seals nothing twice (the team's chain head
    is locked while a batch is sealed), and a run that fails leaves its records unsealed
    for the next one.
    """
    try:
        result = records_seal()
    except Exception:
        logger.exception("sealing audit records failed")
        raise
    if result.sealed:
        logger.info(
            "audit records: sealed %d in %d team(s)%s",
            result.sealed,
            len(result.teams),
            "; more are waiting" if result.pending else "",
        )
    return result.sealed
