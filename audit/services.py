"""Appending to the audit trail, and sealing it.

Every door's write calls ``record_append`` (or ``records_append`` for many) inside its own
transaction, so a record exists exactly when what it describes does; a refusal, which
writes nothing else, is appended on its own. Records are appended unsealed; the worker's
``records_seal`` chains them a few seconds later (``audit.chain`` says what is hashed)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from kernel.sql import row_insert
from teams.models import Team

from .actors import current_actor
from .chain import GENESIS_PREV_HASH, record_hash
from .models import AuditChainHead, AuditRecord, UnattributedRefusal


def record_build(
    *,
    team: Team | int,
    kind: AuditRecord.Kind,
    at: datetime | None = None,
    actor: str | None = None,
    agent_id: str | None = None,
    agent_name: str = "",
    user: str = "",
    plan_id: str = "",
    plan_hash: str = "",
    policy: str = "",
    policy_version: int | None = None,
    code: str = "",
    rule: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> AuditRecord:
    """An unsaved record; ``actor`` defaults to the door's (audit.actors.acting_as)."""
    team_id = team if isinstance(team, int) else team.pk
    return AuditRecord(
        team_id=team_id,
        kind=kind,
        at=at or timezone.now(),
        actor=current_actor() if actor is None else actor,
        agent_id=agent_id,
        agent_name=agent_name,
        user=user,
        plan_id=plan_id,
        plan_hash=plan_hash,
        policy=policy,
        policy_version=policy_version,
        code=str(code),
        rule=rule,
        details=details or {},
    )


def record_append(**fields: Any) -> AuditRecord:
    record = record_build(**fields)
    # As save(force_insert=True) stores it, by a statement built once (kernel.sql):
    # every issuance and refresh appends one.
    row_insert(record)
    return record


def records_append(records: Iterable[AuditRecord]) -> list[AuditRecord]:
    return AuditRecord.objects.bulk_create(list(records))


def unattributed_refusal_count(*, code: str, day: date | None = None) -> None:
    """Count one refusal that names no agent (UnattributedRefusal), for ``day`` (today, UTC).

    One statement that inserts the day's first or adds one, as kernel.ratelimit counts its
    hits: atomic on SQLite and PostgreSQL, with no read-then-write race between workers.
    """
    day = day or timezone.now().date()
    # Only the model's own table name is formatted in; the values are parameters.
    table = connection.ops.quote_name(UnattributedRefusal._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (day, code, count) VALUES (%s, %s, 1) "  # noqa: S608
            f"ON CONFLICT (day, code) DO UPDATE SET count = {table}.count + 1",
            [connection.ops.adapt_datefield_value(day), str(code)],
        )


# --- sealing -------------------------------------------------------------------------------

#: records sealed per transaction: the head's lock is held this long at most
SEAL_BATCH_SIZE = 1000


@dataclass(frozen=True)
class SealResult:
    sealed: int  # records numbered and chained by this call
    teams: tuple[int, ...]  # ids of the teams whose chain grew
    pending: bool  # whether unsealed records were left for the next call (``limit`` hit)


def records_seal(*, team: Team | int | None = None, limit: int = 100_000) -> SealResult:
    """Number and chain the unsealed records of every team (or of ``team``), in id order:
    ``seq`` follows the team's head, ``prev_hash`` is the previous record's ``hash`` and
    ``hash`` is ``audit.chain.record_hash``. At most ``limit`` records per team per call.

    Each batch holds the team's head row lock (``select_for_update``) from reading the head
    to committing, so concurrent sealers take turns and never give two records one ``seq``;
    appending (``record_append``) takes no lock of theirs and never waits. A record whose
    transaction commits after a later id was sealed is sealed after it: the chain's order is
    the order records became visible, which is what a reader paging by ``seq`` needs.
    """
    team_ids: list[int]
    if team is not None:
        team_ids = [team if isinstance(team, int) else team.pk]
    else:
        team_ids = sorted(
            set(AuditRecord.objects.unsealed().values_list("team_id", flat=True).distinct())
        )
    sealed, grown, pending = 0, [], False
    for team_id in team_ids:
        team_sealed = 0
        while team_sealed < limit:
            size = min(SEAL_BATCH_SIZE, limit - team_sealed)
            count = _seal_batch(team_id, size)
            team_sealed += count
            if count < size:
                break  # none left
        else:  # the limit ended the loop
            pending = pending or AuditRecord.objects.unsealed().filter(team_id=team_id).exists()
        if team_sealed:
            grown.append(team_id)
            sealed += team_sealed
    return SealResult(sealed=sealed, teams=tuple(grown), pending=pending)


def _seal_batch(team_id: int, size: int) -> int:
    """Seal up to ``size`` of the team's oldest unsealed records in one transaction."""
    # The head must exist before it can be locked; creating it races harmlessly (the
    # loser's get_or_create reads the winner's row).
    AuditChainHead.objects.get_or_create(team_id=team_id)
    with transaction.atomic():
        head = AuditChainHead.objects.select_for_update().get(team_id=team_id)
        # Read after the lock: a sealer that held it before has committed by now, so its
        # records are no longer unsealed here.
        records = list(AuditRecord.objects.unsealed().filter(team_id=team_id).order_by("id")[:size])
        if not records:
            return 0
        now = timezone.now()
        seq, prev_hash = head.last_seq, head.last_hash or GENESIS_PREV_HASH
        for record in records:
            seq += 1
            record.seq, record.prev_hash, record.sealed_at = seq, prev_hash, now
            record.hash = record_hash(record)
            prev_hash = record.hash
        _store_seals(records, now)
        head.last_seq, head.last_hash, head.updated_at = seq, prev_hash, now
        head.save(update_fields=["last_seq", "last_hash", "updated_at"])
    return len(records)


def _store_seals(records: list[AuditRecord], now: datetime) -> None:
    """One parameterised UPDATE per record, sent as a batch (``executemany``): several
    times cheaper than ``bulk_update``'s one statement of CASE expressions (see
    ``make bench``, audit)."""
    table = connection.ops.quote_name(AuditRecord._meta.db_table)
    sealed_at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {table} SET seq = %s, prev_hash = %s, hash = %s, sealed_at = %s "  # noqa: S608
            "WHERE id = %s",
            [(r.seq, r.prev_hash, r.hash, sealed_at, r.pk) for r in records],
        )
