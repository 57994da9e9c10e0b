"""The cost of chaining the audit trail, per record, next to the cost of appending it.

Appends N records one by one (``record_append``, one INSERT in its own transaction, as a
door writes one per request), then seals them (``records_seal``: number, hash, UPDATE in
batches under the team's head lock), then verifies the chain (``verify_audit``'s reading).
Also the hash alone, in memory (RFC 8785 + SHA-256 of one record). Printed as microseconds
per record and as a ratio to appending, measured in the same run. Then the tables the
pages read held to the trail (plans.trail_coverage): N guard decisions stored through the
event intake, a plan's, and ``verify_audit``'s two readings of them, the chain and the
tables, per decision.

It runs in a child process with its own Django set-up (on a temporary SQLite file, or on a
throwaway PostgreSQL database when ``--database-url``/``DATABASE_URL`` names one), so it
leaves the other plug-ins' process alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
MAX_RECORDS = 200_000


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--audit-records",
        type=int,
        default=3000,
        help=f"records appended, sealed and verified (default 3000, at most {MAX_RECORDS:,})",
    )


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(BENCH_DIR))
    from benchlib import heading, print_table
    from run import fernet_key, is_postgres, throwaway_postgres

    count = max(1, min(args.audit_records, MAX_RECORDS))
    heading("Audit chain: sealing cost per record, next to appending it")
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="plangate-audit-")))
        if is_postgres(args.database_url):
            database_url = stack.enter_context(throwaway_postgres(args.database_url))
            database = "PostgreSQL (throwaway database)"
        else:
            database_url = f"sqlite:///{tmp / 'audit.sqlite3'}"
            database = "SQLite (temporary file, WAL)"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "PLANGATE_ENV_FILE": os.devnull,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "KEY_ENCRYPTION_KEY": fernet_key(),
            "DATABASE_URL": database_url,
            "STATIC_ROOT": str(tmp),
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
        child = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(count)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
    if child.returncode != 0:
        print(f"the audit bench failed:\n{child.stdout}{child.stderr}")
        return 1
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    append = figures["append"]
    rows = [
        [name, f"{figures[key]:,.1f}", f"{figures[key] / append:.2f}x"]
        for name, key in (
            ("append (record_append, own transaction)", "append"),
            ("seal (records_seal, batches of 1000)", "seal"),
            ("hash alone (RFC 8785 + SHA-256, in memory)", "hash"),
            ("verify (recompute the chain)", "verify"),
            ("verify a decision's chained record (intake's records)", "verify_chain"),
            ("verify the decision log against the trail", "verify_tables"),
        )
    ]
    print(f"database: {database}; {count:,} records of one team")
    print_table(["operation", "µs/record", "vs append"], rows)
    print(
        f"\nChaining costs {figures['seal'] / append:.2f}x the append per record, paid by the "
        "worker a few seconds later, off the request that appended the record."
    )
    return 0


def _child(count: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from audit.chain import record_hash
    from audit.models import AuditRecord
    from audit.services import record_append, records_seal
    from audit.verification import records_chain_verify
    from members.services import team_get_or_create

    team = team_get_or_create(slug="bench-audit")
    records_seal(team=team)  # whatever setting up the team recorded
    fields = {
        "kind": AuditRecord.Kind.DECISION,
        "actor": "agent:1",
        "agent_id": 1,
        "agent_name": "bench",
        "user": "bench@bench.test",
        "plan_id": "01JBENCHBENCHBENCHBENCHBEN",
        "plan_hash": "ab" * 32,
        "policy": "bench",
        "policy_version": 1,
        "code": "allowed",
        "rule": {"index": 0, "description": "read the docs"},
    }

    started = time.perf_counter()
    for number in range(count):
        record_append(team=team, details={"step": number % 7, "tool": "bench_read_0"}, **fields)
    append = (time.perf_counter() - started) / count

    started = time.perf_counter()
    sealed = records_seal(team=team).sealed
    seal = (time.perf_counter() - started) / max(1, sealed)

    sample = list(AuditRecord.objects.filter(team=team).order_by("-seq")[: min(count, 2000)])
    started = time.perf_counter()
    for record in sample:
        record_hash(record)
    hash_alone = (time.perf_counter() - started) / len(sample)

    started = time.perf_counter()
    report = records_chain_verify(team=team)
    verify = (time.perf_counter() - started) / max(1, report.sealed)
    if not report.intact:
        raise RuntimeError(f"the chain does not verify: {report.broken}")
    verify_chain, verify_tables = _tables(count)

    micro = 1e6
    print(
        json.dumps(
            {
                "append": append * micro,
                "seal": seal * micro,
                "hash": hash_alone * micro,
                "verify": verify * micro,
                "verify_chain": verify_chain * micro,
                "verify_tables": verify_tables * micro,
            }
        )
    )


def _tables(count: int) -> tuple[float, float]:
    """Seconds per decision to verify a team's chain and then its tables (decision log,
    plan, tokens) against it, for ``count`` decisions stored through the intake."""
    from audit.services import records_seal
    from audit.verification import records_chain_verify, tables_verify
    from members.services import agent_create, member_upsert, team_get_or_create
    from plans.event_intake import plan_events_record
    from plans.services import plan_issue
    from policies.services import policy_set

    team = team_get_or_create(slug="bench-tables")
    member_upsert(team=team, email="bench@bench.test", name="Bench")
    version = policy_set(
        team=team,
        slug="bench",
        document={"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": ["*"]}]},
    )
    agent = agent_create(team=team, name="bench", policy=version.policy)
    issued = plan_issue(
        agent=agent,
        document={
            "version": 1,
            "goal": "bench",
            "user": "bench@bench.test",
            "steps": [{"tool": "bench_read", "maxCalls": 1_000_000}],
        },
    )
    for first in range(0, count, 100):
        events = [
            {
                "at": f"2026-12-05T09:{(n // 60) % 60:02d}:{n % 60:02d}.{n:06d}Z"[-27:],
                "tool": "bench_read",
                "decision": "allowed",
                "step": 0,
            }
            for n in range(first, min(count, first + 100))
        ]
        plan_events_record(agent=agent, plan_id=issued.plan.id, batch={"events": events})
    records_seal(team=team)
    started = time.perf_counter()
    records_chain_verify(team=team)
    chain = (time.perf_counter() - started) / count
    started = time.perf_counter()
    tables = tables_verify(team=team)
    elapsed = (time.perf_counter() - started) / count
    if tables.problems:
        raise RuntimeError(f"the tables disagree: {tables.problems[:3]}")
    return chain, elapsed


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    _child(int(sys.argv[2]))
