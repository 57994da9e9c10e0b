"""Each hand-built INSERT's own step, timed against the framework's way (decision 0061).

The writes' half of ``bench/shortcut_steps.py``, measured the same way (its
``cpu_per_call``: the CPU of this process and of its PostgreSQL backend per call, the two
ways alternated, each one's least kept) on a throwaway test database next to
``DATABASE_URL``, inside one transaction that is rolled back, as the intake and issuance
run their inserts inside theirs:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/plangate \\
        .venv/bin/python bench/shortcut_write_steps.py [--seconds 2] [--rounds 3]

The builders of ``kernel.sql``: ``row_insert`` against ``save(force_insert=True)``,
``row_insert_if_new`` against a savepoint around ``save()``, ``rows_insert`` (COPY)
against ``bulk_create``, JSON written as its text against ``JSONField.get_db_prep_save``,
and the one value preparation against ``get_db_prep_save`` on every value. Prints; never
fails on a figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import shortcut_steps
from benchlib import heading, print_table

BATCH = 500


def _event(index: int) -> dict[str, Any]:
    return {
        "at": f"2026-11-30T09:00:{index % 60:02d}.250Z",
        "tool": f"bench_read_{index % 2}",
        "decision": "allowed",
        "step": index % 2,
        "reason": "matched step",
        "rule": {"index": 0, "description": "allow bench_read_* (rules[0])"},
        "policyVersion": 1,
        "argsDigest": "5" * 64,
    }


def _steps() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """(step, the framework's way, kernel.sql's) for each hand-built INSERT."""
    from django.db import connection, transaction
    from django.db.models import Model
    from django.utils import timezone
    from run import BENCH_USER

    from audit.models import AuditRecord
    from audit.services import record_build
    from guard.events import validate_event_batch
    from kernel.sql import (
        _preparation,
        _prepared,
        json_text,
        row_insert,
        row_insert_if_new,
        rows_insert,
    )
    from plans.event_intake import (
        DECISION_RECORD_FIELDS,
        EVENT_FIELDS,
        _common,
        _decision_fields,
        _event_fields,
        _policy_versions,
    )
    from plans.models import Plan, PlanEvent, PlanEventBatch, PlanToken

    bench = shortcut_steps.issued_bench_plan()
    team, member, agent = bench.team, bench.member, bench.agent
    plan = Plan.objects.select_related("policy_version__policy", "member", "team").get(
        pk=bench.issued["id"]
    )
    now = timezone.now()
    numbers = itertools.count(1)

    record = record_build(
        team=team,
        kind=AuditRecord.Kind.PLAN_ISSUED,
        at=now,
        actor=f"agent:{agent.pk}",
        agent_id=agent.pk,
        agent_name="bench",
        user=BENCH_USER,
        plan_id=plan.pk,
        plan_hash=plan.hash,
        policy="bench",
        policy_version=1,
        details={"goal": "bench", "steps": 2, "ttl": 900, "kid": "k" * 43},
    )
    token = PlanToken(
        plan=plan,
        kind=PlanToken.Kind.REFRESH,
        kid="k" * 43,
        issued_at=now,
        expires_at=now + timedelta(minutes=15),
        policy_version=plan.policy_version,
        role="engineer",
        groups=["bench"],
    )
    another_plan = Plan(
        team=team,
        agent=agent,
        member=member,
        goal=plan.goal,
        document=plan.document,
        hash=plan.hash,
        policy_version=plan.policy_version,
        role="engineer",
        groups=["bench"],
        created_at=now,
        expires_at=now + timedelta(minutes=15),
    )
    batch = PlanEventBatch(plan=plan, stream="b" * 32, received_at=now, events=BATCH)

    def again(instance: Model, insert: Callable[[Any], object]) -> Callable[[], object]:
        """``insert`` of ``instance`` as a new row at every call (a new key, a new seq)."""

        def step() -> object:
            if isinstance(instance, Plan):
                instance.pk = f"{next(numbers):026d}"
            else:
                instance.pk = None
            if isinstance(instance, PlanEventBatch):
                instance.seq = next(numbers)
            instance._state.adding = True
            return insert(instance)

        return step

    def save(instance: Model) -> object:
        instance.save(force_insert=True)
        return instance

    def save_in_savepoint(instance: Model) -> object:  # the ORM's way to "insert if new"
        with transaction.atomic():
            instance.save(force_insert=True)
        return True

    valid = validate_event_batch({"events": [_event(i) for i in range(BATCH)]}, steps=2)
    versions = _policy_versions(plan, valid.events)
    decided = [versions.decided_under(event) for event in valid.events]
    received = PlanEventBatch.objects.create(plan=plan, stream="r" * 32, seq=1, received_at=now)
    pairs = list(zip(valid.events, decided, strict=True))
    event_rows = [_event_fields(event, version_id, True) for event, version_id in pairs]
    record_rows = [_decision_fields(event, version_id, versions) for event, version_id in pairs]
    common = _common(plan, agent)
    record_template = record_build(**common, kind=AuditRecord.Kind.DECISION)
    event_template = PlanEvent(plan=plan, batch=received)

    def events_bulk_create() -> object:
        events = []
        for row in event_rows:
            fields = dict(zip(EVENT_FIELDS, row, strict=True))
            fields["decided_under_id"] = fields.pop("decided_under")
            events.append(PlanEvent(plan=plan, batch=received, **fields))
        return PlanEvent.objects.bulk_create(events)

    def records_bulk_create() -> object:
        return AuditRecord.objects.bulk_create(
            [
                record_build(
                    **common,
                    kind=AuditRecord.Kind.DECISION,
                    **dict(zip(DECISION_RECORD_FIELDS, row, strict=True)),
                )
                for row in record_rows
            ]
        )

    details = AuditRecord._meta.get_field("details")
    json_values = [row[4] for row in record_rows] + [row[5] for row in record_rows]
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE json_copy (v jsonb)")

    def json_copy(convert: Callable[[Any], object]) -> Callable[[], object]:
        def step() -> object:
            with (
                connection.cursor() as cursor,
                cursor.cursor.copy("COPY json_copy (v) FROM STDIN") as copy,
            ):
                for value in json_values:
                    copy.write_row((convert(value),))
            return None

        return step

    by_name = {field.name: field for field in PlanEvent._meta.concrete_fields}
    event_fields = [by_name[name] for name in EVENT_FIELDS]
    preparations = [_preparation(field) for field in event_fields]

    return [
        ("row_insert: audit record", again(record, save), again(record, row_insert)),
        ("row_insert: plan token", again(token, save), again(token, row_insert)),
        ("row_insert: plan", again(another_plan, save), again(another_plan, row_insert)),
        (
            "row_insert_if_new: event batch row",
            again(batch, save_in_savepoint),
            again(batch, row_insert_if_new),
        ),
        (
            f"rows_insert: {BATCH} events (COPY)",
            events_bulk_create,
            lambda: rows_insert(event_template, EVENT_FIELDS, event_rows),
        ),
        (
            f"rows_insert: {BATCH} decision records (COPY)",
            records_bulk_create,
            lambda: rows_insert(record_template, DECISION_RECORD_FIELDS, record_rows),
        ),
        (
            f"json_text: {len(json_values)} JSON values into COPY",
            json_copy(lambda value: details.get_db_prep_save(value, connection)),
            json_copy(json_text),
        ),
        (
            f"json.dumps text (for comparison): {len(json_values)} values into COPY",
            json_copy(lambda value: details.get_db_prep_save(value, connection)),
            json_copy(json.dumps),
        ),
        (
            f"value preparation: {BATCH} event rows",
            lambda: [
                [
                    field.get_db_prep_save(value, connection)
                    for field, value in zip(event_fields, row, strict=True)
                ]
                for row in event_rows
            ],
            lambda: [
                [
                    _prepared(preparation, value, connection)
                    for preparation, value in zip(preparations, row, strict=True)
                ]
                for row in event_rows
            ],
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per way and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two ways")
    parser.add_argument("--only", default="", help="only the steps whose name holds this text")
    args = parser.parse_args()
    shortcut_steps._setup_django()
    from django.db import transaction
    from django.test.utils import setup_databases, teardown_databases

    heading("Each hand-built INSERT's own step against the framework's way (PostgreSQL, CPU)")
    databases = setup_databases(verbosity=0, interactive=False)
    try:
        rows = []
        with transaction.atomic():
            for name, framework, shortcut in _steps():
                if args.only not in name:
                    continue
                slow = fast = float("inf")
                for _ in range(args.rounds):
                    slow = min(slow, shortcut_steps.cpu_per_call(framework, seconds=args.seconds))
                    fast = min(fast, shortcut_steps.cpu_per_call(shortcut, seconds=args.seconds))
                rows.append([name, f"{slow:,.0f}", f"{fast:,.0f}", f"{slow / fast:.2f}x"])
            transaction.set_rollback(True)
        print_table(["step", "framework us", "kernel.sql us", "ratio"], rows)
    finally:
        teardown_databases(databases, verbosity=0)
    print(
        "CPU per call of this process and its PostgreSQL backend together; ratio = framework's"
        " way / kernel.sql's. Rule (b) of decision 0061 asks for at least 2.00x."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
