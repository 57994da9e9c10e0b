"""Retention in the audit trail: what a team's retention period removes from it, and how the
chain stays verifiable after (docs/decisions/0044).

The records retention removes are the guard's decisions and the refused attempts (kinds
``decision``, ``plan_refused``, ``refresh_refused``: RETAINED_KINDS). Each is a member of
its team's hash chain, so it is not deleted, which would break the chain at its ``seq``:
it is **redacted**. Every field an auditor reads is emptied except where the record stands
(team, ``seq``, ``kind``, ``at``) and the chain's own ``prev_hash`` and ``hash``, and
``redacted_at`` is set. ``verify_audit`` then checks a redacted record's place in the chain
(its ``seq``, its ``prev_hash`` against the record before, the next one's ``prev_hash``
against its ``hash``) but cannot recompute its hash, whose content is gone.

So that emptying records cannot hide anything, each run of retention appends a ``change``
record (``details.object == "retention"``) per team saying how many records it redacted,
through the journal's own door (``audit.changes.change_append``) and sealed like any
other; the verifier holds the team's redacted records to those counts
(``redactions_unaccounted``) and refuses a redacted record of any other kind.

Before anything is removed, ``retention_export`` is sent with the rows about to go: a
receiver that raises stops that batch's removal (its transaction rolls back), so the rows
are removed only once every receiver has had them. Nothing receives it by default; an
operator names a receiver with the setting ``PLANGATE_RETENTION_EXPORT`` (a dotted path,
connected when retention runs), or code connects one as to any Django signal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone
from django.utils.module_loading import import_string

from teams.models import Team

from .changes import change_append
from .models import AuditRecord

#: Sent with each batch of rows retention is about to remove, inside the batch's
#: transaction: ``sender`` is the rows' model (plans.models.PlanEvent or AuditRecord),
#: with ``team`` (the Team), ``cutoff`` (rows before it go) and ``rows`` (the model
#: instances, as stored). A receiver that raises keeps the batch: nothing of it is removed.
retention_export = Signal()


def export_receiver_connect() -> None:
    """Connect the receiver ``PLANGATE_RETENTION_EXPORT`` names, if any (once: by its path).
    A path that does not import fails the run before anything is removed."""
    path = settings.PLANGATE_RETENTION_EXPORT
    if path:
        retention_export.connect(import_string(path), weak=False, dispatch_uid=f"setting:{path}")


RETAINED_KINDS = frozenset(
    {
        AuditRecord.Kind.DECISION,
        AuditRecord.Kind.PLAN_REFUSED,
        AuditRecord.Kind.REFRESH_REFUSED,
    }
)
#: ``details.object`` of the change record each retention run appends per team
RETENTION_OBJECT = "retention"

#: The fields redaction empties, with their empty values; what it keeps is the record's
#: place: team, seq, kind, at, prev_hash, hash, sealed_at.
_REDACTED_VALUES: dict[str, Any] = {
    "actor": "",
    "agent_id": None,
    "agent_name": "",
    "user": "",
    "plan_id": "",
    "plan_hash": "",
    "policy": "",
    "policy_version": None,
    "code": "",
    "rule": None,
    "details": {},
}


def expired_records(*, team_id: int, cutoff: datetime) -> Any:
    """The team's sealed records that retention redacts and that are still whole."""
    return (
        AuditRecord.objects.sealed()
        .whole()
        .filter(team_id=team_id, kind__in=RETAINED_KINDS, at__lt=cutoff)
    )


@dataclass(frozen=True)
class RedactedBatch:
    by_kind: dict[str, int] = field(default_factory=dict)
    last_id: int | None = None  # the highest id this batch looked at; None: nothing left

    @property
    def count(self) -> int:
        return sum(self.by_kind.values())


def records_redact_batch(
    *, team: Team, cutoff: datetime, after_id: int, size: int
) -> RedactedBatch:
    """Redact up to ``size`` of the team's expired records with ids above ``after_id``, in
    id order, in one transaction, after ``retention_export`` has had them.

    The rows are claimed with ``FOR UPDATE SKIP LOCKED`` (PostgreSQL), so a second run at
    the same moment takes other rows or none, and the UPDATE touches only records still
    whole: no record is exported twice by two runs, or redacted twice.
    """
    with transaction.atomic():
        records = list(
            expired_records(team_id=team.pk, cutoff=cutoff)
            .filter(pk__gt=after_id)
            .order_by("pk")
            .select_for_update(skip_locked=True, of=("self",))[:size]
        )
        if not records:
            return RedactedBatch()
        retention_export.send(sender=AuditRecord, team=team, cutoff=cutoff, rows=records)
        by_kind: dict[str, int] = {}
        for record in records:
            by_kind[record.kind] = by_kind.get(record.kind, 0) + 1
        redacted = (
            AuditRecord.objects.whole()
            .filter(pk__in=[record.pk for record in records])
            .update(redacted_at=timezone.now(), **_REDACTED_VALUES)
        )
        if redacted != len(records):
            # Another run redacted some first (SQLite has no row locks): which ones is not
            # known, so this batch claims none by kind; the run's record still counts every
            # redacted record once (retention_record_append).
            by_kind = {}
        return RedactedBatch(by_kind=by_kind, last_id=records[-1].pk)


def _declared(team_id: int) -> int:
    """Records the team's retention records say were redacted, all runs together."""
    return sum(
        int(details.get("redacted", 0) or 0)
        for details in AuditRecord.objects.filter(
            team_id=team_id, kind=AuditRecord.Kind.CHANGE, details__object=RETENTION_OBJECT
        ).values_list("details", flat=True)
        if isinstance(details, dict)
    )


def redactions_unaccounted(*, team_id: int) -> int:
    """Redacted records of the team that no retention record counts (0 when all are)."""
    redacted = AuditRecord.objects.redacted().filter(team_id=team_id).count()
    return max(0, redacted - _declared(team_id))


def retention_record_append(
    *,
    team: Team,
    cutoff: datetime,
    decisions_removed: int,
    records_redacted: dict[str, int],
) -> AuditRecord | None:
    """The run's change record for the team: its cut-off and what it removed; None when it
    removed nothing.

    ``redacted`` counts every redacted record no earlier retention record counted, which is
    this run's, plus any a run interrupted before its record left behind. The team's row is
    locked while it is counted and appended, so two runs finishing at once count each
    record once.
    """
    with transaction.atomic():
        list(Team.objects.select_for_update().filter(pk=team.pk).values_list("pk", flat=True))
        redacted = redactions_unaccounted(team_id=team.pk)
        if not decisions_removed and not redacted and not any(records_redacted.values()):
            return None
        return change_append(
            team=team,
            object_type=RETENTION_OBJECT,
            object_id=cutoff.isoformat(),
            name=f"decisions and refused attempts before {cutoff:%Y-%m-%d %H:%M} UTC",
            action="removed",
            extra={
                "cutoff": cutoff.isoformat(),
                "retentionDays": team.retention_days,
                "decisionsRemoved": decisions_removed,
                "recordsRedacted": {kind: count for kind, count in records_redacted.items()},
                "redacted": redacted,
            },
        )
