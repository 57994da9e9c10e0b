# Over 400 lines on purpose: the one declaration of the batch, built and validated side by side.
"""The event batch: what the guard's reporter posts to ``POST /v1/plans/{id}/events``.

One declaration of the wire shape, next to the plan's: the reporter builds its batches with
the ``*_json`` builders and the control plane validates what it receives with
`validate_event_batch`, so the two cannot drift apart. The limits are the constants of
`guard.decisions`; the endpoint's OpenAPI description reads the same constants.

A batch (camelCase on the wire)::

    {"stream": "3f2a...", "seq": 7, "lost": 0,
     "events": [{"at": "2026-11-30T09:00:00.250000Z", "tool": "github_list_issues",
                 "decision": "allowed", "step": 0, "reason": "...",
                 "rule": {"index": 0, "description": "allow github_* (rules[0])"},
                 "policyVersion": 3, "argsDigest": "<sha-256 hex>", "args": {...},
                 "amounts": {"refunds": 120}}],
     "displayUpdates": [{"at": "...", "message": {<ACP session/update params>}}],
     "end": {"outcome": "completed"}}

* ``stream`` and ``seq`` (together, or neither): the reporter's random stream id and the
  batch's number in it for this plan, 1, 2, 3...; the control plane stores each
  (plan, stream, seq) once, so a batch sent again after a lost answer is not stored twice.
* ``lost``: decisions of this plan the reporter could not keep (its queue was full, or the
  control plane refused a batch for good) since its last delivered batch.
* ``step`` is an index into the plan's ``steps`` (from 0), as ``rule.index`` is into the
  policy's ``rules``; people-facing texts (``reason``) count steps from 1.
* ``rule``: the policy rule that decided (``index`` null: the policy default); left out
  when the policy was not consulted (the call matched no step, say).
* ``amounts``: on an allowed call of a step that budgets of a version-2 plan cover, what
  the call counted against each of them (budget id -> amount); sent whether or not the
  team keeps arguments, as the budget's use is the plan's own accounting.
* ``shadow``: what the policy version published in shadow beside the active one (the
  token's ``shadow`` claim) would have decided, sent only where it differs from
  ``decision``: its ``decision``, its ``rule`` and its ``policyVersion``. Nothing is enforced
  by it (docs/decisions/0076).
* ``end``: the plan is over for the agent: ``completed`` (every required step ran),
  ``ended``, or ``token_refused`` (the guard refused the token it was given; ``reason``).

A batch carries at least one event, display update, lost decision or end.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from guard.decisions import (
    DECISION_CODES,
    MAX_BATCH_SEQUENCE,
    MAX_DISPLAY_UPDATE_BYTES,
    MAX_DISPLAY_UPDATES_PER_BATCH,
    MAX_END_REASON_LENGTH,
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_RULE_DESCRIPTION_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    MAX_LOST_PER_BATCH,
    MAX_STREAM_ID_LENGTH,
    MIN_STREAM_ID_LENGTH,
    PLAN_OUTCOMES,
    Decision,
    PlanOutcome,
)
from guard.errors import DocumentInvalid, FieldError
from guard.plan import MAX_BUDGETS, STEP_ID_PATTERN
from guard.policy import MAX_RULES
from guard.utc import isoformat_z

__all__ = [
    "DISPLAY_UPDATE_KEYS",
    "END_KEYS",
    "EVENT_BATCH_KEYS",
    "EVENT_KEYS",
    "RULE_KEYS",
    "DisplayUpdate",
    "EventBatch",
    "GuardEvent",
    "PlanEnd",
    "RuleRef",
    "display_update_json",
    "event_batch_json",
    "event_batch_json_schema",
    "guard_event_json",
    "plan_end_json",
    "timestamp",
    "validate_event_batch",
]

# A SHA-256 in lowercase hex, or "" when the arguments were not JSON.
ARGS_DIGEST_PATTERN = r"^(?:[0-9a-f]{64})?$"
_DIGEST = re.compile(ARGS_DIGEST_PATTERN)
STREAM_ID_PATTERN = rf"^[A-Za-z0-9_-]{{{MIN_STREAM_ID_LENGTH},{MAX_STREAM_ID_LENGTH}}}$"
_STREAM_ID = re.compile(STREAM_ID_PATTERN)
# Far longer than any RFC 3339 date-time; keeps fromisoformat away from long garbage.
_MAX_TIME_LENGTH = 40
# A budget's id, as a version-2 plan names it (docs/decisions/0066), and the most budgets a
# plan has: an allowed call counts against at most that many.
BUDGET_ID_PATTERN = STEP_ID_PATTERN
_BUDGET_ID = re.compile(BUDGET_ID_PATTERN)
MAX_EVENT_AMOUNTS = MAX_BUDGETS


# --- declaring (the schema) -------------------------------------------------------------


def event_batch_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the batch, from the constants `validate_event_batch`
    checks; the OpenAPI description of ``POST /v1/plans/{id}/events`` is derived from it.

    `validate_event_batch` remains the authority; what JSON Schema does not say here: an
    event's step indexes the plan's steps, a date-time is ISO 8601 with a time zone, a
    display update's message is at most MAX_DISPLAY_UPDATE_BYTES of compact JSON, integers
    written as 1.0 are refused, an amount is finite, and null stands for an absent
    ``stream``, ``seq``, ``events`` or ``displayUpdates``.
    """
    time = {"type": "string", "format": "date-time", "maxLength": _MAX_TIME_LENGTH}
    rule = {
        "type": ["object", "null"],
        "description": "the policy rule that decided; left out when the policy was not consulted",
        "properties": {
            "index": {
                "type": ["integer", "null"],
                "minimum": 0,
                "maximum": MAX_RULES - 1,
                "description": "index into the policy's `rules`, from 0; null: the policy default",
            },
            "description": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_EVENT_RULE_DESCRIPTION_LENGTH,
            },
        },
        "required": ["description"],
        "additionalProperties": False,
    }
    event = {
        "type": "object",
        "description": "One decision of the guard.",
        "properties": {
            "at": time,
            "tool": {"type": "string", "minLength": 1, "maxLength": MAX_EVENT_TOOL_LENGTH},
            "decision": {"type": "string", "enum": [code.value for code in Decision]},
            "step": {
                "type": ["integer", "null"],
                "minimum": 0,
                "description": "index into the plan's `steps`, from 0 (texts for people count"
                " from 1); an allowed call names the step it counts against",
            },
            "reason": {"type": "string", "maxLength": MAX_EVENT_REASON_LENGTH},
            "rule": rule,
            "policyVersion": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "the policy version the token in force carried",
            },
            "argsDigest": {
                "type": "string",
                "pattern": ARGS_DIGEST_PATTERN,
                "description": "SHA-256 of the call's arguments, lowercase hex; empty when"
                " they were not JSON",
            },
            "args": {"type": "object", "description": "the call's arguments, when reported"},
            "amounts": {
                "type": "object",
                "description": "what an allowed call of a budgeted step counted against each"
                " budget of the plan: budget id -> amount",
                "propertyNames": {"pattern": BUDGET_ID_PATTERN},
                "additionalProperties": {"type": "number", "minimum": 0},
                "maxProperties": MAX_EVENT_AMOUNTS,
            },
            "shadow": {
                "type": "object",
                "description": "what the policy version published in shadow would have"
                " decided, sent only where it differs from `decision`; never enforced",
                "properties": {
                    "decision": {"type": "string", "enum": [code.value for code in Decision]},
                    "rule": rule,
                    "policyVersion": {"type": "integer", "minimum": 1},
                },
                "required": ["decision", "policyVersion"],
                "additionalProperties": False,
            },
        },
        "required": ["at", "tool", "decision"],
        "additionalProperties": False,
        "if": {"properties": {"decision": {"const": Decision.ALLOWED.value}}},
        "then": {"required": ["step"], "properties": {"step": {"type": "integer"}}},
        # Only what the guard allowed counts against a budget.
        "else": {"not": {"required": ["amounts"]}},
    }
    display_update = {
        "type": "object",
        "description": "One ACP message the guard showed to the user.",
        "properties": {
            "at": time,
            "message": {"type": "object", "description": "ACP session/update params"},
        },
        "required": ["message"],
        "additionalProperties": False,
    }
    end = {
        "type": "object",
        "description": "the agent ended the plan",
        "properties": {
            "outcome": {
                "type": "string",
                "enum": [outcome.value for outcome in PlanOutcome],
                "description": "completed: every required step ran; ended: before that;"
                " token_refused: the guard refused the token it was given",
            },
            "reason": {"type": "string", "maxLength": MAX_END_REASON_LENGTH},
        },
        "required": ["outcome"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Plangate event batch",
        "description": (
            "Guard decisions and the ACP plan updates shown to the user, posted by the"
            " guard's reporter. A batch carries at least one event, display update, lost"
            " decision or end."
        ),
        "type": "object",
        "properties": {
            "stream": {
                "type": "string",
                "pattern": STREAM_ID_PATTERN,
                "description": "the reporter's random stream id; with `seq`, a batch is"
                " stored once",
            },
            "seq": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_BATCH_SEQUENCE,
                "description": "the batch's number in its stream for this plan: 1, 2, 3...",
            },
            "lost": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_LOST_PER_BATCH,
                "description": "decisions of this plan the guard could not deliver since"
                " its last batch",
            },
            "events": {"type": "array", "maxItems": MAX_EVENTS_PER_BATCH, "items": event},
            "displayUpdates": {
                "type": "array",
                "maxItems": MAX_DISPLAY_UPDATES_PER_BATCH,
                "items": display_update,
            },
            "end": end,
        },
        "additionalProperties": False,
        "dependentRequired": {"stream": ["seq"], "seq": ["stream"]},
        "anyOf": [
            {"required": ["events"], "properties": {"events": {"minItems": 1}}},
            {"required": ["displayUpdates"], "properties": {"displayUpdates": {"minItems": 1}}},
            {"required": ["lost"], "properties": {"lost": {"minimum": 1}}},
            {"required": ["end"]},
        ],
    }


# The keys the validator knows, read from the one declaration of the shape.
_SCHEMA = event_batch_json_schema()
_EVENT_SCHEMA = _SCHEMA["properties"]["events"]["items"]
EVENT_BATCH_KEYS = frozenset(_SCHEMA["properties"])
EVENT_KEYS = frozenset(_EVENT_SCHEMA["properties"])
RULE_KEYS = frozenset(_EVENT_SCHEMA["properties"]["rule"]["properties"])
SHADOW_KEYS = frozenset(_EVENT_SCHEMA["properties"]["shadow"]["properties"])
END_KEYS = frozenset(_SCHEMA["properties"]["end"]["properties"])
DISPLAY_UPDATE_KEYS = frozenset(_SCHEMA["properties"]["displayUpdates"]["items"]["properties"])
_REQUIRED_EVENT_KEYS: tuple[str, ...] = tuple(_EVENT_SCHEMA["required"])
_REQUIRED_EVENT_KEY_SET = frozenset(_REQUIRED_EVENT_KEYS)


@dataclass(frozen=True, slots=True)
class RuleRef:
    """The policy rule that decided a call: `index` into the policy's ``rules`` (None: the
    policy default) and a short description for people."""

    index: int | None
    description: str


@dataclass(frozen=True, slots=True)
class ShadowAnswer:
    """What the policy version published in shadow would have decided a call, where that
    differs from the decision enforced."""

    decision: Decision
    policy_version: int
    rule: RuleRef | None = None  # None: the policy was not consulted

    def to_json(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "decision": self.decision.value,
            "policyVersion": self.policy_version,
        }
        if self.rule is not None:
            answer["rule"] = {"index": self.rule.index, "description": self.rule.description}
        return answer


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """One decision of the guard, as validated."""

    occurred_at: datetime
    tool: str
    decision: Decision
    step: int | None  # an index into the plan's steps, from 0
    reason: str
    args_digest: str  # "" when the arguments were not JSON
    args: dict[str, Any] | None
    rule: RuleRef | None = None  # None: the policy was not consulted
    policy_version: int | None = None  # the version the token in force carried
    # budget id -> what this allowed call counted against it; None: no budget covers it
    amounts: dict[str, int | float] | None = None
    #: what the shadow policy version would have decided, where it differs; None: the same,
    #: or no shadow
    shadow: ShadowAnswer | None = None


@dataclass(frozen=True, slots=True)
class DisplayUpdate:
    """One ACP message the guard showed to the user."""

    occurred_at: datetime | None
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PlanEnd:
    outcome: PlanOutcome
    reason: str


@dataclass(frozen=True, slots=True)
class EventBatch:
    events: tuple[GuardEvent, ...]
    display_updates: tuple[DisplayUpdate, ...]
    stream: str | None = None  # None with seq None: a batch of a guard before 0.2
    seq: int | None = None
    lost: int = 0
    end: PlanEnd | None = None


# --- building (the reporter) ------------------------------------------------------------


def timestamp(at: float) -> str:
    """A Unix time as RFC 3339 in UTC with microseconds: ``2026-11-30T09:00:00.250000Z``."""
    return isoformat_z(at, timespec="microseconds")


def guard_event_json(
    *,
    at: float,
    tool: object,
    decision: str,
    step: int | None,
    reason: str = "",
    args_digest: str | None = None,
    args: Mapping[str, Any] | None = None,
    rule_index: int | None = None,
    rule_description: str | None = None,
    policy_version: int | None = None,
    amounts: Mapping[str, int | float] | None = None,
    shadow: ShadowAnswer | None = None,
) -> dict[str, Any]:
    """One event of a batch. A tool that is not a name (the agent can pass anything) is
    shown by its repr, and texts are cut to the limits, so the event is always accepted.
    `rule_description` None leaves the rule out (the policy was not consulted); `amounts`
    (an allowed call's, budget id -> amount) None or empty leaves them out; `shadow`, the
    shadow policy's different answer, None leaves it out."""
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
    if rule_description is not None:
        event["rule"] = {
            "index": rule_index,
            "description": (rule_description or "(no description)")[
                :MAX_EVENT_RULE_DESCRIPTION_LENGTH
            ],
        }
    if policy_version is not None:
        event["policyVersion"] = policy_version
    if args_digest is not None:
        event["argsDigest"] = args_digest
        if args is not None:
            event["args"] = args
    if amounts:
        event["amounts"] = dict(amounts)
    if shadow is not None:
        shadow_json = shadow.to_json()
        if "rule" in shadow_json:
            shadow_json["rule"]["description"] = (
                shadow_json["rule"]["description"] or "(no description)"
            )[:MAX_EVENT_RULE_DESCRIPTION_LENGTH]
        event["shadow"] = shadow_json
    return event


def display_update_json(*, at: float, message: Mapping[str, Any]) -> dict[str, Any]:
    return {"at": timestamp(at), "message": message}


def plan_end_json(*, outcome: PlanOutcome, reason: str = "") -> dict[str, Any]:
    end: dict[str, Any] = {"outcome": outcome.value}
    if reason:
        end["reason"] = reason[:MAX_END_REASON_LENGTH]
    return end


def event_batch_json(
    *,
    events: list[dict[str, Any]],
    display_updates: list[dict[str, Any]],
    stream: str | None = None,
    seq: int | None = None,
    lost: int = 0,
    end: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of one post; an empty list, no loss and no end are left out. The caller
    keeps each list within MAX_EVENTS_PER_BATCH and MAX_DISPLAY_UPDATES_PER_BATCH."""
    body: dict[str, Any] = {}
    if stream is not None and seq is not None:
        body["stream"] = stream
        body["seq"] = seq
    if lost:
        body["lost"] = min(lost, MAX_LOST_PER_BATCH)
    if events:
        body["events"] = events
    if display_updates:
        body["displayUpdates"] = display_updates
    if end is not None:
        body["end"] = end
    return body


# --- validating (the control plane) -----------------------------------------------------


def validate_event_batch(
    batch: object, *, steps: int | None = None, budgets: Collection[str] | None = None
) -> EventBatch:
    """The batch, typed, or DocumentInvalid listing every problem with its path.

    `steps` is the number of steps of the plan the batch belongs to; an event's step must
    index one of them. Without it, any non-negative step is accepted. `budgets` are the
    ids of the plan's budgets; an event's amounts may name only those. Without it, any
    budget id is accepted.
    """
    errors: list[FieldError] = []
    if not isinstance(batch, Mapping):
        raise DocumentInvalid([FieldError("", "expected an object")])
    errors.extend(
        FieldError(str(key), "unknown field")
        for key in sorted(batch.keys() - EVENT_BATCH_KEYS, key=str)
    )
    stream, seq = _stream_and_seq(batch, errors)
    lost = batch.get("lost", 0)
    if isinstance(lost, bool) or not isinstance(lost, int) or not 0 <= lost <= MAX_LOST_PER_BATCH:
        errors.append(FieldError("lost", f"expected an integer from 0 to {MAX_LOST_PER_BATCH}"))
        lost = 0
    end = _end(batch["end"], errors) if "end" in batch else None
    raw_events = _list(batch.get("events"), "events", MAX_EVENTS_PER_BATCH, errors)
    raw_updates = _list(
        batch.get("displayUpdates"), "displayUpdates", MAX_DISPLAY_UPDATES_PER_BATCH, errors
    )
    events = [
        _event(event, f"events[{index}]", steps, budgets, errors)
        for index, event in enumerate(raw_events)
    ]
    updates = [
        _display_update(update, f"displayUpdates[{index}]", errors)
        for index, update in enumerate(raw_updates)
    ]
    if not errors and not events and not updates and not lost and end is None:
        errors.append(FieldError("events", "the batch is empty"))
    if errors:
        raise DocumentInvalid(errors)
    return EventBatch(
        events=tuple(event for event in events if event is not None),
        display_updates=tuple(update for update in updates if update is not None),
        stream=stream,
        seq=seq,
        lost=lost,
        end=end,
    )


def _stream_and_seq(
    batch: Mapping[str, Any], errors: list[FieldError]
) -> tuple[str | None, int | None]:
    stream = batch.get("stream")
    seq = batch.get("seq")
    if stream is None and seq is None:
        return None, None
    before = len(errors)
    if not isinstance(stream, str) or not _STREAM_ID.match(stream):
        errors.append(
            FieldError(
                "stream",
                f"expected {MIN_STREAM_ID_LENGTH} to {MAX_STREAM_ID_LENGTH} letters, digits,"
                " - or _ (given with seq)",
            )
        )
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_BATCH_SEQUENCE:
        errors.append(FieldError("seq", "expected a positive integer (given with stream)"))
    if len(errors) > before:
        return None, None
    assert isinstance(stream, str) and isinstance(seq, int)
    return stream, seq


def _end(end: object, errors: list[FieldError]) -> PlanEnd | None:
    if not isinstance(end, Mapping):
        errors.append(FieldError("end", "expected an object"))
        return None
    before = len(errors)
    errors.extend(
        FieldError(f"end.{key}", "unknown field") for key in sorted(end.keys() - END_KEYS, key=str)
    )
    outcome = end.get("outcome")
    if outcome not in PLAN_OUTCOMES:
        errors.append(
            FieldError("end.outcome", f"expected one of {', '.join(sorted(PLAN_OUTCOMES))}")
        )
    reason = end.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_END_REASON_LENGTH:
        errors.append(
            FieldError(
                "end.reason", f"expected a string of at most {MAX_END_REASON_LENGTH} characters"
            )
        )
    if len(errors) > before or not isinstance(outcome, str) or not isinstance(reason, str):
        return None
    return PlanEnd(outcome=PlanOutcome(outcome), reason=reason)


def _rule(rule: object, path: str, errors: list[FieldError]) -> RuleRef | None:
    if rule is None:
        return None
    if not isinstance(rule, Mapping):
        errors.append(FieldError(path, "expected an object or null"))
        return None
    before = len(errors)
    unknown = rule.keys() - RULE_KEYS
    if unknown:
        errors.extend(
            FieldError(f"{path}.{key}", "unknown field") for key in sorted(unknown, key=str)
        )
    index = rule.get("index")
    if index is not None and (
        isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_RULES
    ):
        errors.append(
            FieldError(f"{path}.index", f"expected a rule index from 0 to {MAX_RULES - 1}, or null")
        )
    description = rule.get("description")
    if not (
        isinstance(description, str) and 1 <= len(description) <= MAX_EVENT_RULE_DESCRIPTION_LENGTH
    ):
        errors.append(
            FieldError(
                f"{path}.description",
                f"expected a string of 1 to {MAX_EVENT_RULE_DESCRIPTION_LENGTH} characters",
            )
        )
    if len(errors) > before or not isinstance(description, str):
        return None
    return RuleRef(index=index, description=description)


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
    event: object,
    path: str,
    steps: int | None,
    budgets: Collection[str] | None,
    errors: list[FieldError],
) -> GuardEvent | None:
    if not isinstance(event, dict):
        errors.append(FieldError(path, "expected an object"))
        return None
    before = len(errors)
    # Tested before the errors are built: most events have neither.
    unknown = event.keys() - EVENT_KEYS
    if unknown:
        errors.extend(FieldError(f"{path}.{key}", "unknown field") for key in unknown)
    if not event.keys() >= _REQUIRED_EVENT_KEY_SET:
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
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        errors.append(FieldError(f"{path}.argsDigest", "expected a lowercase hex SHA-256"))
    if "args" in event and not isinstance(event["args"], dict):
        errors.append(FieldError(f"{path}.args", "expected an object"))
    rule = _rule(event.get("rule"), f"{path}.rule", errors)
    policy_version = event.get("policyVersion")
    if policy_version is not None and (
        isinstance(policy_version, bool)
        or not isinstance(policy_version, int)
        or policy_version < 1
    ):
        errors.append(FieldError(f"{path}.policyVersion", "expected a policy version number"))
    amounts = (
        _amounts(event["amounts"], f"{path}.amounts", budgets, errors)
        if "amounts" in event
        else None
    )
    if amounts is not None and decision != Decision.ALLOWED:
        errors.append(FieldError(f"{path}.amounts", "only an allowed call counts amounts"))
    shadow = _shadow(event["shadow"], f"{path}.shadow", errors) if "shadow" in event else None
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
        rule=rule,
        policy_version=policy_version,
        amounts=amounts,
        shadow=shadow,
    )


def _shadow(shadow: object, path: str, errors: list[FieldError]) -> ShadowAnswer | None:
    """The shadow policy's answer to a call (``ShadowAnswer``)."""
    if not isinstance(shadow, Mapping):
        errors.append(FieldError(path, "expected an object"))
        return None
    before = len(errors)
    unknown = shadow.keys() - SHADOW_KEYS
    if unknown:
        errors.extend(
            FieldError(f"{path}.{key}", "unknown field") for key in sorted(unknown, key=str)
        )
    decision = shadow.get("decision")
    if decision not in DECISION_CODES:
        errors.append(
            FieldError(f"{path}.decision", f"expected one of {', '.join(sorted(DECISION_CODES))}")
        )
    version = shadow.get("policyVersion")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        errors.append(FieldError(f"{path}.policyVersion", "expected a policy version number"))
    rule = _rule(shadow.get("rule"), f"{path}.rule", errors)
    if len(errors) > before or not isinstance(decision, str) or not isinstance(version, int):
        return None
    return ShadowAnswer(decision=Decision(decision), policy_version=version, rule=rule)


def _amounts(
    amounts: object, path: str, budgets: Collection[str] | None, errors: list[FieldError]
) -> dict[str, int | float] | None:
    """An allowed call's amounts: at most MAX_EVENT_AMOUNTS budget ids (of `budgets`, when
    given), each to a finite number that is not negative (a boolean is not a number)."""
    if not isinstance(amounts, dict):
        errors.append(FieldError(path, "expected an object"))
        return None
    if len(amounts) > MAX_EVENT_AMOUNTS:
        errors.append(FieldError(path, f"at most {MAX_EVENT_AMOUNTS} budgets"))
        return None
    before = len(errors)
    for budget, amount in amounts.items():
        if not isinstance(budget, str) or not _BUDGET_ID.fullmatch(budget):
            errors.append(
                FieldError(f"{path}.{budget}", "a budget id is 1 to 32 of a-z, 0-9, _ and -")
            )
        elif budgets is not None and budget not in budgets:
            errors.append(FieldError(f"{path}.{budget}", "the plan has no budget of this id"))
        elif (
            isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not math.isfinite(amount)
            or amount < 0
        ):
            errors.append(FieldError(f"{path}.{budget}", "expected a finite number, not negative"))
    return dict(amounts) if len(errors) == before else None


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
