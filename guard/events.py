"""The event batch: what the guard's reporter posts to ``POST /v1/plans/{id}/events``.

One declaration of the wire shape, next to the plan's: the reporter builds its batches with
the ``*_json`` builders and the control plane validates what it receives with
`validate_event_batch`, so the two cannot drift apart. The limits are the constants of
`guard.decisions`; the endpoint's OpenAPI description reads the same constants.

A batch (camelCase on the wire)::

    {"events": [{"at": "2026-11-30T09:00:00.250000Z", "tool": "github_list_issues",
                 "decision": "allowed", "step": 0, "reason": "...",
                 "argsDigest": "<sha-256 hex>", "args": {...}}],
     "displayUpdates": [{"at": "...", "message": {<ACP session/update params>}}]}

Either list may be left out, but not both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from guard.decisions import (
    DECISION_CODES,
    MAX_DISPLAY_UPDATE_BYTES,
    MAX_DISPLAY_UPDATES_PER_BATCH,
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    Decision,
)
from guard.errors import DocumentInvalid, FieldError

__all__ = [
    "DISPLAY_UPDATE_KEYS",
    "EVENT_BATCH_KEYS",
    "EVENT_KEYS",
    "DisplayUpdate",
    "EventBatch",
    "GuardEvent",
    "display_update_json",
    "event_batch_json",
    "guard_event_json",
    "timestamp",
    "validate_event_batch",
]

EVENT_BATCH_KEYS = frozenset({"events", "displayUpdates"})
EVENT_KEYS = frozenset({"at", "tool", "decision", "step", "reason", "argsDigest", "args"})
DISPLAY_UPDATE_KEYS = frozenset({"at", "message"})
_REQUIRED_EVENT_KEYS = ("at", "tool", "decision")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
# Far longer than any RFC 3339 date-time; keeps fromisoformat away from long garbage.
_MAX_TIME_LENGTH = 40


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """One decision of the guard, as validated."""

    occurred_at: datetime
    tool: str
    decision: Decision
    step: int | None
    reason: str
    args_digest: str  # "" when the arguments were not JSON
    args: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class DisplayUpdate:
    """One ACP message the guard showed to the user."""

    occurred_at: datetime | None
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventBatch:
    events: tuple[GuardEvent, ...]
    display_updates: tuple[DisplayUpdate, ...]


# --- building (the reporter) ------------------------------------------------------------


def timestamp(at: float) -> str:
    """A Unix time as RFC 3339 in UTC with microseconds: ``2026-11-30T09:00:00.250000Z``."""
    return datetime.fromtimestamp(at, tz=UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def guard_event_json(
    *,
    at: float,
    tool: object,
    decision: str,
    step: int | None,
    reason: str = "",
    args_digest: str | None = None,
    args: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One event of a batch. A tool that is not a name (the agent can pass anything) is
    shown by its repr, and texts are cut to the limits, so the event is always accepted."""
    text = tool if isinstance(tool, str) else repr(tool)
    event: dict[str, Any] = {
        "at": timestamp(at),
        "tool": (text or "(empty)")[:MAX_EVENT_TOOL_LENGTH],
        "decision": decision,
    }
    if step is not None:
        event["step"] = step
    if reason:
        event["reason"] = reason[:MAX_EVENT_REASON_LENGTH]
    if args_digest is not None:
        event["argsDigest"] = args_digest
        if args is not None:
            event["args"] = args
    return event


def display_update_json(*, at: float, message: Mapping[str, Any]) -> dict[str, Any]:
    return {"at": timestamp(at), "message": message}


def event_batch_json(
    *, events: list[dict[str, Any]], display_updates: list[dict[str, Any]]
) -> dict[str, Any]:
    """The body of one post; an empty list is left out. The caller keeps each list within
    MAX_EVENTS_PER_BATCH and MAX_DISPLAY_UPDATES_PER_BATCH."""
    body: dict[str, Any] = {}
    if events:
        body["events"] = events
    if display_updates:
        body["displayUpdates"] = display_updates
    return body


# --- validating (the control plane) -----------------------------------------------------


def validate_event_batch(batch: object, *, steps: int | None = None) -> EventBatch:
    """The batch, typed, or DocumentInvalid listing every problem with its path.

    `steps` is the number of steps of the plan the batch belongs to; an event's step must
    index one of them. Without it, any non-negative step is accepted.
    """
    errors: list[FieldError] = []
    if not isinstance(batch, Mapping):
        raise DocumentInvalid([FieldError("", "expected an object")])
    errors.extend(
        FieldError(str(key), "unknown field")
        for key in sorted(batch.keys() - EVENT_BATCH_KEYS, key=str)
    )
    raw_events = _list(batch.get("events"), "events", MAX_EVENTS_PER_BATCH, errors)
    raw_updates = _list(
        batch.get("displayUpdates"), "displayUpdates", MAX_DISPLAY_UPDATES_PER_BATCH, errors
    )
    events = [
        _event(event, f"events[{index}]", steps, errors) for index, event in enumerate(raw_events)
    ]
    updates = [
        _display_update(update, f"displayUpdates[{index}]", errors)
        for index, update in enumerate(raw_updates)
    ]
    if not errors and not events and not updates:
        errors.append(FieldError("events", "the batch is empty"))
    if errors:
        raise DocumentInvalid(errors)
    return EventBatch(
        events=tuple(event for event in events if event is not None),
        display_updates=tuple(update for update in updates if update is not None),
    )


def _list(value: object, path: str, limit: int, errors: list[FieldError]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(FieldError(path, "expected an array"))
        return []
    if len(value) > limit:
        errors.append(FieldError(path, f"at most {limit} items per batch"))
        return []
    return value


def _time(value: object, path: str, errors: list[FieldError]) -> datetime | None:
    if not isinstance(value, str) or len(value) > _MAX_TIME_LENGTH:
        errors.append(FieldError(path, "expected an RFC 3339 date-time string"))
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        errors.append(FieldError(path, "expected an RFC 3339 date-time string"))
        return None
    if parsed.tzinfo is None:
        errors.append(FieldError(path, "the date-time needs a time zone (e.g. Z)"))
        return None
    return parsed


def _event(
    event: object, path: str, steps: int | None, errors: list[FieldError]
) -> GuardEvent | None:
    if not isinstance(event, dict):
        errors.append(FieldError(path, "expected an object"))
        return None
    before = len(errors)
    errors.extend(FieldError(f"{path}.{key}", "unknown field") for key in event.keys() - EVENT_KEYS)
    errors.extend(
        FieldError(f"{path}.{key}", "this field is required")
        for key in _REQUIRED_EVENT_KEYS
        if key not in event
    )
    occurred_at = _time(event.get("at"), f"{path}.at", errors) if "at" in event else None
    tool = event.get("tool")
    if "tool" in event and not (isinstance(tool, str) and 1 <= len(tool) <= MAX_EVENT_TOOL_LENGTH):
        errors.append(
            FieldError(
                f"{path}.tool", f"expected a tool name of 1 to {MAX_EVENT_TOOL_LENGTH} characters"
            )
        )
    decision = event.get("decision")
    if "decision" in event and decision not in DECISION_CODES:
        errors.append(
            FieldError(f"{path}.decision", f"expected one of {', '.join(sorted(DECISION_CODES))}")
        )
    step = event.get("step")
    if step is not None and (
        isinstance(step, bool)
        or not isinstance(step, int)
        or step < 0
        or (steps is not None and step >= steps)
    ):
        expected = "a step index" if steps is None else f"a step index from 0 to {steps - 1}"
        errors.append(FieldError(f"{path}.step", f"expected {expected}"))
    if decision == Decision.ALLOWED and step is None:
        errors.append(
            FieldError(f"{path}.step", "an allowed call names the step it counts against")
        )
    reason = event.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_EVENT_REASON_LENGTH:
        errors.append(
            FieldError(
                f"{path}.reason",
                f"expected a string of at most {MAX_EVENT_REASON_LENGTH} characters",
            )
        )
    digest = event.get("argsDigest", "")
    if not isinstance(digest, str) or (digest and not _DIGEST.match(digest)):
        errors.append(FieldError(f"{path}.argsDigest", "expected a lowercase hex SHA-256"))
    if "args" in event and not isinstance(event["args"], dict):
        errors.append(FieldError(f"{path}.args", "expected an object"))
    # The isinstance checks repeat what the errors above already say, for the type checker.
    if (
        len(errors) > before
        or occurred_at is None
        or not isinstance(tool, str)
        or not isinstance(decision, str)
    ):
        return None
    return GuardEvent(
        occurred_at=occurred_at,
        tool=tool,
        decision=Decision(decision),
        step=step,
        reason=reason,
        args_digest=digest,
        args=event.get("args"),
    )


def _display_update(update: object, path: str, errors: list[FieldError]) -> DisplayUpdate | None:
    if not isinstance(update, dict):
        errors.append(FieldError(path, "expected an object"))
        return None
    before = len(errors)
    errors.extend(
        FieldError(f"{path}.{key}", "unknown field") for key in update.keys() - DISPLAY_UPDATE_KEYS
    )
    occurred_at = _time(update["at"], f"{path}.at", errors) if "at" in update else None
    message = update.get("message")
    if not isinstance(message, dict):
        errors.append(FieldError(f"{path}.message", "expected the ACP message as an object"))
    elif len(json.dumps(message, separators=(",", ":")).encode()) > MAX_DISPLAY_UPDATE_BYTES:
        errors.append(
            FieldError(f"{path}.message", f"larger than {MAX_DISPLAY_UPDATE_BYTES // 1024} KiB")
        )
    if len(errors) > before or not isinstance(message, dict):
        return None
    return DisplayUpdate(occurred_at=occurred_at, message=message)
