"""Log lines as JSON objects, one per line (``LOG_FORMAT=json``), for a log collector.

Every record becomes ``{"time", "level", "logger", "message", "process", ...}`` followed
by the fields it was given as ``extra`` (the request line's ``request_id``, ``status``,
``agent``...), and ``exception`` with the traceback when there is one. Nothing is lost to a
format string, and a value that JSON cannot hold is written as its ``str``.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# The attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            # Which of several worker processes wrote it.
            "process": record.process,
        }
        for name, value in vars(record).items():
            if name not in _STANDARD_ATTRIBUTES and not name.startswith("_"):
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False, separators=(",", ":"))


class RequestLineFormatter(logging.Formatter):
    """The request line in plain text: ``<time> INFO plangate.request POST /v1/plans 201
    12.3 ms request_id=... agent=... plan=... code=...`` (absent fields left out)."""

    _FIELDS = (("request_id", "request_id"), ("agent", "agent"), ("plan_id", "plan"))

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = vars(record)
        extras = [f"{label}={fields[name]}" for name, label in self._FIELDS if fields.get(name)]
        if fields.get("code"):
            extras.append(f"code={fields['code']}")
        return f"{line} {' '.join(extras)}" if extras else line
