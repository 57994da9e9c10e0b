"""The guard in asyncio code, against a live control plane: what reaches the control plane
runs off the event loop (a ticker coroutine keeps ticking while the control plane holds
each request), an ``async def`` tool completes its step only once its coroutine returned,
and a cancelled or closed declaration leaves the guard settled.

The codes, budgets, refresh, approval and decision log of `AsyncGuard` are those of `Guard`:
the client tests run for both (see conftest.guard_kind); this module covers what only
asyncio has.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from django.conf import settings

from guard.agent import AsyncGuard, CallBlocked, Guard, GuardError, acp
from guard.agent.errors import GUARD_CLOSED
from guard.decisions import Decision
from plans.approvals import plan_approval_decide
from plans.models import Plan, PlanEvent, PlanToken
from policies.services import policy_set
from tests.conftest import plan_document
from tests.plans.approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for

from .client_helpers import Switchboard, wait_until
from .test_acp import statuses

REPO = {"repo": "acme/public-app"}
MAIL = {"to": "bob@example.test"}
PLAN = plan_document(
    steps=[
        {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 1},
        {"tool": "github_get_issue", "maxCalls": 2},
    ]
)
# How many times the event loop must have run the ticker while the control plane holds a
# request: it can only tick while the guard's wait is off the loop.
TICKS = 5


class Ticker:
    """A coroutine that counts the event loop's turns."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0.001)


@dataclass
class SlowControlPlane(httpx.BaseTransport):
    """The live control plane answering slowly: each request is held until the event loop
    has ticked `TICKS` more times (30 s at most), then forwarded. Notes each request's path
    and whether the loop ticked meanwhile."""

    ticker: Ticker
    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    held: list[tuple[str, bool]] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = self.ticker.count
        ticked = wait_until(lambda: self.ticker.count >= start + TICKS, timeout=30)
        self.held.append((f"{request.method} {request.url.path}", ticked))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def make_async_guard(live_server: Any, api_key: str, **options: Any) -> AsyncGuard:
    options = {"issuer": settings.PLANGATE_ISSUER, "report_interval": 0.05, **options}
    return AsyncGuard(live_server.url, api_key, **options)


def test_the_event_loop_keeps_running_while_the_control_plane_holds_every_request(
    live_server, agent
):
    async def scenario() -> tuple[SlowControlPlane, dict[str, int], bool, bool]:
        ticker = Ticker()
        ticking = asyncio.create_task(ticker.run())
        slow = SlowControlPlane(ticker)
        # The decision log posts only when flushed or closed (its interval is long).
        guard = make_async_guard(
            live_server,
            agent.api_key,
            transport=slow,
            auto_refresh=False,
            watch_status=False,
            status_list=False,  # poll_status asks the per-plan feed, held like the rest
            report_interval=600,
        )
        ticks: dict[str, int] = {}

        async def timed(name: str, awaitable: Any) -> Any:
            before = ticker.count
            result = await awaitable
            ticks[name] = ticker.count - before
            return result

        await timed("declare", guard.declare(PLAN))
        allowed = guard.check("github_list_issues", REPO).allowed
        refreshed = await timed("refresh", guard.refresh())
        await timed("poll_status", guard.poll_status())
        await timed("flush", guard.flush())
        guard.check("github_get_issue", {"repo": "evil/app"})
        await timed("aclose", guard.aclose())
        ticking.cancel()
        return slow, ticks, allowed, refreshed and allowed

    slow, ticks, allowed, refreshed = asyncio.run(scenario())

    assert allowed and refreshed
    paths = [path for path, _ in slow.held]
    plan = Plan.objects.get()
    for expected in (
        "POST /v1/plans",
        "GET /v1/keys/jwks",
        f"POST /v1/plans/{plan.pk}/refresh",
        f"GET /v1/plans/{plan.pk}/status",
        f"POST /v1/plans/{plan.pk}/events",
    ):
        assert expected in paths
    assert all(ticked for _, ticked in slow.held), slow.held
    assert all(count >= TICKS for count in ticks.values()), ticks
    assert list(PlanToken.objects.filter(plan=plan).values_list("kind", flat=True)) == [
        "issue",
        "refresh",
    ]
    assert list(PlanEvent.objects.filter(plan=plan).values_list("decision", flat=True)) == [
        Decision.ALLOWED,  # flushed
        Decision.POLICY_DENIED,  # posted as the guard closed
    ]


@pytest.mark.parametrize("guard_type", [Guard, AsyncGuard])
def test_an_async_tool_completes_its_step_only_once_its_coroutine_returned(
    live_server, agent, guard_type
):
    shown: list[dict[str, Any]] = []
    guard = guard_type(
        live_server.url, agent.api_key, issuer=settings.PLANGATE_ISSUER, acp_sink=shown.append
    )
    seen_while_running: list[str] = []

    @guard.tool()
    async def github_list_issues(repo: str) -> list[str]:
        await asyncio.sleep(0)
        seen_while_running.append(guard.status().steps[0].status)
        return ["#1"]

    @guard.tool("github_get_issue")
    async def get_issue(repo: str, number: int) -> dict[str, Any]:
        await asyncio.sleep(0)
        seen_while_running.append(guard.status().steps[1].status)
        raise RuntimeError("the issue tracker is down")

    async def scenario() -> tuple[list[str], list[tuple[str, int]], list[list[str]]]:
        if isinstance(guard, AsyncGuard):
            await guard.declare(PLAN)
        else:
            guard.declare(PLAN)
        issues = await github_list_issues("acme/public-app")
        with pytest.raises(RuntimeError):
            await get_issue("acme/app", number=7)
        with pytest.raises(CallBlocked) as blocked:
            await github_list_issues(repo="acme/public-app")
        assert blocked.value.decision.code is Decision.MAX_CALLS_EXCEEDED
        shown_so_far = [
            statuses(message)
            for message in shown
            if message["params"]["update"]["sessionUpdate"] != "plan_removed"
        ]
        return issues, [(step.status, step.used) for step in guard.status().steps], shown_so_far

    try:
        issues, after, shown_statuses = asyncio.run(scenario())
    finally:
        guard.close() if isinstance(guard, Guard) else asyncio.run(guard.aclose())

    assert asyncio.iscoroutinefunction(github_list_issues)
    assert issues == ["#1"]
    assert seen_while_running == [acp.IN_PROGRESS, acp.IN_PROGRESS]
    # Returned: completed. Raised: still in progress, its call spent.
    assert after == [(acp.COMPLETED, 1), (acp.IN_PROGRESS, 1)]
    assert [acp.COMPLETED, acp.IN_PROGRESS] in shown_statuses
    assert not any(step_statuses[1] == acp.COMPLETED for step_statuses in shown_statuses)


@pytest.mark.parametrize("guard_type", [Guard, AsyncGuard])
def test_an_async_generator_cannot_be_a_guarded_tool(guard_type):
    guard = guard_type("http://127.0.0.1:9", "pg_unused", auto_refresh=False, report=False)

    async def stream_issues(repo: str) -> Any:
        yield repo

    with pytest.raises(TypeError, match="async generator 'stream_issues'"):
        guard.tool()(stream_issues)


def test_call_awaits_a_coroutine_function_and_runs_a_plain_one_only_when_allowed(
    live_server, agent
):
    ran: list[str] = []

    async def list_issues(repo: str) -> list[str]:
        await asyncio.sleep(0)
        ran.append(repo)
        return ["#1"]

    def get_issue(repo: str, number: int) -> str:
        ran.append(f"{repo}#{number}")
        return "issue"

    async def scenario() -> tuple[Any, Any, CallBlocked]:
        async with make_async_guard(live_server, agent.api_key) as guard:
            await guard.declare(PLAN)
            listed = await guard.call("github_list_issues", REPO, list_issues)
            fetched = await guard.call(
                "github_get_issue", {"repo": "acme/app", "number": 7}, get_issue
            )
            with pytest.raises(CallBlocked) as blocked:
                await guard.call("github_delete_repo", REPO, list_issues)
            assert [step.status for step in guard.status().steps] == [acp.COMPLETED] * 2
        return listed, fetched, blocked.value

    listed, fetched, blocked = asyncio.run(scenario())

    assert (listed, fetched) == (["#1"], "issue")
    assert ran == ["acme/public-app", "acme/app#7"]
    assert blocked.decision.code is Decision.NOT_IN_PLAN
    # `async with` closed the guard: every decision reached the log.
    assert list(PlanEvent.objects.order_by("id").values_list("decision", flat=True)) == [
        Decision.ALLOWED,
        Decision.ALLOWED,
        Decision.NOT_IN_PLAN,
    ]


def test_the_synchronous_call_refuses_a_coroutine_before_spending_its_budget(live_server, agent):
    guard = Guard(live_server.url, agent.api_key, issuer=settings.PLANGATE_ISSUER)

    async def list_issues(repo: str) -> list[str]:
        return ["#1"]

    def hands_back_a_coroutine(repo: str) -> Any:
        return list_issues(repo)

    try:
        guard.declare(PLAN)
        with pytest.raises(TypeError, match=r"AsyncGuard\.call"):
            guard.call("github_list_issues", REPO, list_issues)
        # Refused before deciding: the step's one call is still there.
        assert guard.status().steps[0].used == 0
        with pytest.raises(TypeError, match="returned an awaitable"):
            guard.call("github_list_issues", REPO, hands_back_a_coroutine)
        # It did not run: its step is not shown completed.
        assert guard.status().steps[0].status != acp.COMPLETED
    finally:
        guard.close()


@pytest.fixture
def review_policy(team, policy_version):
    return policy_set(team=team, slug="default", document=REVIEW_POLICY)


def test_a_cancelled_wait_for_approval_leaves_the_plan_awaiting_and_poll_picks_it_up(
    live_server, agent, review_policy, team
):
    approver = approver_for(team)
    switchboard = Switchboard(httpx.HTTPTransport())
    guard = make_async_guard(live_server, agent.api_key, transport=switchboard, report=False)

    async def declare_then_cancel() -> tuple[str, Decision]:
        declaring = asyncio.create_task(guard.declare(plan_document(steps=REVIEWED_PLAN_STEPS)))
        await asyncio.to_thread(wait_until, lambda: switchboard.count("/token") == 1)
        declaring.cancel()
        with pytest.raises(asyncio.CancelledError):
            await declaring
        return guard.status().state, guard.check("send_email", MAIL).code

    with asyncio.Runner() as runner:
        state, decision = runner.run(declare_then_cancel())
        asks_when_cancelled = switchboard.count("/token")
        plan = Plan.objects.get()
        plan_approval_decide(plan=plan, by_user=approver, approve=True)
        declared = runner.run(guard.poll_approval())
        allowed = guard.check("send_email", MAIL)
        runner.run(guard.aclose())

    assert (state, decision) == ("awaiting_approval", Decision.APPROVAL_PENDING)
    # The cancelled wait asked no more once cancelled: the poll is the one ask after it.
    assert switchboard.count("/token") == asks_when_cancelled + 1
    assert declared.plan_id == plan.pk
    assert declared.approved_by == approver.email
    assert allowed.allowed


def test_closing_the_guard_ends_a_wait_for_approval_with_guard_closed(
    live_server, agent, review_policy
):
    shown: list[dict[str, Any]] = []
    switchboard = Switchboard(httpx.HTTPTransport())
    guard = make_async_guard(
        live_server, agent.api_key, transport=switchboard, report=False, acp_sink=shown.append
    )

    async def declare_then_close() -> GuardError:
        declaring = asyncio.create_task(guard.declare(plan_document(steps=REVIEWED_PLAN_STEPS)))
        await asyncio.to_thread(wait_until, lambda: switchboard.count("/token") == 1)
        await guard.aclose()
        with pytest.raises(GuardError) as closed:
            await declaring
        return closed.value

    error = asyncio.run(declare_then_close())

    assert error.code == GUARD_CLOSED
    assert guard.status().state == "no_plan"
    updates = [message["params"]["update"]["sessionUpdate"] for message in shown]
    assert updates == ["plan_update", "plan_update", "plan_removed"]
    assert statuses(shown[1]) == [acp.CANCELLED] * 2


@dataclass
class HeldDeclaration(httpx.BaseTransport):
    """Forwards to the live control plane, holding ``POST /v1/plans`` until released."""

    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v1/plans":
            self.entered.set()
            self.release.wait(30)
        return self.inner.handle_request(request)


def test_a_declaration_cancelled_in_flight_settles_before_the_caller_hears_of_it(
    live_server, agent
):
    held = HeldDeclaration()
    guard = make_async_guard(live_server, agent.api_key, transport=held, report=False)

    async def cancel_in_flight() -> tuple[str, Decision]:
        declaring = asyncio.create_task(guard.declare(PLAN))
        await asyncio.to_thread(held.entered.wait, 30)
        declaring.cancel()
        held.release.set()  # the control plane answers after the cancellation
        with pytest.raises(asyncio.CancelledError):
            await declaring
        # Settled: the control plane issued the token, so the plan is the session's.
        return guard.status().state, guard.check("github_list_issues", REPO).code

    with asyncio.Runner() as runner:
        state, decision = runner.run(cancel_in_flight())
        runner.run(guard.aclose())

    assert (state, decision) == ("active", Decision.ALLOWED)
    assert Plan.objects.count() == 1
