"""Sealing under concurrency, on PostgreSQL: sealers take turns on a team's head and never
fork its chain, and appending never waits for a sealer."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection, connections, transaction

from audit.models import AuditChainHead, AuditRecord
from audit.services import record_append, records_seal
from audit.verification import chain_verify
from tests.integration.processes import SHARED_DATABASE_MARKS, wait_for

from .helpers import append, sealed_seqs

pytestmark = [*SHARED_DATABASE_MARKS]

APPENDERS = 4
RECORDS_PER_APPENDER = 60


def in_thread(target: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_two_sealers_racing_with_appenders_never_give_two_records_one_seq(team):
    errors: list[BaseException] = []
    appending_done = threading.Event()
    start = threading.Barrier(APPENDERS + 2)

    def appender() -> None:
        start.wait()
        for number in range(RECORDS_PER_APPENDER):
            with transaction.atomic():
                record_append(team=team, kind=AuditRecord.Kind.DECISION, details={"n": number})

    def sealer() -> None:
        start.wait()
        # Small batches: many turns on the head's lock while records keep arriving.
        while not appending_done.is_set():
            records_seal(team=team, limit=7)
        records_seal(team=team)

    appenders = [in_thread(appender, errors) for _ in range(APPENDERS)]
    sealers = [in_thread(sealer, errors) for _ in range(2)]
    for thread in appenders:
        thread.join(timeout=300)
    appending_done.set()
    for thread in sealers:
        thread.join(timeout=300)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in appenders + sealers)

    records_seal(team=team)
    total = AuditRecord.objects.filter(team=team).count()
    assert total >= APPENDERS * RECORDS_PER_APPENDER
    assert sealed_seqs(team) == list(range(1, total + 1))
    assert AuditChainHead.objects.get(team=team).last_seq == total
    report = chain_verify(team=team)
    assert report.intact, report.broken
    assert (report.sealed, report.unsealed) == (total, 0)


def _waiting_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def test_appending_goes_on_while_a_sealer_holds_the_head_and_the_next_sealer_waits(team):
    append(team, 3)
    records_seal(team=team)
    errors: list[BaseException] = []
    locked, release = threading.Event(), threading.Event()
    second_sealer_pid: list[int] = []

    def sealer_holding_the_head() -> None:
        with transaction.atomic():
            AuditChainHead.objects.select_for_update().get(team=team)
            locked.set()
            release.wait(timeout=300)

    def second_sealer() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            second_sealer_pid.append(cursor.fetchone()[0])
        records_seal(team=team)

    holder = in_thread(sealer_holding_the_head, errors)
    assert locked.wait(timeout=60)
    try:
        # Appending in the meantime: done while the head is locked (join does not time out).
        appended: list[AuditRecord] = []
        appender = in_thread(lambda: appended.extend(append(team, 5)), errors)
        appender.join(timeout=60)
        assert not appender.is_alive(), "appending waited for the sealer's lock"
        assert len(appended) == 5

        waiting = in_thread(second_sealer, errors)
        assert wait_for(lambda: bool(second_sealer_pid), timeout=60)
        assert wait_for(lambda: _waiting_on_a_lock(second_sealer_pid[0]), timeout=60), (
            "the second sealer did not wait for the head's lock"
        )
        assert AuditRecord.objects.unsealed().filter(team=team).count() == 5
    finally:
        release.set()
        holder.join(timeout=60)
    waiting.join(timeout=60)
    assert not errors, errors
    total = AuditRecord.objects.filter(team=team).count()
    assert sealed_seqs(team) == list(range(1, total + 1))
    assert chain_verify(team=team).intact
