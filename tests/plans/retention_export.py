"""A real receiver of ``audit.retention.retention_export`` for the retention tests: it writes
each row it gets to the file ``RETENTION_EXPORT_FILE`` names, one JSON line per row, with
whether the row was still whole in the database when it came (it must be: the export goes
first). Named by PLANGATE_RETENTION_EXPORT in the worker's test, connected directly in the
others."""

from __future__ import annotations

import json
import os
from typing import Any

from audit.models import AuditRecord
from plans.models import PlanEvent


def write_rows(sender: type, *, team: Any, cutoff: Any, rows: list[Any], **kwargs: Any) -> None:
    with open(os.environ["RETENTION_EXPORT_FILE"], "a", encoding="utf-8") as export:
        for row in rows:
            if sender is PlanEvent:
                whole = PlanEvent.objects.filter(pk=row.pk).exists()
                content = {"tool": row.tool, "decision": row.decision}
            else:
                whole = AuditRecord.objects.filter(pk=row.pk, redacted_at__isnull=True).exists()
                content = {"kind": row.kind, "code": row.code, "user": row.user}
            line = {
                "model": sender.__name__,
                "id": row.pk,
                "team": team.pk,
                "cutoff": cutoff.isoformat(),
                "whole_when_exported": whole,
                **content,
            }
            export.write(json.dumps(line) + "\n")


def exported(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as export:
        return [json.loads(line) for line in export if line.strip()]
