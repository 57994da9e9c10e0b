"""The sealed trail shipped as OTLP log records (audit.otlp_export) to an OTLP/HTTP receiver
in the test: each record's OCSF event as the body, at least once, resumable from the last
seq a collector accepted, and by a real worker on beat's schedule."""

from __future__ import annotations

import json

import pytest

from audit.models import AuditExportCursor
from audit.otlp_export import records_export
from audit.services import records_seal
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for
from tests.otlp import OtlpReceiver

from .helpers import append, sealed_seqs


def seqs(receiver: OtlpReceiver, team_slug: str) -> list[int]:
    return [
        log.attributes["plangate.seq"]
        for log in receiver.logs
        if log.attributes["plangate.team"] == team_slug
    ]


def test_nothing_is_sent_without_an_endpoint(team, settings):
    settings.AUDIT_OTLP_LOGS_ENDPOINT = ""
    append(team, 2)
    records_seal()
    assert records_export().exported == 0
    assert not AuditExportCursor.objects.exists()


def test_sealed_records_go_as_ocsf_log_records_and_the_cursor_follows(team, other_team, settings):
    with OtlpReceiver() as receiver:
        settings.AUDIT_OTLP_LOGS_ENDPOINT = f"{receiver.endpoint}/v1/logs"
        settings.AUDIT_OTLP_LOGS_HEADERS = "Authorization=Bearer collector-token"
        append(team, 3)
        append(other_team, 1)
        records_seal()
        append(team, 1)  # not sealed yet: not sent
        sealed = sealed_seqs(team)
        result = records_export()
        expected = len(sealed) + len(sealed_seqs(other_team))
        assert (result.exported, result.teams, result.failed) == (expected, 2, 0)
        assert seqs(receiver, team.slug) == sealed
        log = receiver.logs[0]
        event = json.loads(log.body)
        assert event["metadata"]["sequence"] == log.attributes["plangate.seq"]
        assert log.attributes["ocsf.class_uid"] == event["class_uid"]
        assert log.resource["service.name"] == "plangate"
        assert AuditExportCursor.objects.get(team=team).last_seq == sealed[-1]
        records_seal()
        assert records_export().exported == 1  # only the new one
        assert seqs(receiver, team.slug) == sealed_seqs(team)


def test_a_failed_export_leaves_the_cursor_and_the_next_run_resends(team, settings):
    with OtlpReceiver() as receiver:
        settings.AUDIT_OTLP_LOGS_ENDPOINT = f"{receiver.endpoint}/v1/logs"
        append(team, 2)
        records_seal()
        receiver.fail_next(1, 503)
        result = records_export()
        assert (result.exported, result.failed) == (0, 1)
        assert not AuditExportCursor.objects.filter(team=team, last_seq__gt=0).exists()
        append(team, 1)
        records_seal()
        assert records_export().exported == len(sealed_seqs(team))
        assert seqs(receiver, team.slug) == sealed_seqs(team)  # no gap, nothing skipped
        assert receiver.requests[0] == ("/v1/logs", 503)


def test_an_unreachable_collector_is_a_failure_not_an_error(team, settings):
    settings.AUDIT_OTLP_LOGS_ENDPOINT = "http://127.0.0.1:9/v1/logs"
    settings.AUDIT_OTLP_LOGS_TIMEOUT = 2
    append(team, 1)
    records_seal()
    assert records_export().failed == 1


def real_worker(test):
    """REAL_WORKER_MARKS on one test of a module whose others need none."""
    for mark in (pytest.mark.slow, *REAL_WORKER_MARKS):
        test = mark(test)
    return test


@real_worker
def test_a_real_worker_ships_records_after_sealing_them(tmp_path, team):
    append(team, 3)
    with (
        OtlpReceiver() as receiver,
        running_worker(
            tmp_path,
            beat=True,
            AUDIT_SEAL_SECONDS="1",
            AUDIT_OTLP_EXPORT_SECONDS="1",
            AUDIT_OTLP_LOGS_ENDPOINT=f"{receiver.endpoint}/v1/logs",
        ) as worker,
    ):
        arrived = wait_for(
            lambda: len(seqs(receiver, team.slug)) >= len(sealed_seqs(team)) >= 3,
            timeout=120,
            interval=0.5,
        )
        assert arrived, worker.tail()
    assert sorted(set(seqs(receiver, team.slug))) == sealed_seqs(team)
    assert "audit.tasks.export_audit_records" in worker.output()
