"""Retention: a team's guard decisions and refused attempts older than its retention period
(``Team.retention_days``, default 400) are removed by the worker (docs/decisions/0044).

``retention_apply`` runs, per team, in small batches each committed on its own:

1. the plan's decisions (PlanEvent rows) before the cut-off are deleted, by primary key, a
   batch at a time; each plan that lost some has ``decisions_removed_before`` set, which
   its page shows;
2. the audit trail's decision and refusal records before the cut-off are redacted
   (``audit.retention``: the chain keeps their place, so ``verify_audit`` still passes);
3. one ``change`` record per team says what the run removed, with the cut-off.

Before each batch goes, ``audit.retention.retention_export`` is sent with its rows; a
receiver that raises keeps the batch. Batches are claimed with ``FOR UPDATE SKIP LOCKED``
on PostgreSQL, so two runs at once share the work instead of doing it twice, and every
statement is bounded by the batch's keys. A run stops after ``max_batches`` per team and
table; the next run goes on where it stopped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from audit.doors import AuditedTask
from audit.retention import (
    export_receiver_connect,
    records_redact_batch,
    retention_export,
    retention_record_append,
)
from teams.models import Team

from .models import Plan, PlanEvent

logger = logging.getLogger(__name__)

__all__ = ["RetentionResult", "apply_retention", "retention_apply", "team_retention_apply"]


@dataclass(frozen=True)
class RetentionResult:
    team_id: int
    cutoff: datetime
    decisions_removed: int  # PlanEvent rows deleted
    records_redacted: dict[str, int]  # audit records redacted, by kind
    complete: bool  # False: max_batches stopped the run; the next one goes on


def retention_cutoff(team: Team, now: datetime) -> datetime:
    """Rows of the team from before this moment are past its retention period."""
    return now - timedelta(days=team.retention_days)


def _events_delete_batch(
    *, team: Team, cutoff: datetime, after_id: int, size: int
) -> tuple[int, int | None]:
    """Delete up to ``size`` of the team's decisions before ``cutoff`` with ids above
    ``after_id``, in id order, after ``retention_export`` has had them. Returns how many
    were deleted and the highest id looked at (None: nothing left)."""
    with transaction.atomic():
        events = list(
            PlanEvent.objects.filter(plan__team=team, occurred_at__lt=cutoff, pk__gt=after_id)
            .order_by("pk")
            .select_for_update(skip_locked=True, of=("self",))[:size]
        )
        if not events:
            return 0, None
        retention_export.send(sender=PlanEvent, team=team, cutoff=cutoff, rows=events)
        ids = [event.pk for event in events]
        # Bounded by the batch's own keys (and their range, which an index serves).
        deleted, _ = PlanEvent.objects.filter(pk__gte=ids[0], pk__lte=ids[-1], pk__in=ids).delete()
        Plan.objects.filter(pk__in={event.plan_id for event in events}).update(
            decisions_removed_before=Greatest(
                Coalesce(F("decisions_removed_before"), Value(cutoff)), Value(cutoff)
            )
        )
        return deleted, ids[-1]


def team_retention_apply(
    *,
    team: Team,
    now: datetime | None = None,
    batch_size: int,
    max_batches: int,
    deadline: float | None = None,
) -> RetentionResult:
    """Apply the team's retention period once (see the module's docstring). No batch starts
    after ``deadline`` (``time.monotonic()``), so the run's record is always written
    before the task's time limit."""
    cutoff = retention_cutoff(team, now or timezone.now())
    decisions_removed, complete = 0, True

    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() > deadline

    after_id = 0
    for _ in range(max_batches):
        if out_of_time():
            complete = False
            break
        deleted, last_id = _events_delete_batch(
            team=team, cutoff=cutoff, after_id=after_id, size=batch_size
        )
        if last_id is None:
            break
        decisions_removed += deleted
        after_id = last_id
    else:
        complete = False
    redacted: dict[str, int] = {}
    after_id = 0
    for _ in range(max_batches):
        if out_of_time():
            complete = False
            break
        batch = records_redact_batch(team=team, cutoff=cutoff, after_id=after_id, size=batch_size)
        if batch.last_id is None:
            break
        for kind, count in batch.by_kind.items():
            redacted[kind] = redacted.get(kind, 0) + count
        after_id = batch.last_id
    else:
        complete = False
    retention_record_append(
        team=team, cutoff=cutoff, decisions_removed=decisions_removed, records_redacted=redacted
    )
    return RetentionResult(team.pk, cutoff, decisions_removed, redacted, complete)


def retention_apply(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
    seconds: float | None = None,
) -> list[RetentionResult]:
    """Apply every team's retention period; sizes and the time budget from settings unless
    given."""
    size = batch_size or settings.PLANGATE_RETENTION_BATCH_SIZE
    batches = max_batches or settings.PLANGATE_RETENTION_MAX_BATCHES
    deadline = time.monotonic() + (seconds or settings.PLANGATE_RETENTION_RUN_SECONDS)
    now = now or timezone.now()
    export_receiver_connect()
    return [
        team_retention_apply(
            team=team, now=now, batch_size=size, max_batches=batches, deadline=deadline
        )
        for team in Team.objects.order_by("pk")
    ]


# The run stops starting batches after PLANGATE_RETENTION_RUN_SECONDS (default 300): the
# limits leave a batch and the records time to finish.
@shared_task(
    base=AuditedTask, name="plans.retention.apply_retention", soft_time_limit=600, time_limit=660
)
def apply_retention() -> int:
    """Beat's door into ``retention_apply``: rows removed or redacted, all teams together.

    Safe to run twice at once, or again after a failure: each batch is claimed, exported
    and removed in one transaction, and what one run removed the other finds gone.
    """
    results = retention_apply()
    removed = sum(r.decisions_removed + sum(r.records_redacted.values()) for r in results)
    if removed:
        logger.info(
            "retention: %d decisions removed, %d audit records redacted in %d team(s)%s",
            sum(r.decisions_removed for r in results),
            sum(sum(r.records_redacted.values()) for r in results),
            sum(1 for r in results if r.decisions_removed or r.records_redacted),
            "" if all(r.complete for r in results) else "; more are left for the next run",
        )
    return removed
