"""Event intake: ``POST /v1/plans/{id}/events`` with batches of 500 decisions, next to
``/healthz`` in the same run (the issue's target: 10,000 events per second per core).

Against Plangate under gunicorn, started as the HTTP benchmark starts it
(``run.running_server``), on SQLite and, when ``--database-url`` / ``$DATABASE_URL`` names
PostgreSQL, on PostgreSQL too. Each load thread declares a plan of its own and posts numbered
batches of one stream to it (``seq`` 1, 2, 3...), so every batch is new and stored: what a
fleet of guards reporting at once does. Figures:

* events/s: decisions stored per second of wall time, by every worker together;
* events/s per server core: decisions stored per second of gunicorn's own CPU time (its
  workers' user + system time from /proc, as the HTTP benchmark measures it), which is the
  figure that does not depend on how many cores the machine lends the server;
* p50 / p99 of one batch's round trip.

Prints; never fails on a figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import httpx

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))  # the repository root, for the guard

from guard.events import guard_event_json  # noqa: E402

TARGET_EVENTS_PER_CORE_SECOND = 10_000
DEFAULT_BATCH_SIZE = 500
#: a 64-character digest, as a guard sends for JSON arguments
ARGS_DIGEST = "5" * 64


def add_arguments(parser: argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--intake-batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help=f"decisions per batch (default {DEFAULT_BATCH_SIZE}, the guard's largest)",
    )


def events_json(count: int) -> bytes:
    """`count` decisions as the guard's reporter writes them, as one JSON array."""
    events = [
        guard_event_json(
            at=1_795_000_000.0 + index / 1000,
            tool=f"bench_read_{index % 2}",
            decision="allowed",
            step=index % 2,
            reason="matched step",
            args_digest=ARGS_DIGEST,
            rule_index=0,
            rule_description="allow bench_read_* (rules[0])",
            policy_version=1,
        )
        for index in range(count)
    ]
    return json.dumps(events, separators=(",", ":")).encode()


def declare_plans(server, count: int) -> list[str]:
    import run

    body = json.dumps({"plan": run.bench_plan(2)}).encode()
    headers = {"Authorization": f"Bearer {server.api_key}", "Content-Type": "application/json"}
    ids = []
    with httpx.Client(base_url=server.base_url, timeout=run.REQUEST_TIMEOUT_SECONDS) as client:
        for _ in range(count):
            response = client.post("/v1/plans", content=body, headers=headers)
            if response.status_code != 201:
                raise RuntimeError(f"cannot declare a plan: {response.status_code} {response.text}")
            ids.append(response.json()["id"])
    return ids


def one_database(args: argparse.Namespace, batch_size: int) -> list[list[str]]:
    """The baseline and the intake on the database `args` names; the table's rows."""
    import run
    from benchlib import percentile

    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="plangate-intake-") as tmp,
        run.running_server(args, Path(tmp)) as server,
    ):
        print(
            f"database: {server.database}; gunicorn: {args.workers} sync worker(s); "
            f"clients: {args.concurrency} threads; {args.warmup:g} s warm-up + "
            f"{args.duration:g} s per scenario"
        )
        plans = declare_plans(server, args.concurrency)
        events = events_json(batch_size)
        # One stream per thread; the thread's turn numbers its batches from 1.
        streams = [f"bench-intake-stream-{index:04d}" for index in range(args.concurrency)]

        def post_batch(client: httpx.Client, index: int, turn: int) -> httpx.Response:
            body = b'{"stream":"%s","seq":%d,"events":%s}' % (
                streams[index].encode(),
                turn + 1,
                events,
            )
            return client.post(f"/v1/plans/{plans[index]}/events", content=body)

        scenarios = [
            ("GET /healthz (baseline)", 1, 200, lambda c, i, t: c.get("/healthz")),
            (f"POST /v1/plans/{{id}}/events, {batch_size} events", batch_size, 202, post_batch),
        ]
        baseline_per_core = None
        for name, events_per_request, expected, send in scenarios:
            figures = run.drive_load(
                server,
                concurrency=args.concurrency,
                warmup=args.warmup,
                duration=min(args.duration, run.MAX_SCENARIO_SECONDS),
                headers={
                    "Authorization": f"Bearer {server.api_key}",
                    "Content-Type": "application/json",
                },
                send=send,
                expected_status=expected,
            )
            requests = len(figures.latencies)
            per_second = requests / args.duration
            cpu = figures.server_cpu
            per_core = requests / cpu if cpu else None
            if baseline_per_core is None:
                baseline_per_core = per_core
            items = requests * events_per_request
            items_per_core = items / cpu if cpu else None
            verdict = ""
            if events_per_request > 1 and items_per_core is not None:
                met = items_per_core >= TARGET_EVENTS_PER_CORE_SECOND
                verdict = f">= {TARGET_EVENTS_PER_CORE_SECOND:,} ({'met' if met else 'below'})"
            rows.append(
                [
                    name,
                    f"{per_second:,.0f}",
                    f"{items / args.duration:,.0f}",
                    "n/a" if items_per_core is None else f"{items_per_core:,.0f}",
                    f"{percentile(figures.latencies, 0.50) * 1000:.1f}",
                    f"{percentile(figures.latencies, 0.99) * 1000:.1f}",
                    str(figures.errors),
                    "n/a" if cpu is None or not requests else f"{cpu / requests * 1000:.2f}",
                    "n/a"
                    if per_core is None or not baseline_per_core
                    else f"{per_core / baseline_per_core:.1%}",
                    verdict,
                ]
            )
            if figures.errors:
                print(f"  {name}: first error: {figures.first_error}")
        log = server.log_path.read_text().strip()
        if log:
            print(f"gunicorn log (last lines):\n{log[-2000:]}")
    return rows


def main(args: argparse.Namespace) -> int:
    import run
    from benchlib import heading, print_table

    batch_size = max(1, min(args.intake_batch_size, 500))
    heading(f"Event intake: batches of {batch_size} decisions, next to /healthz")
    databases = [argparse.Namespace(**{**vars(args), "database_url": None})]
    if run.is_postgres(args.database_url):
        databases.append(args)
    for database_args in databases:
        rows = one_database(database_args, batch_size)
        print_table(
            [
                "scenario",
                "req/s",
                "events/s",
                "events/s per srv core",
                "p50 ms",
                "p99 ms",
                "errors",
                "srv CPU ms/req",
                "req per CPU-s vs base",
                "target",
            ],
            rows,
        )
        print()
    print(
        "'events/s per srv core' is decisions stored per second of gunicorn's own CPU time "
        "(its workers, from /proc); the database server's CPU is not in it (PostgreSQL runs "
        "as its own processes; SQLite runs inside the workers, so there it is). The load "
        "client shares the machine's cores."
    )
    return 0
