"""A SIEM paging the records API while records are appended and sealed, on PostgreSQL:
it reads every record exactly once, in chain order."""

from __future__ import annotations

import threading

from django.test import override_settings
from rest_framework.test import APIClient

from audit.models import AuditRecord
from audit.services import records_seal
from audit.tokens import audit_token_create
from tests.integration.processes import SHARED_DATABASE_MARKS

from .helpers import append
from .test_chain_concurrency import in_thread

pytestmark = [*SHARED_DATABASE_MARKS]

APPENDERS = 3
RECORDS_PER_APPENDER = 80


@override_settings(PLANGATE_RATE_LIMIT="1000000/min")
def test_paging_while_records_are_appended_and_sealed_neither_skips_nor_repeats(team, other_team):
    plaintext = audit_token_create(team=team, name="SIEM")[1]
    errors: list[BaseException] = []
    appending_done, sealing_done = threading.Event(), threading.Event()
    read: list[dict] = []

    def appender(owner) -> None:
        for _ in range(RECORDS_PER_APPENDER):
            append(owner, 1)

    def sealer() -> None:
        while not appending_done.is_set():
            records_seal(limit=5)  # small batches: many commits while the reader reads
        records_seal()
        sealing_done.set()

    def reader() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        after = 0
        while True:
            # Read the flag first: an empty page after sealing ended is the true end.
            finished = sealing_done.is_set()
            response = client.get("/v1/audit/records", {"after": after, "limit": 7})
            assert response.status_code == 200, response.content
            body = response.json()
            read.extend(body["records"])
            if not body["records"]:
                assert body["next"] == after
                if finished:
                    return
            after = body["next"]

    threads = [in_thread(lambda: appender(team), errors) for _ in range(APPENDERS)]
    threads.append(in_thread(lambda: appender(other_team), errors))
    sealing = in_thread(sealer, errors)
    reading = in_thread(reader, errors)
    for thread in threads:
        thread.join(timeout=300)
    appending_done.set()
    sealing.join(timeout=300)
    reading.join(timeout=300)
    assert not errors, errors
    assert not any(t.is_alive() for t in [*threads, sealing, reading])

    stored = list(AuditRecord.objects.filter(team=team).order_by("seq").values_list("seq", "pk"))
    assert all(seq is not None for seq, _ in stored)
    assert len(stored) >= APPENDERS * RECORDS_PER_APPENDER
    seqs = [record["seq"] for record in read]
    assert seqs == list(range(1, len(stored) + 1))  # no gap, no repeat, in order
    assert [(r["seq"], r["id"]) for r in read] == stored
    assert {record["team"] for record in read} == {team.slug}
