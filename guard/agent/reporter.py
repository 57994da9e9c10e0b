"""The decision log: a background thread that posts the guard's decisions in batches.

`record` is called on the tool call's thread and only appends a tuple to a bounded queue:
no hashing, no serialisation, no network, no lock on the common path. The reporter thread
formats each event (the RFC 8785 digest of the arguments included), groups them by plan and
posts ``POST /v1/plans/{id}/events``, built with guard.events, whose validator the control
plane applies. When the queue is full, or a batch cannot be delivered (control plane
unreachable, refused), the events are dropped and counted: the log must never slow down or
stop an agent.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from guard.canonical import canonical_json
from guard.decisions import MAX_DISPLAY_UPDATES_PER_BATCH, MAX_EVENTS_PER_BATCH
from guard.events import display_update_json, event_batch_json, guard_event_json

__all__ = ["DecisionReporter", "ReporterStats", "args_digest"]

logger = logging.getLogger(__name__)


_EVENT: Final = 0
_DISPLAY: Final = 1


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
    """Counters since the reporter started. `dropped` counts events and display updates
    that will never reach the control plane (queue full, unreachable, refused)."""

    sent: int
    dropped: int
    queued: int
    failed_batches: int


class DecisionReporter:
    """Batches decisions and ACP display updates to the events endpoint, off the call path.

    `post(plan_id, batch)` delivers one batch (raising on failure); the guard passes its
    control plane client's `post_events`.
    """

    def __init__(
        self,
        post: Callable[[str, Mapping[str, Any]], object],
        *,
        max_queue: int = 10_000,
        batch_size: int = 200,
        interval: float = 1.0,
    ) -> None:
        if not 1 <= batch_size <= MAX_EVENTS_PER_BATCH:
            raise ValueError(f"batch_size must be between 1 and {MAX_EVENTS_PER_BATCH}")
        self._post = post
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._interval = interval
        self._queue: deque[tuple[Any, ...]] = deque()
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._in_flight = False
        self._counts_lock = threading.Lock()
        self._sent = 0
        self._dropped = 0
        self._failed_batches = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    # --- the caller's side: cheap and never blocking ----------------------------------

    def record(
        self,
        plan_id: str,
        at: float,
        tool: object,
        code: str,
        step: int | None,
        reason: str,
        args: object,
        include_args: bool,
    ) -> None:
        """Queue one decision. Safe from any thread; O(1); never blocks on I/O."""
        self._enqueue((_EVENT, plan_id, at, tool, code, step, reason, args, include_args))

    def display(self, plan_id: str, at: float, message: Mapping[str, Any]) -> None:
        """Queue one ACP message shown to the user (``session/update`` params)."""
        self._enqueue((_DISPLAY, plan_id, at, message))

    def _enqueue(self, item: tuple[Any, ...]) -> None:
        queue = self._queue
        if len(queue) >= self._max_queue or self._stopping:
            with self._counts_lock:
                self._dropped += 1
            return
        queue.append(item)
        if self._thread is None:
            self._start()
        if len(queue) == self._batch_size:
            # Once per batch: a busy reporter drains the whole queue before it sleeps again,
            # and setting an Event on every call would cost the caller a lock.
            self._wake.set()

    # --- the reporter thread ----------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="plangate-guard-reporter", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            stopping = self._stopping
            while self._queue:
                self._send_some()
            with self._idle:
                self._idle.notify_all()
            if stopping:
                return

    def _take(self) -> list[tuple[Any, ...]]:
        items = []
        events = displays = 0
        queue = self._queue
        while queue:
            item = queue[0]
            if item[0] == _EVENT:
                if events >= self._batch_size:
                    break
                events += 1
            else:
                if displays >= MAX_DISPLAY_UPDATES_PER_BATCH:
                    break
                displays += 1
            items.append(queue.popleft())
        return items

    def _send_some(self) -> None:
        with self._idle:
            self._in_flight = True
            items = self._take()
        try:
            self._send(items)
        finally:
            with self._idle:
                self._in_flight = False
                self._idle.notify_all()

    def _send(self, items: list[tuple[Any, ...]]) -> None:
        # plan id -> (events, display updates), in the order they were recorded
        batches: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        for item in items:
            events, displays = batches.setdefault(item[1], ([], []))
            if item[0] == _EVENT:
                events.append(self._event(item))
            else:
                displays.append(display_update_json(at=item[2], message=item[3]))
        for plan_id, (events, displays) in batches.items():
            body = event_batch_json(events=events, display_updates=displays)
            count = len(events) + len(displays)
            try:
                self._post(plan_id, body)
            except Exception as error:
                logger.warning(
                    "plangate guard: dropped %d decision(s) for plan %s: %s", count, plan_id, error
                )
                with self._counts_lock:
                    self._dropped += count
                    self._failed_batches += 1
            else:
                with self._counts_lock:
                    self._sent += count

    @staticmethod
    def _event(item: tuple[Any, ...]) -> dict[str, Any]:
        _, _, at, tool, code, step, reason, args, include_args = item
        return guard_event_json(
            at=at,
            tool=tool,
            decision=code,
            step=step,
            reason=reason,
            args_digest=args_digest(args),
            args=args if include_args and isinstance(args, dict) else None,
        )

    # --- control ----------------------------------------------------------------------

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Send everything queued; True when the queue drained (sent or dropped) within
        `timeout` seconds. Blocks the caller: call it at the end of a session, not per call."""
        if self._thread is None:
            return not self._queue
        self._wake.set()
        with self._idle:
            return self._idle.wait_for(lambda: not self._queue and not self._in_flight, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Flush, then stop the thread. Later records are dropped (and counted)."""
        self.flush(timeout)
        self._stopping = True
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def stats(self) -> ReporterStats:
        with self._counts_lock:
            return ReporterStats(
                sent=self._sent,
                dropped=self._dropped,
                queued=len(self._queue),
                failed_batches=self._failed_batches,
            )
