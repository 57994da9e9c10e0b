"""The guard's decision log across a control-plane outage, with a real gunicorn on the real
test database and a running agent.

An agent (a Guard and a thread calling a tool every 10 ms) works while the server is killed
(SIGKILL, no goodbye) and, after the outage, a new one is started on the same port and
database. The guard is then closed and the stored log compared with what the agent did:

- with the default queue, a 30-second outage: every decision stored once (none lost, none
  duplicated), and the plan completed;
- with a tiny queue: decisions are lost, and exactly as many are counted on the plan and in
  a ``decisions_lost`` audit record;
- many copies of one batch at once, through several workers: stored once.

The figures (made, recorded, lost, duplicated) are printed (``-s`` shows them); nothing here
asserts a duration.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db.models import Count

from audit.models import AuditRecord
from guard.agent import Guard
from guard.decisions import Decision
from plans.keys import signing_keys_bootstrap
from plans.models import Plan, PlanEvent, PlanEventBatch
from tests.conftest import plan_document

from .processes import (
    BIN,
    IS_POSTGRES,
    NEEDS_POSTGRES,
    free_port,
    process_env,
    start,
    stop,
    tail,
)

SERVER_START_SECONDS = 60.0
OUTAGE_SECONDS = 30.0
SHORT_OUTAGE_SECONDS = 5.0
CALL_EVERY_SECONDS = 0.01
CLOSE_TIMEOUT_SECONDS = 60.0
REPO = "acme/public-app"
PLAN = plan_document(
    steps=[
        {
            "tool": "github_list_issues",
            "args": {"repo": {"eq": REPO}},
            "maxCalls": 1_000_000,
            "required": True,
        }
    ]
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]


class ControlPlane:
    """gunicorn on the test database at a fixed port: `kill()` it, `start()` a new one."""

    def __init__(self, tmp_path: Path, *, workers: int = 2) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "gunicorn.log"
        self.workers = workers
        self.process = None
        self.env = process_env(
            PLANGATE_RATE_LIMIT="1000000/min", PLANGATE_AUTH_FAILURE_LIMIT="1000000/min"
        )

    def start(self) -> None:
        self.process = start(
            [
                str(BIN / "gunicorn"),
                "controlplane.wsgi",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
                "--timeout",
                "60",
                "--no-control-socket",
            ],
            env=self.env,
            log=self.log,
        )
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            assert self.process.poll() is None, f"gunicorn exited:\n{tail(self.log)}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                    return
            assert time.monotonic() < deadline, f"gunicorn did not get ready:\n{tail(self.log)}"
            time.sleep(0.2)

    def kill(self) -> None:
        """Gone at once, as a crashed host is: no request is finished."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        stop(self.process)
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None


@pytest.fixture
def control_plane(tmp_path) -> Iterator[ControlPlane]:
    signing_keys_bootstrap()
    server = ControlPlane(tmp_path)
    server.start()
    yield server
    server.stop()


@dataclass
class CallingAgent:
    """A thread calling the guarded tool every 10 ms until stopped; `made` counts the
    decisions made on the plan (each one queued for the decision log)."""

    guard: Guard
    made: int = 0
    not_allowed: int = 0

    def __post_init__(self) -> None:
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def _work(self) -> None:
        n = 0
        while not self._stopping.is_set():
            decision = self.guard.check("github_list_issues", {"repo": REPO, "n": n})
            n += 1
            if decision.code != Decision.NO_PLAN:
                self.made += 1
            if not decision.allowed:
                self.not_allowed += 1
            time.sleep(CALL_EVERY_SECONDS)

    def __enter__(self) -> CallingAgent:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._thread.join(30)


@dataclass(frozen=True)
class Figures:
    made: int
    recorded: int
    distinct: int
    lost: int

    @property
    def duplicated(self) -> int:
        return self.recorded - self.distinct


def figures(plan_id: str, made: int) -> Figures:
    events = PlanEvent.objects.filter(plan_id=plan_id)
    counts = events.aggregate(total=Count("id"), distinct=Count("args_digest", distinct=True))
    plan = Plan.objects.get(pk=plan_id)
    return Figures(made, counts["total"], counts["distinct"], plan.decisions_lost)


def run_through_an_outage(
    control_plane: ControlPlane, guard: Guard, outage_seconds: float
) -> tuple[str, CallingAgent]:
    declared = guard.declare(PLAN)
    with CallingAgent(guard) as agent:
        time.sleep(2.0)  # the log flows before the outage
        control_plane.kill()
        time.sleep(outage_seconds)
        control_plane.start()
        time.sleep(2.0)  # and after it
    guard.close(timeout=CLOSE_TIMEOUT_SECONDS)
    return declared.plan_id, agent


def report(title: str, result: Figures, guard: Guard) -> None:
    stats = guard.reporter_stats()
    print(
        f"\n{title}: made {result.made}, recorded {result.recorded}, lost {result.lost},"
        f" duplicated {result.duplicated} (reporter: sent {stats.sent}, dropped"
        f" {stats.dropped}, retries {stats.retries}, duplicate answers {stats.duplicates})"
    )


def test_a_30_second_outage_loses_and_duplicates_no_decision(control_plane, agent):
    guard = Guard(control_plane.url, agent.api_key, issuer=settings.PLANGATE_ISSUER, timeout=5)

    plan_id, running = run_through_an_outage(control_plane, guard, OUTAGE_SECONDS)

    result = figures(plan_id, running.made)
    report(f"{OUTAGE_SECONDS:.0f} s outage, default queue", result, guard)
    assert running.made > 0 and running.not_allowed == 0
    assert result.recorded == result.made, tail(control_plane.log)
    assert result.duplicated == 0
    assert result.lost == 0
    assert guard.reporter_stats().dropped == 0
    assert Plan.objects.get(pk=plan_id).status == Plan.Status.COMPLETED
    assert AuditRecord.objects.filter(plan_id=plan_id, kind=AuditRecord.Kind.DECISION).count() == (
        result.made
    )


def test_a_full_queue_loses_decisions_and_says_how_many(control_plane, agent):
    guard = Guard(
        control_plane.url,
        agent.api_key,
        issuer=settings.PLANGATE_ISSUER,
        timeout=5,
        report_queue_size=20,
        report_batch_size=10,
    )

    plan_id, running = run_through_an_outage(control_plane, guard, SHORT_OUTAGE_SECONDS)

    result = figures(plan_id, running.made)
    report(f"{SHORT_OUTAGE_SECONDS:.0f} s outage, queue of 20", result, guard)
    assert result.lost > 0
    assert result.lost == result.made - result.recorded
    assert result.duplicated == 0
    lost_records = AuditRecord.objects.filter(plan_id=plan_id, kind=AuditRecord.Kind.DECISIONS_LOST)
    assert lost_records.exists()
    assert sum(record.details["lost"] for record in lost_records) == result.lost
    assert Plan.objects.get(pk=plan_id).status == Plan.Status.COMPLETED


def test_many_copies_of_one_batch_at_once_are_stored_once(control_plane, agent):
    control_plane.kill()
    control_plane.workers = 4
    control_plane.start()
    with httpx.Client(
        base_url=control_plane.url, headers={"Authorization": f"Bearer {agent.api_key}"}
    ) as client:
        plan_id = client.post("/v1/plans", json={"plan": PLAN}).json()["id"]
        body = {
            "stream": "c0ffee00c0ffee00",
            "seq": 1,
            "lost": 3,
            "events": [
                {
                    "at": "2026-11-30T09:00:00Z",
                    "tool": "github_list_issues",
                    "decision": "allowed",
                    "step": 0,
                }
            ],
        }
        barrier = threading.Barrier(16)

        def post() -> httpx.Response:
            barrier.wait(30)
            return client.post(f"/v1/plans/{plan_id}/events", json=body)

        with ThreadPoolExecutor(16) as pool:
            responses = list(pool.map(lambda _: post(), range(16)))

    statuses = sorted(response.status_code for response in responses)
    print(f"\n16 copies of one batch at once: statuses {statuses}")
    assert statuses == [200] * 15 + [202], tail(control_plane.log)
    assert all(response.json()["events"] == 1 for response in responses)
    assert PlanEventBatch.objects.filter(plan_id=plan_id).count() == 1
    assert PlanEvent.objects.filter(plan_id=plan_id).count() == 1
    assert Plan.objects.get(pk=plan_id).decisions_lost == 3
    assert (
        AuditRecord.objects.filter(plan_id=plan_id, kind=AuditRecord.Kind.DECISIONS_LOST).count()
        == 1
    )
