"""Shipping the sealed audit trail to an OpenTelemetry collector as OTLP log records
(docs/decisions/0078), each record as its OCSF event (audit.ocsf).

Optional: on when ``AUDIT_OTLP_LOGS_ENDPOINT`` names a collector's OTLP/HTTP logs URL
(``http://collector:4318/v1/logs``), with ``AUDIT_OTLP_LOGS_HEADERS`` (``name=value,...``)
for its credentials. The worker's ``audit.tasks.export_audit_records`` runs it after the
sealer's schedule, in a task of its own: the seal never waits for a collector.

At least once, resumable: per team, the records after the team's ``AuditExportCursor``
are sent in ``seq`` order, and the cursor moves to the last one sent only once the
collector accepted them (a 2xx). A failure, a timeout or a crash leaves the cursor, and the
next run sends the same records again; each log record carries ``plangate.seq`` (and the
record's hash), by which a receiver drops what it already has.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from teams.models import Team

from .models import AuditExportCursor, AuditRecord
from .ocsf import OCSF_VERSION, ocsf_event
from .selectors import records_after

logger = logging.getLogger(__name__)

#: records per request to the collector
EXPORT_BATCH = 500
#: OTLP severity numbers: INFO and WARN
_INFO, _WARN = 9, 13


@dataclass(frozen=True)
class ExportResult:
    exported: int  # records the collector accepted
    teams: int  # teams with records sent
    failed: int  # teams whose export failed (their cursor did not move)


def export_headers() -> dict[str, str]:
    """``AUDIT_OTLP_LOGS_HEADERS`` (``name=value`` pairs, comma-separated) as headers."""
    headers = {"Content-Type": "application/x-protobuf"}
    for pair in settings.AUDIT_OTLP_LOGS_HEADERS.split(","):
        name, _, value = pair.partition("=")
        if name.strip() and value.strip():
            headers[name.strip()] = value.strip()
    return headers


def _attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def log_record(record: AuditRecord, team_slug: str) -> LogRecord:
    """One sealed record as an OTLP log record whose body is its OCSF event (JSON)."""
    event = ocsf_event(record, team_slug)
    at = int(record.at.timestamp() * 1_000_000) * 1000
    failed = event.get("status_id") == 2
    return LogRecord(
        time_unix_nano=at,
        observed_time_unix_nano=at,
        severity_number=_WARN if failed else _INFO,  # type: ignore[arg-type]
        severity_text="WARN" if failed else "INFO",
        body=AnyValue(string_value=json.dumps(event, sort_keys=True, separators=(",", ":"))),
        attributes=[
            _attribute("plangate.team", team_slug),
            _attribute("plangate.seq", record.seq or 0),
            _attribute("plangate.kind", record.kind),
            _attribute("plangate.hash", record.hash),
            _attribute("ocsf.class_uid", event["class_uid"]),
            _attribute("ocsf.version", OCSF_VERSION),
        ],
    )


def export_request(records: list[AuditRecord], team_slug: str) -> ExportLogsServiceRequest:
    resource = Resource(
        attributes=[_attribute("service.name", "plangate"), _attribute("plangate.team", team_slug)]
    )
    return ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(
                resource=resource,
                scope_logs=[
                    ScopeLogs(
                        scope=InstrumentationScope(name="plangate.audit"),
                        log_records=[log_record(record, team_slug) for record in records],
                    )
                ],
            )
        ]
    )


def records_export(
    *, limit: int = EXPORT_BATCH, client: httpx.Client | None = None
) -> ExportResult:
    """Send each team's sealed records after its cursor (at most ``limit`` per team and
    run) to ``AUDIT_OTLP_LOGS_ENDPOINT``; nothing when it is not set."""
    endpoint = settings.AUDIT_OTLP_LOGS_ENDPOINT
    if not endpoint:
        return ExportResult(0, 0, 0)
    exported = teams = failed = 0
    owned = client is None
    http = client or httpx.Client(timeout=settings.AUDIT_OTLP_LOGS_TIMEOUT)
    try:
        cursors = dict(AuditExportCursor.objects.values_list("team_id", "last_seq"))
        for team in Team.objects.order_by("pk"):
            after = cursors.get(team.pk, 0)
            records = records_after(team=team, after=after, limit=limit)
            if not records:
                continue
            teams += 1
            body = export_request(records, team.slug).SerializeToString()
            try:
                response = http.post(endpoint, content=body, headers=export_headers())
            except httpx.HTTPError as error:
                logger.warning("audit export of team %s failed: %s", team.slug, error)
                failed += 1
                continue
            if not response.is_success:
                logger.warning(
                    "audit export of team %s refused: HTTP %d", team.slug, response.status_code
                )
                failed += 1
                continue
            _advance(team, records[-1].seq or after)
            exported += len(records)
    finally:
        if owned:
            http.close()
    return ExportResult(exported, teams, failed)


def _advance(team: Team, seq: int) -> None:
    """Move the team's cursor forward to ``seq`` (never back: two runs may overlap)."""
    with transaction.atomic():
        cursor, _ = AuditExportCursor.objects.select_for_update().get_or_create(team=team)
        if seq > cursor.last_seq:
            cursor.last_seq, cursor.updated_at = seq, timezone.now()
            cursor.save(update_fields=["last_seq", "updated_at"])
