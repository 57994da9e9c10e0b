"""Each framework bypass's own step, timed against the framework's way (decision 0061).

Rule (b) of docs/decisions/0061 keeps a hand-built statement or a skipped framework step
only where its own step is at least twice as fast as Django's or DRF's way, on PostgreSQL.
This script times both ways of each step in one process (the reads on the request path,
the counter's commit, the token body, the audit seals), against a
throwaway test database next to ``DATABASE_URL`` (``test_<name>_steps``, created and
dropped here), then the CPU of whole requests through Django's test client:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/plangate \
        .venv/bin/python bench/shortcut_steps.py [--only TEXT] [--wall] [--requests-only]

It prints the CPU per call of each way (this process and its PostgreSQL backend, read
from /proc: the machine is shared and wall time stretches with others' load; ``--wall``
for a step that waits, such as a commit's WAL flush) and their ratio. Like every
benchmark it prints and never fails on a figure. It is not a `make bench` plug-in (those
are ``bench_*.py``): it needs PostgreSQL and takes a few minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchlib import heading, measure, print_table  # noqa: E402


def _setup_django() -> None:
    import django
    from cryptography.fernet import Fernet

    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database: rule (b) is measured there")
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "PLANGATE_ENV_FILE": os.devnull,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "ALLOWED_HOSTS": "testserver",
            "PLANGATE_RATE_LIMIT": "1000000/sec",
            "LOG_LEVEL": "WARNING",
        }
    )
    django.setup()
    from django.conf import settings

    database = settings.DATABASES["default"]
    database.setdefault("TEST", {})["NAME"] = f"test_{database['NAME']}_steps"


@dataclass(frozen=True)
class IssuedBench:
    """The bench team's member, policy version, agent and API key, with the 2-step plan
    issued through the API: what every step of both scripts reads or writes."""

    team: Any
    member: Any
    version: Any
    agent: Any
    plaintext: str
    client: Any
    issued: dict[str, Any]


def issued_bench_plan() -> IssuedBench:
    from django.test import Client
    from run import BENCH_POLICY, BENCH_TEAM, BENCH_USER, bench_plan

    from members.services import agent_create, api_key_create, member_upsert, team_get_or_create
    from policies.services import policy_set

    team = team_get_or_create(slug=BENCH_TEAM)
    member = member_upsert(team=team, email=BENCH_USER, role="engineer", groups=["bench"])
    version = policy_set(team=team, slug="bench", document=BENCH_POLICY)
    agent = agent_create(team=team, name="bench", policy=version.policy)
    _, plaintext = api_key_create(agent=agent)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    response = client.post(
        "/v1/plans", json.dumps({"plan": bench_plan(2)}), content_type="application/json"
    )
    if response.status_code != 201:
        raise RuntimeError(f"issuance failed: {response.status_code} {response.content[:300]!r}")
    return IssuedBench(team, member, version, agent, plaintext, client, response.json())


def _steps() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """(step, the framework's way, the shortcut) for each read step on the request path."""
    from django.db import connection
    from django.utils import timezone
    from run import BENCH_USER, bench_plan

    from guard.jwk import b64url_decode
    from kernel.models import RateLimitWindow
    from kernel.sql import counter_hits
    from members.models import API_KEY_FORMAT, ApiKey
    from plans.models import Plan
    from plans.selectors import plan_for_signing, signing_context_read
    from plans.services import plan_get_for_agent
    from plans.status_feed import status_queryset
    from tests.plans.test_signing_context import orm_answer

    bench = issued_bench_plan()
    member, agent = bench.member, bench.agent
    plaintext, client, issued = bench.plaintext, bench.client, bench.issued
    plan_id = issued["id"]
    kid = json.loads(b64url_decode(issued["token"].split(".")[0], "header"))["kid"]
    lookup_id, secret = API_KEY_FORMAT.parse(plaintext) or ("", "")
    bucket = "auth_failure:127.0.0.1:60:1"
    RateLimitWindow.objects.create(bucket=bucket, window_end=2**40, hits=1)

    def key_orm() -> object:
        key = (
            ApiKey.objects.usable(timezone.now())
            .select_related("agent", "agent__team", "agent__policy")
            .filter(lookup_id=lookup_id)
            .first()
        )
        assert key is not None and API_KEY_FORMAT.matches(key.secret_hash, secret)
        return key

    def peek_orm() -> object:
        return RateLimitWindow.objects.filter(bucket=bucket).values_list("hits", flat=True).first()

    def status_orm() -> object:
        rows = status_queryset(plan_id=plan_id, lookup_id=lookup_id, kid=kid, now=timezone.now())
        return next(iter(rows), None)  # the queryset is sliced to one row already

    def locked_orm() -> object:  # run inside one transaction (main), as a refresh runs it
        return list(
            Plan.objects.select_for_update()
            .filter(pk=plan_id)
            .order_by()
            .values_list("status", flat=True)
        )

    table = connection.ops.quote_name(RateLimitWindow._meta.db_table)
    upsert = (
        f"INSERT INTO {table} (bucket, window_end, hits) {{}} "
        f"ON CONFLICT (bucket) DO UPDATE SET hits = {table}.hits + 1 RETURNING hits"
    )

    def counter_hit(source: str) -> Callable[[], object]:
        def hit() -> object:
            with connection.cursor() as cursor:
                cursor.execute(upsert.format(source), ["bench-counter", 2**40])
                return cursor.fetchone()

        return hit

    steps: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "counter upsert, synchronous_commit off",
            counter_hit("VALUES (%s, %s, 1)"),
            counter_hit(
                "SELECT %s, %s, 1 FROM (SELECT set_config('synchronous_commit', 'off', true)) AS c"
            ),
        ),
        ("failure-budget peek (kernel.sql.counter_hits)", peek_orm, lambda: counter_hits(bucket)),
        (
            "signing context (plans.selectors)",
            lambda: orm_answer(agent, email=BENCH_USER),
            lambda: signing_context_read(agent=agent, member_email=BENCH_USER),
        ),
        (
            "plan for signing (plans.selectors)",
            lambda: plan_get_for_agent(agent=agent, plan_id=plan_id),
            lambda: plan_for_signing(agent=agent, plan_id=plan_id),
        ),
    ]
    from members.services import api_key_authenticate
    from plans.status_feed import _status_row

    plan_table = connection.ops.quote_name(Plan._meta.db_table)
    locked_sql = f"SELECT status FROM {plan_table} WHERE id = %s FOR UPDATE"  # noqa: S608

    def locked_statement() -> object:  # what any statement built once costs
        with connection.cursor() as cursor:
            cursor.execute(locked_sql, [plan_id])
            return cursor.fetchone()

    steps += [
        ("API key read + compare", key_orm, lambda: api_key_authenticate(plaintext)),
        (
            "status-feed row",
            status_orm,
            lambda: _status_row(plan_id=plan_id, lookup_id=lookup_id, kid=kid, now=timezone.now()),
        ),
        ("plan status FOR UPDATE", locked_orm, locked_statement),
    ]
    from audit.models import AuditRecord
    from audit.services import _store_seals
    from plans.serializers import IntentTokenSerializer, intent_token_body
    from plans.services import plan_issue

    token = plan_issue(agent=agent, document=bench_plan(2))
    records = list(AuditRecord.objects.order_by("pk")[:20])
    sealed_at = timezone.now()
    for record in records:
        record.sealed_at = sealed_at
    steps += [
        (
            "token body (intent_token_body)",
            lambda: IntentTokenSerializer(token).data,
            lambda: intent_token_body(token),  # type: ignore[arg-type]
        ),
        (
            f"audit seals stored ({len(records)} records)",
            lambda: AuditRecord.objects.bulk_update(
                records, ["seq", "prev_hash", "hash", "sealed_at"]
            ),
            lambda: _store_seals(records, sealed_at),
        ),
    ]

    def post(path: str, body: dict, expected: int) -> object:
        answer = client.post(path, json.dumps(body), content_type="application/json")
        if answer.status_code != expected:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.content[:300]!r}")
        return answer

    _REQUESTS[:] = [
        ("GET /healthz", lambda: client.get("/healthz")),
        ("POST /v1/plans, 2 steps", lambda: post("/v1/plans", {"plan": bench_plan(2)}, 201)),
        (
            "POST /v1/plans/{id}/refresh",
            lambda: post(f"/v1/plans/{plan_id}/refresh", {"token": issued["token"]}, 200),
        ),
        (
            "GET /v1/plans/{id}/status",
            lambda: client.get(f"/v1/plans/{plan_id}/status", {"kid": kid}),
        ),
    ]
    del member
    return steps


# Whole requests through Django's test client, for the cost of the steps in their request.
_REQUESTS: list[tuple[str, Callable[[], object]]] = []


def _backend_cpu_seconds(pid: int) -> float:
    """The CPU time the database server's process for our connection has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_call(function: Callable[[], object], *, seconds: float) -> float:
    """Microseconds of CPU per call, this process's and its PostgreSQL backend's together.

    CPU time, not wall time: the machine is shared, and another load's bursts stretch the
    wall clock of whichever way runs during them, but not the CPU either way uses."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    for _ in range(20):
        function()  # warm caches, imports and the statement caches
    calls, started = 0, time.perf_counter()
    own, backend = time.process_time(), _backend_cpu_seconds(pid)
    while time.perf_counter() - started < seconds and calls < 50_000:
        function()
        calls += 1
    used = time.process_time() - own + _backend_cpu_seconds(pid) - backend
    return used / calls * 1e6


def _wall_per_call(function: Callable[[], object], *, seconds: float) -> float:
    return measure("", function, seconds=seconds, max_iterations=50_000).microseconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per way and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two ways")
    parser.add_argument("--requests-only", action="store_true", help="only the whole requests' CPU")
    parser.add_argument("--only", default="", help="only the steps whose name holds this text")
    parser.add_argument(
        "--wall",
        action="store_true",
        help="wall time instead of CPU (for a wait, such as a commit's WAL flush)",
    )
    args = parser.parse_args()
    _setup_django()
    from django.db import transaction
    from django.test.utils import setup_databases, teardown_databases

    heading("Each shortcut's own step against the framework's way (PostgreSQL, CPU per call)")
    databases = setup_databases(verbosity=0, interactive=False)
    try:
        rows = []
        steps = _steps()
        chosen = [step for step in steps if args.only in step[0]]
        cost = _wall_per_call if args.wall else cpu_per_call
        for name, framework, shortcut in [] if args.requests_only else chosen:
            # Alternate the two ways and keep each one's least CPU per call.
            slow = fast = float("inf")
            # A read FOR UPDATE runs inside a transaction, as a refresh runs it.
            locked = transaction.atomic() if "FOR UPDATE" in name else contextlib.nullcontext()
            with locked:
                for _ in range(args.rounds):
                    slow = min(slow, cost(framework, seconds=args.seconds))
                    fast = min(fast, cost(shortcut, seconds=args.seconds))
            rows.append([name, f"{slow:,.0f}", f"{fast:,.0f}", f"{slow / fast:.2f}x"])
        if rows:
            print_table(["step", "framework us", "shortcut us", "ratio"], rows)
        rows = []
        for name, request in _REQUESTS:
            cpu = min(cpu_per_call(request, seconds=args.seconds) for _ in range(args.rounds))
            rows.append([name, f"{cpu:,.0f}"])
        print()
        print_table(["request (test client)", "CPU us"], rows)
    finally:
        teardown_databases(databases, verbosity=0)
    print(
        "CPU per call of this process and its PostgreSQL backend together; ratio = framework's"
        " way / shortcut. Rule (b) of decision 0061 asks for at least 2.00x."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
