"""An admin's "stop" reaches a running agent while its token is still valid, with a real
gunicorn on the real test database and a guard calling a tool in a loop: revoking the
plan, disabling its member or its agent, revoking its API key or its token's signing key
blocks the agent's calls with the matching code long before the token expires, the ACP
entries show cancelled, and the blocked calls reach the decision log (with the plan's
intent token where the API key is refused). While the control plane is unreachable the
guard keeps deciding with its valid token.

The team's bound is set short (2 s) so that the suite does not wait; nothing here asserts
a duration: `make bench` measures the time from revocation to the first blocked call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings

from guard.agent import Guard
from guard.decisions import Decision
from members.services import agent_update, api_key_revoke, member_disable
from plans.keys import signing_key_revoke, signing_keys_bootstrap
from plans.models import Plan, PlanEvent, PlanToken
from plans.services import plan_revoke
from teams.models import Team
from tests.conftest import AgentPersona, plan_document

from .processes import IS_POSTGRES, NEEDS_POSTGRES, tail, wait_for
from .test_decision_delivery import ControlPlane

BOUND_SECONDS = 2
TOKEN_TTL = 900  # the default lifetime: the stop must come long before it ends
CALL_EVERY_SECONDS = 0.01
REPO = "acme/public-app"
PLAN = plan_document(
    steps=[{"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}, "maxCalls": 1_000_000}]
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def control_plane(tmp_path, team: Team) -> Iterator[ControlPlane]:
    Team.objects.filter(pk=team.pk).update(revocation_bound_seconds=BOUND_SECONDS)
    signing_keys_bootstrap()
    server = ControlPlane(tmp_path)
    server.start()
    yield server
    server.stop()


class CallingAgent:
    """A thread calling the guarded tool every 10 ms; it notes the first call that is not
    allowed (its code and when), and keeps calling until stopped."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.allowed = 0
        self.first_blocked: tuple[Decision, float] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def _work(self) -> None:
        while not self._stopping.is_set():
            decision = self.guard.check("github_list_issues", {"repo": REPO})
            if decision.allowed:
                self.allowed += 1
            elif self.first_blocked is None:
                self.first_blocked = (decision.code, time.time())
            time.sleep(CALL_EVERY_SECONDS)

    def __enter__(self) -> CallingAgent:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._thread.join(30)


def make_guard(control_plane: ControlPlane, agent: AgentPersona, sink: list) -> Guard:
    return Guard(
        control_plane.url,
        agent.api_key,
        issuer=settings.PLANGATE_ISSUER,
        timeout=5,
        ttl=TOKEN_TTL,
        acp_sink=sink.append,
    )


def statuses(message: dict[str, Any]) -> list[str]:
    return [entry["status"] for entry in message["params"]["update"]["plan"]["entries"]]


def plan_updates(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["params"]["update"]["sessionUpdate"] == "plan_update"]


STOPS: list[tuple[str, Callable[[AgentPersona, str], object], Decision]] = [
    (
        "plan revoked",
        lambda agent, plan_id: plan_revoke(plan=Plan.objects.get(pk=plan_id), by="admin"),
        Decision.PLAN_REVOKED,
    ),
    (
        "member disabled",
        lambda agent, plan_id: member_disable(team=agent.team, email="alice@acme.dev"),
        Decision.USER_DISABLED,
    ),
    (
        "agent disabled",
        lambda agent, plan_id: agent_update(agent=agent.agent, is_active=False),
        Decision.AGENT_DISABLED,
    ),
    (
        "API key revoked",
        lambda agent, plan_id: api_key_revoke(api_key=agent.agent.api_keys.get()),
        Decision.AGENT_DISABLED,
    ),
    (
        "signing key revoked",
        lambda agent, plan_id: signing_key_revoke(
            kid=PlanToken.objects.filter(plan_id=plan_id).latest("issued_at").kid
        ),
        Decision.TOKEN_INVALID,
    ),
]


@pytest.mark.parametrize(("stop", "code"), [(s[1], s[2]) for s in STOPS], ids=[s[0] for s in STOPS])
def test_a_stop_blocks_the_running_agent_before_its_token_expires(control_plane, agent, stop, code):
    messages: list[dict[str, Any]] = []
    guard = make_guard(control_plane, agent, messages)
    declared = guard.declare(PLAN)

    with CallingAgent(guard) as running:
        assert wait_for(lambda: running.allowed > 0, timeout=30)
        stop(agent, declared.plan_id)
        blocked = wait_for(lambda: running.first_blocked is not None, timeout=TOKEN_TTL / 3)
    guard.close(timeout=30)

    assert blocked, tail(control_plane.log)
    first_code, first_at = running.first_blocked
    print(f"\n{code}: first blocked call as {first_code}")
    assert first_code == code
    assert first_at < declared.expires_at
    # Every open entry is cancelled (a revoked key's token is refused a refresh: final).
    assert statuses(plan_updates(messages)[-1]) == ["cancelled"]
    # The decision log holds the blocked calls: a disabled agent's, and those of a revoked
    # key, go with the plan's intent token (docs/decisions/0054).
    assert PlanEvent.objects.filter(plan_id=declared.plan_id, decision=code).exists(), tail(
        control_plane.log
    )


def test_an_unreachable_control_plane_leaves_the_agent_deciding(control_plane, agent):
    messages: list[dict[str, Any]] = []
    guard = make_guard(control_plane, agent, messages)
    declared = guard.declare(PLAN)
    watcher = guard._status_watcher

    with CallingAgent(guard) as running:
        assert wait_for(lambda: running.allowed > 0 and watcher.polls > 0, timeout=30)
        control_plane.kill()
        polls_before, allowed_before = watcher.polls, running.allowed
        # Several polls fail while the agent calls on.
        assert wait_for(lambda: watcher.polls >= polls_before + 3, timeout=60)
        assert wait_for(lambda: running.allowed > allowed_before, timeout=30)
        still_deciding = running.first_blocked is None
        # Back, the next news still arrives.
        control_plane.start()
        plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin")
        blocked = wait_for(lambda: running.first_blocked is not None, timeout=TOKEN_TTL / 3)
    guard.close(timeout=30)

    assert still_deciding
    assert blocked, tail(control_plane.log)
    assert running.first_blocked[0] == Decision.PLAN_REVOKED
