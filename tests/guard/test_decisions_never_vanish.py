"""Nothing a guard decides vanishes (docs/decisions/0054): on every path that stops a plan
or its delivery, each decision the guard made is either stored by the control plane or
counted as lost, ``made = recorded + lost``, over real HTTP.

A real guard talks to the live control plane through a proxy a test can stop (a control
plane that is down). Each path: calls before the stop, the stop, calls the guard decides
before it learns of it, the guard told (its status poll), calls after, and the guard
closed. `made` counts the decisions the test saw the guard make; `recorded` is the rows
stored; `lost` is what the plan counts (Plan.decisions_lost, as the control plane reports
it) plus what the guard could never tell it (its closing summary). Where the API key is
refused, the decision log goes on with the plan's intent token: everything is recorded.

The figures are printed (``-s`` shows them); nothing here asserts a duration.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from guard.agent import Guard
from guard.decisions import Decision
from members.models import ApiKey
from members.services import agent_update, api_key_revoke, member_disable
from plans.keys import signing_key_revoke
from plans.models import Plan, PlanEvent, PlanEventBatch, PlanToken
from plans.services import plan_revoke
from tests.conftest import AgentPersona, plan_document

from .client_helpers import ShiftedClock, StoppableProxy

REPO = {"repo": "acme/public-app"}
PLAN = plan_document(
    steps=[
        {
            "tool": "github_list_issues",
            "args": {"repo": {"eq": "acme/public-app"}},
            "maxCalls": 10_000,
        }
    ]
)
CALLS = 12  # per phase
PAUSE = 0.01  # between two calls: the log goes out in several batches


@dataclass
class Run:
    """One path's run: the guard, its clock, the proxy and the plan; `made` counts the
    decisions the guard made on the plan."""

    guard: Guard
    clock: ShiftedClock
    proxy: StoppableProxy
    agent: AgentPersona
    plan_id: str = ""
    made: int = 0

    def calls(self, count: int = CALLS) -> list[Decision]:
        codes = []
        for _ in range(count):
            decision = self.guard.check("github_list_issues", REPO)
            if decision.code != Decision.NO_PLAN:
                self.made += 1
            codes.append(decision.code)
            time.sleep(PAUSE)
        return codes

    def quiet(self) -> None:
        """The log delivered as far as it can be, before the test touches the database (the
        live server shares SQLite's in-memory connection with the test)."""
        self.guard.flush(timeout=10)


def latest_kid(plan_id: str) -> str:
    return PlanToken.objects.filter(plan_id=plan_id).latest("issued_at").kid


def expire_key(run: Run) -> None:
    ApiKey.objects.filter(agent=run.agent.agent).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )


def stop_by(action: Callable[[Run], object], *, refresh: bool = False) -> Callable[[Run], None]:
    """A stop done in the database: the guard learns of it from its status poll (and, with
    `refresh`, asks for a new token at once, as its refresher does for a withdrawn one)."""

    def stop(run: Run) -> None:
        run.quiet()
        action(run)
        run.calls()  # decided before the guard knows
        run.guard.poll_status()
        if refresh:
            run.guard.refresh()

    return stop


def server_down_and_back(run: Run) -> None:
    run.quiet()
    run.proxy.stop()
    run.calls()
    run.proxy.start()


def queue_full(run: Run) -> None:
    run.quiet()
    run.proxy.stop()
    run.calls(CALLS * 3)  # far more than the queue holds (5)
    run.proxy.start()


def server_down_at_the_end(run: Run) -> None:
    run.quiet()
    run.proxy.stop()


def key_and_signing_key_revoked(run: Run) -> None:
    run.quiet()
    signing_key_revoke(kid=latest_kid(run.plan_id))
    api_key_revoke(api_key=run.agent.agent.api_keys.get())
    run.calls()
    run.guard.poll_status()


def key_revoked_then_token_expired(run: Run) -> None:
    run.quiet()
    api_key_revoke(api_key=run.agent.agent.api_keys.get())
    run.calls()
    run.guard.poll_status()
    # Past the token's expiry and the clock skew allowed: the token vouches for none of
    # what the guard decides now.
    run.clock.advance(900 + django_settings.PLANGATE_CLOCK_SKEW + 5)


@dataclass(frozen=True)
class Path:
    stop: Callable[[Run], None]
    blocked_as: Decision | None  # the code of the calls after the guard learned, if any
    by_token: bool = False  # the API key is refused: the log goes on with the plan's token
    all_recorded: bool = True
    server_counts_loss: bool = False
    guard_counts_loss: bool = False
    queue_size: int | None = None
    close_timeout: float = 30


PATHS = {
    "plan revoked": Path(
        stop_by(lambda run: plan_revoke(plan=Plan.objects.get(pk=run.plan_id), by="admin")),
        Decision.PLAN_REVOKED,
    ),
    "member disabled": Path(
        stop_by(lambda run: member_disable(team=run.agent.team, email="alice@acme.dev")),
        Decision.USER_DISABLED,
    ),
    "agent disabled": Path(
        stop_by(lambda run: agent_update(agent=run.agent.agent, is_active=False)),
        Decision.AGENT_DISABLED,
        by_token=True,
    ),
    "API key revoked": Path(
        stop_by(lambda run: api_key_revoke(api_key=run.agent.agent.api_keys.get())),
        Decision.AGENT_DISABLED,
        by_token=True,
    ),
    "API key expired": Path(stop_by(expire_key), Decision.AGENT_DISABLED, by_token=True),
    "signing key revoked": Path(
        stop_by(lambda run: signing_key_revoke(kid=latest_kid(run.plan_id)), refresh=True),
        Decision.TOKEN_INVALID,
    ),
    "server down and back": Path(server_down_and_back, None),
    "queue full": Path(queue_full, None, all_recorded=False, server_counts_loss=True, queue_size=5),
    "server down at the end": Path(
        server_down_at_the_end, None, all_recorded=False, guard_counts_loss=True, close_timeout=2
    ),
    "API key and signing key revoked": Path(
        key_and_signing_key_revoked,
        Decision.AGENT_DISABLED,
        all_recorded=False,
        guard_counts_loss=True,
    ),
    "API key revoked, then the token expired": Path(
        key_revoked_then_token_expired,
        Decision.AGENT_DISABLED,
        by_token=True,
        all_recorded=False,
        server_counts_loss=True,
    ),
}


@pytest.fixture
def proxy(live_server) -> Iterator[StoppableProxy]:
    proxy = StoppableProxy(live_server.url)
    yield proxy
    proxy.stop()


@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
def test_every_decision_is_recorded_or_counted_as_lost(
    proxy, agent, path, caplog, request, admin_client
):
    caplog.set_level(logging.WARNING, logger="guard.agent.reporter")
    clock = ShiftedClock()
    guard = Guard(
        proxy.url,
        agent.api_key,
        issuer=django_settings.PLANGATE_ISSUER,
        clock=clock,
        auto_refresh=False,
        watch_status=False,
        report_interval=0.05,
        report_queue_size=path.queue_size,
        report_retry_max_delay=0.2,
        timeout=5,
    )
    run = Run(guard, clock, proxy, agent)
    run.plan_id = guard.declare(PLAN).plan_id
    try:
        assert all(code == Decision.ALLOWED for code in run.calls())
        path.stop(run)
        after = run.calls()
    finally:
        guard.close(timeout=path.close_timeout)

    stats = guard.reporter_stats()
    recorded = PlanEvent.objects.filter(plan_id=run.plan_id).count()
    counted_by_server = Plan.objects.get(pk=run.plan_id).decisions_lost
    lost = counted_by_server + stats.lost_unreported
    print(
        f"\n{request.node.callspec.id}: made {run.made}, recorded {recorded}, lost {lost}"
        f" (counted on the plan {counted_by_server}, only by the guard {stats.lost_unreported})"
    )

    assert run.made == stats.made
    assert run.made == recorded + lost
    assert (stats.recorded, stats.lost_reported) == (recorded, counted_by_server)
    assert recorded > 0
    if path.blocked_as is not None:
        assert set(after) == {path.blocked_as}
    if path.all_recorded:
        assert lost == 0
    assert (counted_by_server > 0) == path.server_counts_loss
    assert (stats.lost_unreported > 0) == path.guard_counts_loss
    by_token = PlanEventBatch.objects.filter(
        plan_id=run.plan_id, credential=PlanEventBatch.Credential.PLAN_TOKEN
    )
    assert stats.key_refused == (path.by_token or path.stop is key_and_signing_key_revoked)
    if path.by_token:
        # The decisions made after the stop, with the refused key, reached the trail.
        assert by_token.exists()
        made_after_the_stop = PlanEvent.objects.filter(
            plan_id=run.plan_id, batch__credential=PlanEventBatch.Credential.PLAN_TOKEN
        )
        assert made_after_the_stop.filter(decision=Decision.ALLOWED).exists()
        if path.all_recorded:
            assert made_after_the_stop.filter(decision=Decision.AGENT_DISABLED).exists()
    else:
        assert not by_token.exists()
    # A stopped plan is not reported completed: it ended, saying why (a revoked one stays so).
    plan = Plan.objects.get(pk=run.plan_id)
    if path.blocked_as == Decision.PLAN_REVOKED:
        assert plan.status == Plan.Status.REVOKED
    elif path.blocked_as is not None and not path.guard_counts_loss:
        assert plan.status == Plan.Status.ENDED
        assert plan.end_reason.startswith(f"{path.blocked_as.value}: ")
    # The plan's page counts the blocked calls recorded, and says what was lost.
    page = admin_client.get(reverse("admin:plans_plan_change", args=[run.plan_id]))
    assert page.status_code == 200
    html = page.content.decode()
    blocked = PlanEvent.objects.filter(plan_id=run.plan_id).exclude(decision=Decision.ALLOWED)
    if counted_by_server:
        assert (
            f"Blocked attempts ({blocked.count()} recorded · {counted_by_server} decisions lost)"
            in html
        )
        assert 'id="decisions-lost"' in html
    else:
        assert f"Blocked attempts ({blocked.count()})" in html
    carried = PlanEvent.objects.filter(
        plan_id=run.plan_id, batch__credential=PlanEventBatch.Credential.PLAN_TOKEN
    ).count()
    assert (f"{carried} decisions were delivered with the plan's own intent token" in html) == (
        carried > 0
    )
    assert (carried > 0) == path.by_token
    # One warning for the refused key, one summary at close: never a line per batch.
    lines = [record.getMessage() for record in caplog.records]
    refused_key = [line for line in lines if "refused the agent's API key" in line]
    assert len(refused_key) == (1 if stats.key_refused else 0)
    assert not [line for line in lines if "refused" in line and "decision(s) for plan" in line]
    summaries = [line for line in lines if "decision log closed" in line]
    if stats.key_refused or lost:
        assert len(summaries) == 1
        assert f"{run.made} decision(s) made, {recorded} recorded" in summaries[0]
