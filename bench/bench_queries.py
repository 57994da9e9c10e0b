"""Issuance and refresh inside one process: SQL queries per request and time per request.

Django's test client on a temporary SQLite database, with no network and no load client, so
the figures are the server's own work: how many queries each request makes (the number to
keep small) and its time next to ``GET /healthz`` through the same client. ``--queries-profile``
adds a cProfile of 50-step issuance, the functions that took the most time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import secrets
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

from benchlib import heading, measure, print_table
from run import BENCH_POLICY, BENCH_TEAM, BENCH_USER, bench_plan


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--queries-profile",
        action="store_true",
        help="print a cProfile of in-process 50-step issuance",
    )


def _setup_django(folder: Path) -> None:
    import django
    from django.conf import settings

    if settings.configured:
        raise RuntimeError("bench_queries needs a process where Django is not set up yet")
    from cryptography.fernet import Fernet

    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "PLANGATE_ENV_FILE": os.devnull,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "DATABASE_URL": f"sqlite:///{folder / 'queries.sqlite3'}",
            "ALLOWED_HOSTS": "testserver",
            "PLANGATE_RATE_LIMIT": "1000000/sec",
            "STATIC_ROOT": str(folder),
            "LOG_LEVEL": "WARNING",
        }
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main(args: argparse.Namespace) -> int:
    heading("In-process: SQL queries and time per request (Django test client, SQLite)")
    with tempfile.TemporaryDirectory(prefix="plangate-bench-queries-") as tmp:
        _setup_django(Path(tmp))
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from members.services import agent_create, api_key_create, member_upsert, team_get_or_create
    from policies.services import policy_set

    team = team_get_or_create(slug=BENCH_TEAM)
    member_upsert(team=team, email=BENCH_USER, role="engineer", groups=["bench"])
    version = policy_set(team=team, slug="bench", document=BENCH_POLICY)
    agent = agent_create(team=team, name="bench", policy=version.policy)
    _, api_key = api_key_create(agent=agent)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key}")

    def post(path: str, body: dict, expected: int) -> dict:
        response = client.post(path, json.dumps(body), content_type="application/json")
        if response.status_code != expected:
            raise RuntimeError(f"{path}: {response.status_code} {response.content[:300]!r}")
        return response.json()

    first = post("/v1/plans", {"plan": bench_plan(2)}, 201)  # also creates the signing keys
    refresh_path = f"/v1/plans/{first['id']}/refresh"
    requests = [
        ("GET /healthz (baseline)", lambda: client.get("/healthz")),
        ("POST /v1/plans, 2 steps", lambda: post("/v1/plans", {"plan": bench_plan(2)}, 201)),
        ("POST /v1/plans, 50 steps", lambda: post("/v1/plans", {"plan": bench_plan(50)}, 201)),
        (
            "POST /v1/plans/{id}/refresh, 2 steps",
            lambda: post(refresh_path, {"token": first["token"]}, 200),
        ),
    ]
    rows = []
    baseline = None
    for name, call in requests:
        with CaptureQueriesContext(connection) as captured:
            call()
        # Transaction control (BEGIN/COMMIT/SAVEPOINT) is listed apart from real queries.
        statements = [query["sql"] for query in captured.captured_queries]
        control = sum(
            1 for sql in statements if sql.split(" ", 1)[0] in {"BEGIN", "COMMIT", "SAVEPOINT"}
        )
        timing = measure(name, call, seconds=1.0, max_iterations=2000)
        baseline = baseline or timing
        rows.append(
            [
                name,
                str(len(statements) - control),
                str(control),
                f"{timing.microseconds:,.0f}",
                f"{timing.microseconds / baseline.microseconds:.1f}x",
            ]
        )
    print_table(["request", "queries", "tx control", "us/request", "vs base"], rows)

    if getattr(args, "queries_profile", False):
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            post("/v1/plans", {"plan": bench_plan(50)}, 201)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print("\ncProfile, 200 x POST /v1/plans with 50 steps (cumulative time):")
        print(out.getvalue())
    return 0
