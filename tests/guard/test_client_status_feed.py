"""The guard's watch of the status feed, polled by hand (`poll_status`) against the real
control plane in-process: news stops the plan with the matching code while its token is
still valid, its ACP entries show cancelled, and an unreachable control plane changes
nothing."""

from __future__ import annotations

import functools
from typing import Any

import httpx
import pytest

from guard.decisions import Decision
from members.services import agent_update, api_key_revoke, member_disable
from plans.keys import signing_key_revoke
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from tests.conftest import plan_document

REPO = {"repo": "acme/public-app"}


def statuses(message: dict[str, Any]) -> list[str]:
    return [entry["status"] for entry in message["params"]["update"]["plan"]["entries"]]


@pytest.fixture
def make_any_guard(make_any_guard) -> Any:
    """The per-plan feed's own tests: guards that do not read the status list (its tests
    are in test_status_list_client)."""
    return functools.partial(make_any_guard, status_list=False)


@pytest.fixture
def feed_statuses(switchboard) -> list[int]:
    """The status codes the feed answered, seen on the wire."""
    seen: list[int] = []

    def record(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/status"):
            seen.append(response.status_code)
        return response

    switchboard.rewrite = record
    return seen


def test_an_unchanged_status_is_a_304_and_the_plan_goes_on(make_any_guard, feed_statuses):
    guard = make_any_guard()
    guard.declare(plan_document())

    first, second = guard.poll_status(), guard.poll_status()

    assert (first, second) == (False, False)
    assert feed_statuses == [200, 304]
    assert guard.check("github_list_issues", REPO).allowed


def test_a_revoked_plan_blocks_the_next_call_and_cancels_its_entries(make_any_guard):
    messages: list[dict[str, Any]] = []
    guard = make_any_guard(acp_sink=messages.append)
    declared = guard.declare(plan_document())
    assert guard.call("github_list_issues", REPO, lambda **args: []) == []
    guard.poll_status()

    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin", reason="stop now")
    stopped = guard.poll_status()
    decision = guard.check("github_list_issues", REPO)

    assert stopped is True
    assert decision.code == Decision.PLAN_REVOKED
    assert "revoked" in decision.reason
    assert statuses(messages[-1]) == ["completed", "cancelled"]
    status = guard.status()
    assert (status.state, status.blocked) == ("blocked", Decision.PLAN_REVOKED)
    # The token was valid all along: no refresh was needed to learn it.
    assert status.expires_at is not None


@pytest.mark.parametrize(
    ("stop", "code"),
    [
        (lambda agent: member_disable(team=agent.team, email="alice@acme.dev"), "user_disabled"),
        (lambda agent: agent_update(agent=agent.agent, is_active=False), "agent_disabled"),
        (lambda agent: api_key_revoke(api_key=agent.agent.api_keys.get()), "agent_disabled"),
    ],
    ids=["member disabled", "agent disabled", "API key revoked"],
)
def test_a_disabling_blocks_with_its_code(make_any_guard, agent, switchboard, stop, code):
    guard = make_any_guard()
    guard.declare(plan_document())
    assert guard.check("github_list_issues", REPO).allowed

    stop(agent)
    guard.poll_status()

    assert guard.check("github_list_issues", REPO).code == code
    assert guard.poll_status() is False  # a stopped plan is not polled again
    assert switchboard.count("/status") == 1


def test_a_revoked_signing_key_withdraws_the_token_then_its_refresh_is_refused(make_any_guard):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    kid = PlanToken.objects.get(plan_id=declared.plan_id).kid

    signing_key_revoke(kid=kid)
    guard.poll_status()
    withdrawn = guard.check("github_list_issues", REPO)
    refreshed = guard.refresh_if_due()
    final = guard.check("github_list_issues", REPO)

    assert withdrawn.code == Decision.TOKEN_INVALID
    assert kid in withdrawn.reason
    assert refreshed is False
    assert final.code == Decision.TOKEN_INVALID
    assert guard.status().state == "blocked"


def test_an_unreachable_control_plane_changes_nothing(make_any_guard, switchboard):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    switchboard.down = True

    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id))
    stopped = guard.poll_status()

    assert stopped is False
    assert guard.check("github_list_issues", REPO).allowed
    switchboard.down = False
    assert guard.poll_status() is True
    assert guard.check("github_list_issues", REPO).code == Decision.PLAN_REVOKED


def test_a_failing_feed_changes_nothing(make_any_guard, switchboard):
    guard = make_any_guard()
    guard.declare(plan_document())

    def failing(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/status"):
            return httpx.Response(503, json={"code": "database_unavailable", "detail": "x"})
        return response

    switchboard.rewrite = failing

    assert guard.poll_status() is False
    assert guard.check("github_list_issues", REPO).allowed


def test_the_feed_interval_is_what_the_team_bound_says(make_any_guard, team):
    team.revocation_bound_seconds = 6
    team.save(update_fields=["revocation_bound_seconds"])
    guard = make_any_guard()
    guard.declare(plan_document())

    guard.poll_status()

    assert guard._status_watcher.interval == 3.0


def test_without_a_plan_nothing_is_asked(make_any_guard, switchboard):
    guard = make_any_guard()

    assert guard.poll_status() is False
    assert switchboard.count("/status") == 0
