"""Delivering the decision log: retried in order while the control plane is unreachable or
busy, a full queue counted and reported as lost, a refusal for good dropped and reported,
a batch too large split, the plan's end last, and a close that never hangs.

The control plane here is a scripted `post` (what the guard passes its reporter is its HTTP
client's `post_events`), failing with the HTTP client's own exceptions; the real endpoint
is exercised by test_reporter, tests/plans/test_plan_events_api and the outage test in
tests/integration/test_decision_delivery.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from guard.agent.http import ControlPlaneError, ControlPlaneUnavailable
from guard.agent.reporter import (
    MAX_RETRY_AFTER,
    QUEUE_SIZE_ENV,
    DecisionReporter,
    queue_size_from_env,
)
from guard.agent.session import CallDecision
from guard.decisions import Decision, PlanOutcome
from guard.events import validate_event_batch

from .client_helpers import wait_until

ALLOWED = CallDecision(Decision.ALLOWED, "step 1 (t) of the plan", 0, 0, "allow t (rules[0])")
FAST = {"interval": 0.01, "retry_initial_delay": 0.001, "retry_max_delay": 0.01}


class ScriptedControlPlane:
    """Answers each post with `answer(attempt number, plan id, batch)`: an exception to
    raise or None to acknowledge; every attempt is kept, acknowledged ones apart."""

    def __init__(self, answer: Callable[[int, str, Mapping[str, Any]], Exception | None]):
        self.answer = answer
        self.attempts: list[tuple[str, dict[str, Any]]] = []
        self.delivered: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def post(self, plan_id: str, batch: Mapping[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.attempts.append((plan_id, dict(batch)))
            error = self.answer(len(self.attempts), plan_id, batch)
            if error is not None:
                raise error
            self.delivered.append((plan_id, dict(batch)))
        return {"events": len(batch.get("events", [])), "duplicate": False}

    def events(self, plan_id: str = "p") -> list[dict[str, Any]]:
        return [e for to, b in self.delivered if to == plan_id for e in b.get("events", [])]

    def lost(self, plan_id: str = "p") -> int:
        return sum(b.get("lost", 0) for to, b in self.delivered if to == plan_id)


def record(reporter: DecisionReporter, count: int, plan_id: str = "p", start: int = 0) -> None:
    for n in range(start, start + count):
        reporter.record(plan_id, 1_800_000_000.0, "t", ALLOWED, {"n": n}, True, 1)


def numbers(events: list[dict[str, Any]]) -> list[int]:
    return [event["args"]["n"] for event in events]


def test_an_unreachable_control_plane_is_retried_in_order_until_it_answers():
    control_plane = ScriptedControlPlane(
        lambda attempt, plan, batch: ControlPlaneUnavailable("refused") if attempt <= 7 else None
    )
    reporter = DecisionReporter(control_plane.post, batch_size=10, **FAST)

    record(reporter, 25)
    assert reporter.flush(60)
    reporter.close()

    assert numbers(control_plane.events()) == list(range(25))  # each once, in order
    # The failed attempts were the first batch, sent again unchanged (same stream and seq).
    assert all(batch == control_plane.attempts[0][1] for _, batch in control_plane.attempts[:8])
    seqs = [batch["seq"] for _, batch in control_plane.delivered]
    assert seqs == list(range(1, len(seqs) + 1))
    stats = reporter.stats()
    assert (stats.sent, stats.dropped, stats.queued, stats.retries) == (25, 0, 0, 7)


@pytest.mark.parametrize(
    "failure",
    [
        ControlPlaneError(503, "database_unavailable", "down", retry_after=0.0),
        ControlPlaneError(429, "throttled", "slow down", retry_after=0.0),
        ControlPlaneError(502, "http_502", "Bad Gateway"),
    ],
    ids=["503", "429", "502"],
)
def test_a_busy_or_failing_control_plane_is_retried(failure):
    control_plane = ScriptedControlPlane(
        lambda attempt, plan, batch: failure if attempt <= 2 else None
    )
    reporter = DecisionReporter(control_plane.post, batch_size=5, **FAST)

    record(reporter, 5)
    assert reporter.flush(60)
    reporter.close()

    assert numbers(control_plane.events()) == list(range(5))
    assert reporter.stats().retries == 2


def test_the_back_off_grows_is_capped_jittered_and_honours_retry_after():
    reporter = DecisionReporter(
        lambda plan, batch: None, retry_initial_delay=0.5, retry_max_delay=8.0
    )

    first = [reporter._backoff(1, None) for _ in range(200)]
    late = [reporter._backoff(40, None) for _ in range(200)]

    assert all(0.5 <= delay <= 1.0 for delay in first)  # jitter: half to all of 2 x 0.5
    assert all(4.0 <= delay <= 8.0 for delay in late)  # capped at the maximum
    assert len(set(late)) > 1
    assert reporter._backoff(1, 5.0) >= 5.0
    assert reporter._backoff(1, 10**9) == MAX_RETRY_AFTER


def test_a_full_queue_drops_counts_and_reports_the_loss_with_the_next_batch():
    release = threading.Event()
    first_post = threading.Event()

    def answer(attempt: int, plan: str, batch: Mapping[str, Any]) -> None:
        first_post.set()
        release.wait(60)  # the control plane hangs while the agent goes on

    control_plane = ScriptedControlPlane(answer)
    reporter = DecisionReporter(control_plane.post, max_queue=20, batch_size=5, **FAST)

    record(reporter, 1)
    assert first_post.wait(30)
    record(reporter, 99, start=1)
    during = reporter.stats()
    release.set()
    reporter.end("p", PlanOutcome.ENDED)
    assert reporter.flush(60)
    reporter.close()

    delivered, lost = len(control_plane.events()), control_plane.lost()
    assert during.dropped == 100 - 1 - 20
    assert (delivered, lost) == (21, 79)
    assert delivered + lost == 100
    assert reporter.stats().lost_reported == 79
    assert control_plane.delivered[-1][1]["end"] == {"outcome": "ended"}


def test_a_refused_last_batch_is_reported_as_lost_on_its_own():
    def answer(attempt: int, plan: str, batch: Mapping[str, Any]) -> Exception | None:
        if batch["seq"] == 1:
            return ControlPlaneError(400, "invalid_events", "The batch is not valid.")
        return None

    control_plane = ScriptedControlPlane(answer)
    reporter = DecisionReporter(control_plane.post, batch_size=3, interval=60)

    record(reporter, 3)
    assert reporter.flush(30)
    reporter.close()

    (batch,) = [batch for _, batch in control_plane.delivered]
    assert batch == {"stream": reporter.stream, "seq": 2, "lost": 3}
    assert validate_event_batch(batch).lost == 3  # a loss alone is a valid batch


def test_a_refusal_for_good_drops_the_batch_and_reports_its_decisions_as_lost():
    def answer(attempt: int, plan: str, batch: Mapping[str, Any]) -> Exception | None:
        if batch["seq"] == 1:
            return ControlPlaneError(400, "invalid_events", "The batch is not valid.")
        return None

    control_plane = ScriptedControlPlane(answer)
    reporter = DecisionReporter(control_plane.post, batch_size=3, interval=60)

    record(reporter, 3)
    assert reporter.flush(30)
    record(reporter, 2, start=3)
    assert reporter.flush(30)
    reporter.close()

    assert len(control_plane.attempts) == 3  # the refused batch was not sent again
    assert numbers(control_plane.events()) == [3, 4]
    assert control_plane.delivered[0][1]["seq"] == 2  # the gap: batch 1 was given up
    assert control_plane.lost() == 3
    stats = reporter.stats()
    assert (stats.failed_batches, stats.dropped, stats.lost_reported) == (1, 3, 3)


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refusal_that_no_batch_of_the_plan_can_pass_is_not_reported_again(status):
    refusal = ControlPlaneError(status, "plan_not_found", "no")
    control_plane = ScriptedControlPlane(lambda attempt, plan, batch: refusal)
    reporter = DecisionReporter(control_plane.post, batch_size=3, interval=60)

    record(reporter, 3)
    assert reporter.flush(30)
    reporter.close()

    assert len(control_plane.attempts) == 1  # no endless "lost" reports to a closed door
    assert (reporter.stats().dropped, reporter.stats().failed_batches) == (3, 1)


def test_a_batch_too_large_is_split_and_numbered_in_order():
    def answer(attempt: int, plan: str, batch: Mapping[str, Any]) -> Exception | None:
        if len(batch.get("events", [])) > 4:
            return ControlPlaneError(413, "payload_too_large", "too large")
        return None

    control_plane = ScriptedControlPlane(answer)
    reporter = DecisionReporter(control_plane.post, batch_size=20, interval=60)

    record(reporter, 20)
    reporter.end("p", PlanOutcome.COMPLETED)
    assert reporter.flush(30)
    reporter.close()

    assert numbers(control_plane.events()) == list(range(20))
    seqs = [batch["seq"] for _, batch in control_plane.delivered]
    assert len(set(seqs)) == len(seqs)
    assert control_plane.delivered[-1][1]["end"] == {"outcome": "completed"}
    assert reporter.stats().dropped == 0


def test_close_gives_up_within_its_timeout_while_the_control_plane_is_down():
    control_plane = ScriptedControlPlane(
        lambda attempt, plan, batch: ControlPlaneUnavailable("refused")
    )
    reporter = DecisionReporter(
        control_plane.post, batch_size=2, interval=0.01, retry_initial_delay=5, retry_max_delay=60
    )

    record(reporter, 5)
    reporter.close(timeout=0.5)  # returns although a back-off of seconds was under way

    thread = reporter._thread
    assert thread is not None
    assert wait_until(lambda: not thread.is_alive())
    stats = reporter.stats()
    assert (stats.sent, stats.dropped, stats.queued) == (0, 5, 0)


def test_a_duplicate_answer_is_counted_as_delivered():
    reporter = DecisionReporter(
        lambda plan, batch: {"events": len(batch["events"]), "duplicate": True}, interval=60
    )

    record(reporter, 2)
    assert reporter.flush(30)
    reporter.close()

    assert (reporter.stats().sent, reporter.stats().duplicates) == (2, 1)


def test_the_queue_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(QUEUE_SIZE_ENV, "3")
    release = threading.Event()
    control_plane = ScriptedControlPlane(lambda attempt, plan, batch: release.wait(60) and None)
    reporter = DecisionReporter(control_plane.post, batch_size=1, **FAST)

    record(reporter, 1)
    assert wait_until(lambda: bool(control_plane.attempts))  # the first batch is in flight
    record(reporter, 10, start=1)
    dropped = reporter.stats().dropped
    release.set()
    reporter.close()

    assert queue_size_from_env() == 3
    assert dropped == 10 - 3


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_bad_queue_size_in_the_environment_is_refused(monkeypatch, value):
    monkeypatch.setenv(QUEUE_SIZE_ENV, value)

    with pytest.raises(ValueError, match=QUEUE_SIZE_ENV):
        DecisionReporter(lambda plan, batch: None)


def test_a_refused_key_hands_the_log_to_the_plans_token_with_one_warning(caplog):
    caplog.set_level(logging.WARNING, logger="guard.agent.reporter")
    tokens = {"p": "token-of-p"}  # the guard holds no token of plan "q"
    sent_with: list[tuple[str, str | None]] = []

    def post(plan_id: str, batch: Mapping[str, Any], token: str | None = None) -> dict[str, Any]:
        sent_with.append((plan_id, token))
        if token is None:
            raise ControlPlaneError(401, "invalid_api_key", "The API key is revoked.")
        return {"events": len(batch.get("events", [])), "lost": batch.get("lost", 0)}

    reporter = DecisionReporter(post, batch_size=3, interval=60, token_for=tokens.get)
    for plan_id in ("p", "p", "q", "q", "p"):
        record(reporter, 3, plan_id=plan_id)
        assert reporter.flush(30)
    reporter.close()

    # The key once; then each batch with its plan's token; a plan without one is not sent.
    with_token = ("p", "token-of-p")
    assert sent_with == [("p", None), with_token, with_token, with_token]
    stats = reporter.stats()
    assert (stats.made, stats.recorded, stats.lost_unreported) == (15, 9, 6)
    assert stats.made == stats.recorded + stats.lost
    assert stats.key_refused
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 3, lines
    assert "refused the agent's API key" in lines[0]
    assert "decision log of plan q cannot be delivered" in lines[1]
    assert "15 decision(s) made, 9 recorded by the control plane, 6 lost" in lines[2]


def test_a_plans_refused_token_is_not_sent_again():
    def post(plan_id: str, batch: Mapping[str, Any], token: str | None = None) -> dict[str, Any]:
        attempts.append(token)
        if token is None:
            raise ControlPlaneError(403, "agent_disabled", "The agent is disabled.")
        raise ControlPlaneError(401, "invalid_token", "The token is not valid: unknown key id.")

    attempts: list[str | None] = []
    reporter = DecisionReporter(post, batch_size=3, interval=60, token_for=lambda plan: "t")
    record(reporter, 3)
    assert reporter.flush(30)
    record(reporter, 3, start=3)
    assert reporter.flush(30)
    reporter.close()

    assert attempts == [None, "t"]  # no failed attempt spent on a door that stays shut
    stats = reporter.stats()
    assert (stats.made, stats.recorded, stats.lost_unreported) == (6, 0, 6)
