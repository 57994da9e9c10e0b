"""Revocation in seconds: how long after an admin's "stop" running agents are blocked, and
what the status feed they poll costs the server (docs/decisions/0032).

Against Plangate under gunicorn (the same server set-up as the HTTP benchmark, its own
instance):

1. **Time from revocation to the first blocked call.** N guards (threads in this process,
   each with its own plan, calling a tool every 20 ms, their status watch polling at the
   team's pace) run; every plan is revoked in one transaction (``manage.py shell``, which
   prints the time of the commit); each guard's first blocked call is timed from it. p50,
   p99 and the longest, over every guard of every round, next to the team's bound (15 s).
2. **The status feed's requests/s next to ``/healthz``**, with 1,000 simulated guards: one
   plan each, polled in turn by the load threads with each plan's own ``ETag`` (``304``,
   what nearly every poll gets), and without it (``200``); ``/healthz`` is measured before
   and after, with the same threads, and the ratio is to their mean.

Prints; never fails on a figure.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import math
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))  # the repository root, for the guard

from guard.agent import Guard  # noqa: E402

MAX_GUARDS = 500
MAX_FEED_PLANS = 5_000
MAX_ROUNDS = 10
CALL_EVERY_SECONDS = 0.02
DEFAULT_BOUND_SECONDS = 15  # members.models.REVOCATION_BOUND_DEFAULT, the bench team's
SLICES = 4  # each scenario's time is cut in this many slices, taken in turn
FEED_TARGET = 0.50  # the issue's: the feed at 50% or more of /healthz's throughput
# Every plan revoked in one transaction; the time printed is taken once it has committed.
REVOKE_ALL = """
import time
from django.db import transaction
from plans.models import Plan
from plans.services import plan_revoke
with transaction.atomic():
    for plan in Plan.objects.filter(pk__in={ids}):
        plan_revoke(plan=plan, by="bench", reason="revocation bench")
print(repr(time.time()))
"""


def revoke_all(env: dict[str, str], plan_ids: list[str]) -> float:
    """Revoke the plans through the service, as the admin does; the time of the commit."""
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", REVOKE_ALL.format(ids=repr(plan_ids))],
        cwd=BENCH_DIR.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"revoking failed: {result.stdout}{result.stderr}")
    return float(result.stdout.strip().splitlines()[-1])


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--revocation-guards",
        type=int,
        default=50,
        help=f"guards revoked at once per round (default 50, at most {MAX_GUARDS})",
    )
    group.add_argument(
        "--revocation-rounds", type=int, default=2, help="rounds of revocation (default 2)"
    )
    group.add_argument(
        "--feed-guards",
        type=int,
        default=1000,
        help=f"simulated guards polling the feed (default 1000, at most {MAX_FEED_PLANS:,})",
    )


def feed_plan() -> dict:
    """A plan the bench policy admits, with room for every call the bench makes."""
    return {
        "version": 1,
        "goal": "Revocation benchmark",
        "user": "bench@bench.test",
        "steps": [
            {
                "tool": "bench_read_feed",
                "args": {"repo": {"eq": "acme/public-app"}},
                "maxCalls": 1_000_000,
            }
        ],
    }


# --- 1. time from revocation to the first blocked call ---------------------------------------


@dataclass
class CallingGuard:
    guard: Guard
    plan_id: str = ""
    allowed: int = 0
    first_blocked: tuple[str, float] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)

    def work(self) -> None:
        while not self.stopping.is_set():
            decision = self.guard.check("bench_read_feed", {"repo": "acme/public-app"})
            if decision.allowed:
                self.allowed += 1
            elif self.first_blocked is None:
                self.first_blocked = (decision.code.value, time.time())
                return
            time.sleep(CALL_EVERY_SECONDS)


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def revocation_round(server, count: int) -> tuple[list[float], dict]:
    """One round: `count` guards run, all their plans are revoked at once. Returns each
    guard's delay (seconds) and the codes of their first blocked calls."""
    agents = [
        CallingGuard(Guard(server.base_url, server.api_key, timeout=5, report=False))
        for _ in range(count)
    ]
    threads: list[threading.Thread] = []
    try:
        with ThreadPoolExecutor(8) as pool:
            declared = list(pool.map(lambda agent: agent.guard.declare(feed_plan()), agents))
        for agent, plan in zip(agents, declared, strict=True):
            agent.plan_id = plan.plan_id
            thread = threading.Thread(target=agent.work, daemon=True)
            thread.start()
            threads.append(thread)
        wait_until(lambda: all(agent.allowed for agent in agents), 30)
        # The guards' watches were started over a few seconds and poll with jitter: their
        # phases are spread, as those of agents started at different times would be.
        time.sleep(DEFAULT_BOUND_SECONDS / 2)
        revoked_at = revoke_all(server.env, [agent.plan_id for agent in agents])
        wait_until(
            lambda: all(agent.first_blocked is not None for agent in agents),
            4 * DEFAULT_BOUND_SECONDS,
        )
    finally:
        for agent in agents:
            agent.stopping.set()
        for thread in threads:
            thread.join(5)
        for agent in agents:
            agent.guard.close(timeout=5)
    delays, codes = [], {}
    for agent in agents:
        if agent.first_blocked is None:
            codes["not blocked"] = codes.get("not blocked", 0) + 1
            continue
        code, at = agent.first_blocked
        codes[code] = codes.get(code, 0) + 1
        delays.append(max(0.0, at - revoked_at))
    return delays, codes


# --- 2. the feed's requests/s next to /healthz -----------------------------------------------


@dataclass
class Load:
    name: str
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    server_cpu: float | None = None

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def absorb(self, part: Load) -> None:
        """Add a slice measured with the same scenario."""
        self.seconds += part.seconds
        self.latencies = sorted(self.latencies + part.latencies)
        self.errors += part.errors
        self.first_error = self.first_error or part.first_error
        if part.server_cpu is not None:  # None where /proc cannot be read: never for some
            self.server_cpu = (self.server_cpu or 0.0) + part.server_cpu

    @property
    def cpu_ms(self) -> float | None:
        if self.server_cpu is None or not self.latencies:
            return None
        return self.server_cpu / len(self.latencies) * 1000


def kid_of(token: str) -> str:
    header = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]


def declare_feed_plans(server, count: int) -> list[tuple[str, str, str]]:
    """`count` plans: (status path with its kid, ETag of its current status, plan id)."""
    headers = {"Authorization": f"Bearer {server.api_key}"}
    body = {"plan": feed_plan()}

    def declare(_: int) -> tuple[str, str, str]:
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            answer = client.post("/v1/plans", json=body)
            if answer.status_code != 201:
                raise RuntimeError(f"cannot declare: {answer.status_code} {answer.text[:300]}")
            plan_id = answer.json()["id"]
            path = f"/v1/plans/{plan_id}/status?kid={kid_of(answer.json()['token'])}"
            status = client.get(path)
            if status.status_code != 200:
                raise RuntimeError(f"the feed answered {status.status_code} {status.text[:300]}")
            return path, status.headers["ETag"], plan_id

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(declare, range(count)))


def load(
    server,
    name: str,
    requests: list[tuple[str, dict[str, str]]],
    expected: int,
    *,
    concurrency: int,
    warmup: float,
    duration: float,
) -> Load:
    """`concurrency` threads, thread k sending requests[k], requests[k + concurrency]... in
    turn; only requests inside the recorded window count (bench/run.py's drive_load)."""
    import run  # bench/run.py, the same module when it runs as the script (see its end)

    shares = [requests[index::concurrency] or requests[:1] for index in range(concurrency)]

    def send(client: httpx.Client, index: int, turn: int) -> httpx.Response:
        path, headers = shares[index][turn % len(shares[index])]
        return client.get(path, headers=headers)

    figures = run.drive_load(
        server,
        concurrency=concurrency,
        warmup=warmup,
        duration=duration,
        headers={"Authorization": f"Bearer {server.api_key}"},
        send=send,
        expected_status=expected,
        max_requests=10**6,
    )
    return Load(
        name,
        duration,
        latencies=figures.latencies,
        errors=figures.errors,
        first_error=figures.first_error,
        server_cpu=figures.server_cpu,
    )


# --- main ------------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(BENCH_DIR))
    import run
    from benchlib import heading, percentile, print_table

    guards = max(1, min(args.revocation_guards, MAX_GUARDS))
    rounds = max(1, min(args.revocation_rounds, MAX_ROUNDS))
    feed_guards = max(1, min(args.feed_guards, MAX_FEED_PLANS))
    heading("Revocation: time to the first blocked call, and the status feed next to /healthz")
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="plangate-revocation-"))
        with run.running_server(args, Path(tmp)) as server:
            print(
                f"database: {server.database}; gunicorn: {args.workers} sync worker(s); "
                f"team bound {DEFAULT_BOUND_SECONDS} s (guards poll every "
                f"{DEFAULT_BOUND_SECONDS / 2:g} s, jittered)"
            )
            delays: list[float] = []
            codes: dict[str, int] = {}
            for _ in range(rounds):
                round_delays, round_codes = revocation_round(server, guards)
                delays += round_delays
                for code, count in round_codes.items():
                    codes[code] = codes.get(code, 0) + count
            delays.sort()

            plans = declare_feed_plans(server, feed_guards)
            conditional = [(path, {"If-None-Match": etag}) for path, etag, _ in plans]
            unconditional = [(path, {}) for path, _, _ in plans]
            healthz = [("/healthz", {})]
            # Interleaved slices, so that what else runs on the machine weighs on the
            # baseline and on the feed alike.
            scenarios = [
                ("GET /healthz (baseline)", healthz, 200),
                ("GET /v1/plans/{id}/status, ETag (304)", conditional, 304),
                ("GET /v1/plans/{id}/status, no ETag (200)", unconditional, 200),
            ]
            totals = {name: Load(name, 0.0) for name, _, _ in scenarios}
            slice_seconds = args.duration / SLICES
            for _ in range(SLICES):
                for name, requests, expected in scenarios:
                    part = load(
                        server,
                        name,
                        requests,
                        expected,
                        concurrency=args.concurrency,
                        warmup=min(args.warmup, 0.5),
                        duration=slice_seconds,
                    )
                    totals[name].absorb(part)
            baseline_load, not_modified, changed = (totals[name] for name, _, _ in scenarios)

    print(f"\nTime from revocation to the first blocked call ({rounds} x {guards} guards):")
    blocked = len(delays)
    print_table(
        ["guards blocked", "codes", "p50 s", "p99 s", "longest s", "bound s", "target"],
        [
            [
                f"{blocked} of {rounds * guards}",
                ", ".join(f"{code} {count}" for code, count in sorted(codes.items())),
                f"{percentile(delays, 0.50):.2f}",
                f"{percentile(delays, 0.99):.2f}",
                f"{delays[-1]:.2f}" if delays else "n/a",
                str(DEFAULT_BOUND_SECONDS),
                "p99 < bound ("
                + (
                    "met"
                    if delays and percentile(delays, 0.99) < DEFAULT_BOUND_SECONDS
                    else "not met"
                )
                + ")",
            ]
        ],
    )
    baseline = baseline_load.throughput
    base_cpu_ms = baseline_load.cpu_ms
    rows = []
    for result in (baseline_load, not_modified, changed):
        share = result.throughput / baseline if baseline else math.nan
        is_feed = result in (not_modified, changed)
        rows.append(
            [
                result.name,
                f"{result.throughput:,.0f}",
                f"{percentile(result.latencies, 0.50) * 1000:.1f}",
                f"{percentile(result.latencies, 0.99) * 1000:.1f}",
                str(result.errors),
                "n/a" if result.cpu_ms is None else f"{result.cpu_ms:.2f}",
                f"{share:.0%}",
                (f">= {FEED_TARGET:.0%} (" + ("met" if share >= FEED_TARGET else "below") + ")")
                if is_feed
                else "",
            ]
        )
    print(
        f"\nThe status feed with {feed_guards:,} simulated guards (distinct plans and ETags),"
        f" {args.concurrency} load threads, next to /healthz ({SLICES} interleaved slices each):"
    )
    print_table(
        [
            "scenario",
            "req/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "srv CPU ms/req",
            "vs /healthz",
            "target",
        ],
        rows,
    )
    for result in (baseline_load, not_modified, changed):
        if result.errors:
            print(f"  {result.name}: first error: {result.first_error}")
    if base_cpu_ms and not_modified.cpu_ms:
        print(f"  server CPU per poll: {not_modified.cpu_ms / base_cpu_ms:.1f}x /healthz's")
    capacity = not_modified.throughput * DEFAULT_BOUND_SECONDS / 2
    print(
        f"  at one poll every {DEFAULT_BOUND_SECONDS / 2:g} s, this server keeps up with about"
        f" {capacity:,.0f} running guards"
    )
    return 0 if blocked else 1
