"""Celery tasks of the audit trail, run by beat (see CELERY_BEAT_SCHEDULE in settings)."""

from __future__ import annotations

import logging

from celery import shared_task

from .otlp_export import records_export
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


@shared_task(name="audit.tasks.export_audit_records", soft_time_limit=120, time_limit=150)
def export_audit_records() -> int:
    """Ship the records sealed since the last export to the OTLP collector
    (``records_export``): its own task, so the seal never waits for a collector."""
    result = records_export()
    if result.exported or result.failed:
        logger.info(
            "audit records: exported %d of %d team(s), %d team(s) failed (retried next run)",
            result.exported,
            result.teams,
            result.failed,
        )
    return result.exported
