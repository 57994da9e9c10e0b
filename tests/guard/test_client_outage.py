"""A control plane outage seen from the guard, over real HTTP: a proxy in front of the live
control plane is stopped and started again while the token expires.

Calls never wait for the network (every request is sent from a background thread), and
once the control plane is back calls resume within about a second, however long the outage
lasted. Bounds are generous: they catch a back-off of many seconds, not a slow machine.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings as django_settings

from guard.agent import Guard
from guard.decisions import Decision
from tests.conftest import plan_document

from .client_helpers import ShiftedClock, StoppableProxy, ThreadRecorder, wait_until

REPO = {"repo": "acme/public-app"}


@pytest.fixture
def proxy(live_server):
    proxy = StoppableProxy(live_server.url)
    yield proxy
    proxy.stop()


@pytest.fixture
def outage_guard(proxy, agent, settings):
    clock = ShiftedClock()
    recorder = ThreadRecorder()
    guard = Guard(
        proxy.url,
        agent.api_key,
        issuer=django_settings.PLANGATE_ISSUER,
        clock=clock,
        transport=recorder,
        # The decision log's posts would race the refresh for SQLite's in-memory test
        # database ("table is locked"); what an outage does to the log is measured apart.
        report=False,
        timeout=5.0,
    )
    guard.declare(plan_document(steps=[{"tool": "github_list_issues", "maxCalls": 100_000}]))
    # Refreshed tokens must outlive the guard's clock moved past the first one's expiry.
    settings.PLANGATE_TOKEN_TTL = 3600
    yield guard, clock, recorder
    guard.close()


def test_calls_resume_soon_after_an_outage_that_outlived_the_token(proxy, outage_guard):
    guard, clock, recorder = outage_guard
    caller = threading.get_ident()
    declared = len(recorder.from_thread(caller))  # declaring is the caller's own request
    assert guard.check("github_list_issues", REPO).allowed

    proxy.stop()
    clock.advance(901)  # the 900 s token expires while the control plane is down
    outage_decisions = []
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        outage_decisions.append(guard.check("github_list_issues", REPO).code)
        time.sleep(0.02)
        # On the guard's clock the outage lasts about 40 s: long enough for a back-off that
        # keeps growing after expiry to leave the guard blocked long after the return.
        clock.advance(0.25)
    attempts_during_outage = sum("/refresh" in path for _, path in recorder.requests)

    proxy.start()
    back = time.monotonic()
    resumed = wait_until(lambda: guard.check("github_list_issues", REPO).allowed, timeout=20)
    waited = time.monotonic() - back

    assert set(outage_decisions) == {Decision.TOKEN_EXPIRED}
    # Retried within about a second while expired, not with a growing back-off.
    assert attempts_during_outage >= 2
    assert resumed
    assert waited < 5.0, f"calls resumed {waited:.1f} s after the control plane came back"
    assert guard.status().state == "active"
    # Not one request (refresh, keys) went out on the calling thread.
    assert recorder.from_thread(caller)[declared:] == []


def test_a_call_with_an_expired_token_answers_at_once_while_the_control_plane_hangs(
    proxy, outage_guard
):
    """The call does not even wait for a connection attempt: the refresher makes it."""
    guard, clock, recorder = outage_guard
    caller = threading.get_ident()
    declared = len(recorder.from_thread(caller))
    proxy.stop()
    clock.advance(901)

    decisions = [guard.check("github_list_issues", REPO) for _ in range(50)]

    assert {decision.code for decision in decisions} == {Decision.TOKEN_EXPIRED}
    assert wait_until(lambda: any("/refresh" in path for _, path in recorder.requests))
    assert recorder.from_thread(caller)[declared:] == []
