"""The decision log's pieces that need no thread: the queue's items and its size, a batch
waiting to be delivered, the reporter's counters, and an event's wire form (the digest of
its arguments included)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Final

from guard.canonical import canonical_json
from guard.events import guard_event_json

__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "DISPLAY",
    "END",
    "EVENT",
    "QUEUE_SIZE_ENV",
    "PendingBatch",
    "ReporterStats",
    "args_digest",
    "canonical_args",
    "event_json",
    "queue_size_from_env",
]

DEFAULT_QUEUE_SIZE: Final = 10_000
QUEUE_SIZE_ENV: Final = "PLANGATE_GUARD_QUEUE_SIZE"

# The first field of a queued item: (EVENT, plan id, at, tool, decision, args, include
# args, policy version, shadow), (DISPLAY, plan id, at, message) or (END, plan id, end).
EVENT: Final = 0
DISPLAY: Final = 1
END: Final = 2


def queue_size_from_env(default: int = DEFAULT_QUEUE_SIZE) -> int:
    """PLANGATE_GUARD_QUEUE_SIZE when set to a positive integer, else `default`."""
    value = os.environ.get(QUEUE_SIZE_ENV, "").strip()
    if not value:
        return default
    try:
        size = int(value)
    except ValueError:
        raise ValueError(f"{QUEUE_SIZE_ENV} must be a positive integer, not {value!r}") from None
    if size < 1:
        raise ValueError(f"{QUEUE_SIZE_ENV} must be a positive integer, not {value!r}")
    return size


def canonical_args(args: object) -> bytes | None:
    """RFC 8785 canonical JSON of call arguments, or None when they are not JSON."""
    try:
        return canonical_json(args)
    except Exception:  # rfc8785 raises several types for values that are not JSON
        return None


def args_digest(args: object) -> str | None:
    """Lowercase hex SHA-256 of the RFC 8785 canonical JSON of the arguments; None when
    they are not JSON (canonical JSON refuses them, so no digest can stand for them)."""
    canonical = canonical_args(args)
    return None if canonical is None else hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True)
class ReporterStats:
    """Counters since the reporter started.

    `sent`: events and display updates the control plane acknowledged; `dropped`: those
    that will never reach it (queue full, refused for good, left when the reporter
    closed); `lost_reported`: decisions the control plane counted as lost on their plan
    (reported by the guard, or past the expiry of the token that carried them); `retries`:
    batches sent again after a failure; `duplicates`: batches the control plane already
    had (their answer was lost).

    Decisions alone: `made` (recorded by the guard for the log), `recorded` (stored by the
    control plane), `lost_unreported` (lost, and the control plane could not be told: no
    credential could deliver them, or the reporter closed first). Once nothing is queued,
    ``made == recorded + lost``. `key_refused`: the control plane refused the API key, and
    batches went with the plans' intent tokens."""

    sent: int
    dropped: int
    queued: int
    failed_batches: int
    retries: int = 0
    duplicates: int = 0
    lost_reported: int = 0
    made: int = 0
    recorded: int = 0
    lost_unreported: int = 0
    key_refused: bool = False

    @property
    def lost(self) -> int:
        """Decisions lost: counted on their plan by the control plane, or only here."""
        return self.lost_reported + self.lost_unreported


@dataclass
class PendingBatch:
    """A batch built for one plan, numbered, waiting to be delivered."""

    plan_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    displays: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    seq: int = 0
    lost: int = 0

    @property
    def size(self) -> int:
        return len(self.events) + len(self.displays)


def event_json(item: tuple[Any, ...]) -> dict[str, Any]:
    """The wire form of a queued decision (the reporter's thread does this work)."""
    _, _, at, tool, decision, args, include_args, policy_version, shadow = item
    return guard_event_json(
        at=at,
        tool=tool,
        decision=decision.code.value,
        step=decision.step,
        # Allowed calls too: the trail says which step and which rule admitted the call.
        reason=decision.reason,
        args_digest=args_digest(args),
        args=args if include_args and isinstance(args, dict) else None,
        rule_index=decision.rule,
        rule_description=decision.rule_description,
        policy_version=policy_version,
        amounts=decision.amounts,
        # The shadow version's answer, where it differs (guard.agent.shadow): read here, in
        # the reporter's thread, so that a call pays nothing for it.
        shadow=None if shadow is None else shadow.answer(tool, args, decision),
    )
