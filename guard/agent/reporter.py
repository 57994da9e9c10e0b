"""The decision log: a background thread that posts the guard's decisions in batches.

`record` is called on the tool call's thread and only appends a tuple to a bounded queue:
no hashing, no serialisation, no network, no lock on the common path. The reporter thread
formats each event (the RFC 8785 digest of the arguments included), groups them by plan and
posts ``POST /v1/plans/{id}/events``, built with guard.events, whose validator the control
plane applies.

Delivery is exactly once while the queue holds:

* every batch carries the reporter's random `stream` id and its sequence number for the
  plan (1, 2, 3...); the control plane stores each (plan, stream, seq) once, so sending a
  batch again after a lost answer stores nothing twice;
* while the control plane is unreachable or answers 5xx or 429, the same batch is sent
  again with capped exponential back-off and jitter (``Retry-After`` honoured), and the
  batches after it wait, in order, in the bounded queue;
* when the queue is full, new decisions are dropped and counted per plan; the count goes
  with the plan's next batch that gets through (``lost``), so the control plane can say
  "N decisions were not delivered";
* a refusal that sending again cannot change (400, 404, 413...) drops that batch with a
  log line; its decisions count as lost too;
* when the control plane refuses the agent's API key (revoked or expired: 401
  ``invalid_api_key``; the agent disabled: 403 ``agent_disabled``), the batch is sent again
  with its plan's intent token (`token_for`), and so is every later batch: the control plane
  stores what the token vouches for and counts the rest as lost (docs/decisions/0054). One
  warning says so; what no credential can deliver is counted as lost, not reported;
* `close` logs one summary: the decisions made, recorded by the control plane, and lost
  (reported to it, or not), whenever anything was refused or lost.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from guard.agent.batching import (
    DEFAULT_QUEUE_SIZE,
    DISPLAY,
    END,
    EVENT,
    QUEUE_SIZE_ENV,
    PendingBatch,
    ReporterStats,
    args_digest,
    canonical_args,
    event_json,
    queue_size_from_env,
)
from guard.decisions import MAX_DISPLAY_UPDATES_PER_BATCH, MAX_EVENTS_PER_BATCH, PlanOutcome
from guard.events import display_update_json, event_batch_json, plan_end_json

if TYPE_CHECKING:
    from guard.agent.session import CallDecision
    from guard.agent.shadow import ShadowDecider

__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "QUEUE_SIZE_ENV",
    "DecisionReporter",
    "ReporterStats",
    "args_digest",
    "canonical_args",
    "queue_size_from_env",
]

logger = logging.getLogger(__name__)

DEFAULT_RETRY_INITIAL_DELAY: Final = 0.5
DEFAULT_RETRY_MAX_DELAY: Final = 10.0
# A Retry-After longer than this is not waited out in full: the queue keeps filling.
MAX_RETRY_AFTER: Final = 300.0


class DecisionReporter:
    """Batches decisions and ACP display updates to the events endpoint, off the call path.

    `post(plan_id, batch[, token=])` delivers one batch, returning the control plane's answer or
    raising (the guard passes its control plane client's `post_events`): an exception with
    a ``transient`` attribute that is false (a ``ControlPlaneError`` for a 4xx other than
    429) is a refusal for good; any other exception is retried.

    `max_queue` bounds the decisions and display updates waiting (default
    PLANGATE_GUARD_QUEUE_SIZE, else 10,000); `stream` is the stream id (default: a random
    uuid4, one per reporter). `token_for(plan_id)` answers the plan's newest intent token
    (None when the guard holds none); `post` then takes it as ``token=`` once the API key
    was refused.
    """

    def __init__(
        self,
        post: Callable[..., object],
        *,
        max_queue: int | None = None,
        batch_size: int = 200,
        interval: float = 1.0,
        retry_initial_delay: float = DEFAULT_RETRY_INITIAL_DELAY,
        retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY,
        stream: str | None = None,
        token_for: Callable[[str], str | None] | None = None,
    ) -> None:
        if not 1 <= batch_size <= MAX_EVENTS_PER_BATCH:
            raise ValueError(f"batch_size must be between 1 and {MAX_EVENTS_PER_BATCH}")
        max_queue = queue_size_from_env() if max_queue is None else max_queue
        if max_queue < 1:
            raise ValueError("max_queue must be at least 1")
        self._post = post
        self._token_for = token_for
        # The API key's refusal (401 invalid_api_key, 403 agent_disabled), once seen: every
        # later batch goes with its plan's intent token.
        self._key_refused: Exception | None = None
        self._token_refused = False
        # Plans whose log no credential delivers (refused for good): not sent again, so that
        # a guard does not spend its address's budget of failed attempts on them.
        self._undeliverable_plans: set[str] = set()
        self._max_queue = max_queue
        self._batch_size = batch_size
        self._interval = interval
        self._retry_initial_delay = retry_initial_delay
        self._retry_max_delay = max(retry_max_delay, retry_initial_delay)
        self.stream = stream or uuid.uuid4().hex
        self._queue: deque[tuple[Any, ...]] = deque()
        self._pending: deque[PendingBatch] = deque()  # built, not yet delivered, in order
        self._wake = threading.Event()  # a batch is ready, or flush/close asks
        self._retry_now = threading.Event()  # cuts a back-off short (flush, close)
        self._idle = threading.Condition()
        self._in_flight = False
        self._counts_lock = threading.Lock()
        self._sent = 0
        self._dropped = 0
        self._failed_batches = 0
        self._retries = 0
        self._duplicates = 0
        self._lost_reported = 0
        self._lost_unreported = 0  # decisions lost that the control plane was never told of
        self._built = 0  # decisions taken from the queue into batches
        self._dropped_at_record = 0  # decisions dropped for a full queue, or after close
        self._recorded = 0  # decisions the control plane stored
        self._summarised = False
        self._lost: dict[str, int] = {}  # plan id -> decisions lost, not yet reported
        self._sequences: dict[str, int] = {}  # plan id -> last seq used in this stream
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    # --- the caller's side: cheap and never blocking ----------------------------------

    def record(
        self,
        plan_id: str,
        at: float,
        tool: object,
        decision: CallDecision,
        args: object,
        include_args: bool,
        policy_version: int | None = None,
        shadow: ShadowDecider | None = None,
    ) -> None:
        """Queue one decision. Safe from any thread; O(1); never blocks on I/O. `shadow`:
        the token's shadow version, whose answer is read when the event is built."""
        queue = self._queue
        if len(queue) >= self._max_queue or self._stopping:
            self._lose(plan_id)
            return
        queue.append(
            (EVENT, plan_id, at, tool, decision, args, include_args, policy_version, shadow)
        )
        if self._thread is None:
            self._start()
        if len(queue) == self._batch_size:
            # Once per batch: a busy reporter drains the whole queue before it sleeps again,
            # and setting an Event on every call would cost the caller a lock.
            self._wake.set()

    def display(self, plan_id: str, at: float, message: Mapping[str, Any]) -> None:
        """Queue one ACP message shown to the user (``session/update`` params)."""
        if len(self._queue) >= self._max_queue or self._stopping:
            with self._counts_lock:
                self._dropped += 1
            return
        self._queue.append((DISPLAY, plan_id, at, message))
        if self._thread is None:
            self._start()

    def end(self, plan_id: str, outcome: PlanOutcome, reason: str = "") -> None:
        """Queue the end of a plan, delivered after its decisions. Never dropped for a full
        queue (one per plan): it also carries the count of decisions lost at the end."""
        if self._stopping:
            return
        self._queue.append((END, plan_id, plan_end_json(outcome=outcome, reason=reason)))
        if self._thread is None:
            self._start()
        self._wake.set()

    def _lose(self, plan_id: str, count: int = 1) -> None:
        with self._counts_lock:
            self._dropped += count
            self._dropped_at_record += count
            self._lost[plan_id] = self._lost.get(plan_id, 0) + count

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
            try:
                self._deliver_all()
            except Exception:  # pragma: no cover - keep the decision log alive
                logger.exception("plangate guard: the decision log failed unexpectedly")
            with self._idle:
                self._in_flight = False
                self._idle.notify_all()
            if stopping:
                self._abandon()
                return

    def _deliver_all(self) -> None:
        """Deliver every batch built, then build more, until the queue and the lost counts
        are empty. Returns early, with batches left, only once the reporter is stopping."""
        while True:
            if not self._pending:
                with self._idle:
                    self._in_flight = True
                    self._pending.extend(self._build(self._take()))
                    if not self._pending:
                        self._pending.extend(self._lost_only())
                    if not self._pending:
                        return
            while self._pending:
                outcome = self._deliver(self._pending[0])
                if outcome is None:
                    return  # stopping, and the control plane does not answer
                with self._idle:
                    self._pending.popleft()
                    self._pending.extendleft(reversed(outcome))

    def _take(self) -> list[tuple[Any, ...]]:
        items = []
        events = displays = 0
        queue = self._queue
        while queue:
            kind = queue[0][0]
            if kind == EVENT:
                if events >= self._batch_size:
                    break
                events += 1
            elif kind == DISPLAY:
                if displays >= MAX_DISPLAY_UPDATES_PER_BATCH:
                    break
                displays += 1
            items.append(queue.popleft())
        return items

    def _build(self, items: list[tuple[Any, ...]]) -> list[PendingBatch]:
        """One batch per plan, in the order the plans first appear; numbered, and carrying
        the decisions lost so far."""
        batches: dict[str, PendingBatch] = {}
        for item in items:
            plan_id = item[1]
            batch = batches.get(plan_id)
            if batch is None:
                batch = batches[plan_id] = PendingBatch(plan_id)
            kind = item[0]
            if kind == EVENT:
                batch.events.append(event_json(item))
                self._built += 1
            elif kind == DISPLAY:
                batch.displays.append(display_update_json(at=item[2], message=item[3]))
            else:
                batch.end = item[2]
        for batch in batches.values():
            self._number(batch)
        return list(batches.values())

    def _lost_only(self) -> list[PendingBatch]:
        """Batches telling the control plane about decisions lost after the last batch of
        their plan was built."""
        with self._counts_lock:
            plans = [plan_id for plan_id, lost in self._lost.items() if lost]
        batches = [PendingBatch(plan_id) for plan_id in plans]
        for batch in batches:
            self._number(batch)
        return batches

    def _number(self, batch: PendingBatch) -> None:
        with self._counts_lock:
            batch.lost = self._lost.pop(batch.plan_id, 0)
        batch.seq = self._sequences.get(batch.plan_id, 0) + 1
        self._sequences[batch.plan_id] = batch.seq

    def _split(self, batch: PendingBatch) -> list[PendingBatch]:
        """Two halves of a batch the control plane found too large, numbered in order: the
        first keeps the batch's number and lost count, the second takes the next number
        (nothing of the plan was built since, so the order holds) and the end."""
        events, displays = len(batch.events) // 2, len(batch.displays) // 2
        first = PendingBatch(batch.plan_id, batch.events[:events], batch.displays[:displays])
        second = PendingBatch(
            batch.plan_id, batch.events[events:], batch.displays[displays:], end=batch.end
        )
        first.seq, first.lost = batch.seq, batch.lost
        second.seq = self._sequences[batch.plan_id] + 1
        self._sequences[batch.plan_id] = second.seq
        return [first, second]

    def _deliver(self, batch: PendingBatch) -> list[PendingBatch] | None:
        """Send `batch` until the control plane acknowledges or refuses it for good, backing
        off between attempts. Returns the batches to send in its place (none, or its halves
        when it was too large), or None when the reporter stops meanwhile."""
        attempt = 0
        while True:
            body = event_batch_json(
                events=batch.events,
                display_updates=batch.displays,
                stream=self.stream,
                seq=batch.seq,
                lost=batch.lost,
                end=batch.end,
            )
            try:
                answer = self._send(batch.plan_id, body)
            except _NoCredential as error:
                self._undeliverable(batch, error)
                return []
            except Exception as error:
                if getattr(error, "transient", True) is False:
                    if getattr(error, "status", None) == 413 and batch.size > 1:
                        return self._split(batch)
                    if self._key_refused is None and _refuses_the_key(error):
                        self._key_refusal(error)
                        continue  # the same batch, at once, with the plan's token
                    self._refused(batch, error)
                    return []
                if self._stopping:
                    return None
                attempt += 1
                with self._counts_lock:
                    self._retries += 1
                delay = self._backoff(attempt, getattr(error, "retry_after", None))
                if attempt == 1:
                    logger.warning(
                        "plangate guard: the decision log could not be delivered (%s);"
                        " retrying with back-off",
                        error,
                    )
                self._retry_now.wait(delay)
                self._retry_now.clear()
                continue
            with self._counts_lock:
                self._sent += batch.size
                recorded, lost = _stored(answer, batch)
                self._recorded += recorded
                self._lost_reported += lost
                if isinstance(answer, Mapping) and answer.get("duplicate") is True:
                    self._duplicates += 1
            return []

    def _send(self, plan_id: str, body: Mapping[str, Any]) -> object:
        """Post with the API key, or with the plan's intent token once the key was refused."""
        if plan_id in self._undeliverable_plans:
            raise _NoCredential("the control plane refused this plan's decision log for good")
        if self._key_refused is None:
            return self._post(plan_id, body)
        token = self._token_for(plan_id) if self._token_for is not None else None
        if token is None:
            raise _NoCredential("the API key was refused and no intent token of the plan is held")
        return self._post(plan_id, body, token=token)

    def _key_refusal(self, error: Exception) -> None:
        """The one warning of a refused API key; from now on batches go with tokens."""
        self._key_refused = error
        logger.warning(
            "plangate guard: the control plane refused the agent's API key (%s); the decision"
            " log goes on with each plan's intent token, and what it cannot deliver is counted"
            " as lost (a summary follows at close)",
            error,
        )

    def _undeliverable(self, batch: PendingBatch, error: Exception) -> None:
        """No credential can deliver `batch`: its decisions (and the losses it carried) are
        lost, and the control plane cannot be told. Logged once; the summary counts them."""
        self._undeliverable_plans.add(batch.plan_id)
        if not self._token_refused:
            self._token_refused = True
            logger.warning(
                "plangate guard: the decision log of plan %s cannot be delivered (%s); its"
                " decisions are counted as lost",
                batch.plan_id,
                error,
            )
        with self._counts_lock:
            self._failed_batches += 1
            self._dropped += batch.size
            self._lost_unreported += len(batch.events) + batch.lost

    def _backoff(self, attempt: int, retry_after: object) -> float:
        """Exponential from the initial delay, capped, with jitter (half to all of it) so
        that guards do not come back in step; at least a Retry-After (itself capped)."""
        ceiling = min(self._retry_max_delay, self._retry_initial_delay * 2 ** min(attempt, 30))
        delay = random.uniform(ceiling / 2, ceiling)
        if isinstance(retry_after, int | float):
            delay = max(delay, min(float(retry_after), MAX_RETRY_AFTER))
        return delay

    def _refused(self, batch: PendingBatch, error: Exception) -> None:
        status = getattr(error, "status", None)
        if status in (401, 403, 404, 409):
            # Nothing for this plan gets through with this credential (no such plan for this
            # key, the plan's token refused too): lost, and the control plane cannot be told.
            self._undeliverable(batch, error)
            return
        logger.warning(
            "plangate guard: the control plane refused %d decision(s) for plan %s"
            " (batch %s/%d), dropped: %s",
            batch.size,
            batch.plan_id,
            self.stream,
            batch.seq,
            error,
        )
        with self._counts_lock:
            self._failed_batches += 1
            self._dropped += batch.size
            # Reported with the plan's next batch, unless it was itself only a report of
            # losses (refused again, it would be refused for ever).
            lost = len(batch.events) + batch.lost
            if batch.events or batch.end:
                self._lost[batch.plan_id] = self._lost.get(batch.plan_id, 0) + lost
            else:
                self._lost_unreported += lost

    def _abandon(self) -> None:
        """The reporter stops with batches undelivered: count them (the summary says so)."""
        with self._idle:
            left = sum(batch.size for batch in self._pending)
            lost = sum(len(batch.events) + batch.lost for batch in self._pending)
            queued = sum(1 for item in self._queue if item[0] == EVENT)
            left += sum(1 for item in self._queue if item[0] != END)
            self._pending.clear()
            self._queue.clear()
            self._idle.notify_all()
        with self._counts_lock:
            self._dropped += left
            self._dropped_at_record += queued  # made, never taken into a batch
            self._lost_unreported += lost + queued + sum(self._lost.values())
            self._lost.clear()

    # --- control ----------------------------------------------------------------------

    def _drained(self) -> bool:
        return not self._queue and not self._pending and not self._in_flight

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Send everything queued now (cutting a back-off short); True when it was all
        delivered or refused within `timeout` seconds. Blocks the caller: call it at the
        end of a session, not per call."""
        if self._thread is None:
            return not self._queue
        self._wake.set()
        self._retry_now.set()
        with self._idle:
            return self._idle.wait_for(self._drained, timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Flush for at most `timeout` seconds, then stop the thread, counting what could
        not be delivered as dropped. Later records are dropped (and counted)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.flush(timeout)
        self._stopping = True
        self._wake.set()
        self._retry_now.set()
        thread = self._thread
        if thread is not None:
            remaining = None if deadline is None else max(0.1, deadline - time.monotonic())
            thread.join(remaining)
        self._summarise()

    def _summarise(self) -> None:
        """One line at close: what was made, recorded and lost. A warning when the key was
        refused or anything was lost; else for the debug log only."""
        if self._summarised:
            return
        self._summarised = True
        stats = self.stats()
        trouble = self._key_refused is not None or stats.lost or stats.queued
        logger.log(
            logging.WARNING if trouble else logging.DEBUG,
            "plangate guard: decision log closed: %d decision(s) made, %d recorded by the"
            " control plane, %d lost (%d reported to it, %d it was never told of)%s",
            stats.made,
            stats.recorded,
            stats.lost,
            stats.lost_reported,
            stats.lost_unreported,
            "; the API key was refused, later batches went with the plans' intent tokens"
            if self._key_refused is not None
            else "",
        )

    def stats(self) -> ReporterStats:
        with self._counts_lock:
            return ReporterStats(
                sent=self._sent,
                dropped=self._dropped,
                queued=len(self._queue) + sum(batch.size for batch in self._pending),
                failed_batches=self._failed_batches,
                retries=self._retries,
                duplicates=self._duplicates,
                lost_reported=self._lost_reported,
                made=self._built + self._dropped_at_record,
                recorded=self._recorded,
                lost_unreported=self._lost_unreported,
                key_refused=self._key_refused is not None,
            )


class _NoCredential(Exception):
    """The API key was refused and the guard holds no intent token of the plan."""


def _refuses_the_key(error: Exception) -> bool:
    """A refusal of the agent's API key itself: revoked or expired, or its agent disabled."""
    status, code = getattr(error, "status", None), getattr(error, "code", None)
    return (status, code) in ((401, "invalid_api_key"), (403, "agent_disabled"))


def _stored(answer: object, batch: PendingBatch) -> tuple[int, int]:
    """The decisions the control plane stored and counted as lost for `batch`, as its answer
    says (a token vouches only for decisions up to its expiry: the rest are counted lost)."""
    if isinstance(answer, Mapping):
        events, lost = answer.get("events"), answer.get("lost")
        if type(events) is int and type(lost) is int:
            return events, lost
    return len(batch.events), batch.lost
