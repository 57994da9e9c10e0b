"""The status list end to end: a real guard against the real control plane over HTTP
(pytest-django's live server), its background watch running. A revoked plan's next call is
blocked within the team's (short) bound through the list alone: the per-plan feed is asked
once, after the bit flipped, for the code, and never polled."""

from __future__ import annotations

import time

import pytest

from guard.decisions import Decision
from plans.models import Plan
from plans.services import plan_revoke
from tests.conftest import plan_document

from .client_helpers import ThreadRecorder, wait_until

REPO = {"repo": "acme/public-app"}
BOUND = 4  # seconds: the list's ttl is 2 s, read every 0.8-1 s


def feed_requests(recorder: ThreadRecorder) -> int:
    return sum(path.endswith("/status") for _, path in list(recorder.requests))


def list_requests(recorder: ThreadRecorder) -> int:
    return sum("/v1/status-lists/" in path for _, path in list(recorder.requests))


@pytest.fixture
def short_bound(team) -> int:
    team.revocation_bound_seconds = BOUND
    team.save(update_fields=["revocation_bound_seconds"])
    return BOUND


def test_a_revoked_plan_is_blocked_through_the_list_within_the_bound(live_guard, short_bound):
    recorder = ThreadRecorder()
    guard = live_guard(transport=recorder, report=False)
    declared = guard.declare(plan_document())
    token = guard._plan.token
    if token.claims.status is None:
        pytest.skip("the control plane signs no status claim yet")
    assert wait_until(lambda: list_requests(recorder) >= 2, timeout=30)
    assert guard.check("github_list_issues", REPO).allowed
    assert feed_requests(recorder) == 0

    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin", reason="stop now")
    revoked_at = time.monotonic()
    # The watch stops the plan; no call is spent to see it (a call counts against maxCalls).
    assert wait_until(lambda: guard.status().blocked is not None, timeout=60)
    delay = time.monotonic() - revoked_at

    decision = guard.check("github_list_issues", REPO)
    assert decision.code == Decision.PLAN_REVOKED
    print(f"\nblocked {delay:.2f} s after the revocation (bound {short_bound} s)")
    assert delay < short_bound
    assert feed_requests(recorder) == 1  # the one ask for the code
