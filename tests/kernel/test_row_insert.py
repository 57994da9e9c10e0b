"""The inserts of kernel.sql store a row as the ORM stores it: row_insert as
save(force_insert=True), setting an automatic primary key as save() does; row_insert_if_new
as save() unless the row is stored already; rows_insert as bulk_create. The plan and token
rows are held to save()'s in tests/plans/test_row_insert.py, the intake's events and
records to bulk_create's in tests/plans/test_plan_events_insert.py; the audit record
(audit.services.record_append) here."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_append, record_build
from kernel.sql import row_insert, row_insert_if_new, rows_insert
from plans.models import Plan, PlanEventBatch
from tests.conftest import plan_document

NOW = timezone.now()


def _record(team, **overrides) -> AuditRecord:
    fields = {
        "team": team,
        "kind": AuditRecord.Kind.PLAN_ISSUED,
        "at": NOW - timedelta(seconds=3),
        "actor": "agent:01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "agent_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "agent_name": "bot",
        "user": "alice@acme.dev",
        "plan_id": "01ARZ3NDEKTSV4RRFFQ69G5FAW",
        "plan_hash": "b" * 64,
        "policy": "default",
        "policy_version": 3,
        "rule": {"index": 0, "description": "allow github_*"},
        "details": {"goal": "Summarise", "steps": 2, "ttl": 900, "nested": [1, "two", None]},
    }
    return record_build(**{**fields, **overrides})


def _stored(pk) -> dict:
    row = AuditRecord.objects.filter(pk=pk).values().get()
    row.pop("id")
    return row


def test_an_audit_record_is_stored_as_save_stores_it(team):
    by_save = _record(team)
    by_save.save(force_insert=True)
    by_insert = _record(team)

    row_insert(by_insert)

    assert by_insert.pk is not None and by_insert.pk != by_save.pk
    assert not by_insert._state.adding
    assert _stored(by_insert.pk) == _stored(by_save.pk)
    assert _stored(by_insert.pk)["details"]["nested"] == [1, "two", None]


def test_defaults_and_nulls_are_stored_as_save_stores_them(team):
    by_save = _record(team, agent_id=None, policy_version=None, rule=None, details=None)
    by_save.save(force_insert=True)
    by_insert = _record(team, agent_id=None, policy_version=None, rule=None, details=None)

    row_insert(by_insert)

    stored = _stored(by_insert.pk)
    assert stored == _stored(by_save.pk)
    assert stored["rule"] is None and stored["details"] == {} and stored["seq"] is None


def test_record_append_answers_the_stored_record_with_its_primary_key(team):
    first = record_append(team=team, kind=AuditRecord.Kind.CHANGE, actor="admin")
    second = record_append(team=team, kind=AuditRecord.Kind.CHANGE, actor="admin")

    assert first.pk is not None and second.pk is not None and first.pk != second.pk
    assert AuditRecord.objects.get(pk=second.pk).actor == "admin"


def test_a_row_whose_primary_key_is_given_keeps_it(team):
    record = _record(team)
    record.pk = 987654

    row_insert(record)

    assert AuditRecord.objects.get(pk=987654).plan_hash == "b" * 64


@pytest.fixture
def plan(agent, member, policy_version) -> Plan:
    document = plan_document()
    plan = Plan(
        team=agent.team,
        agent=agent.agent,
        member=member,
        goal=document["goal"],
        document=document,
        hash="a" * 64,
        policy_version=policy_version,
        created_at=NOW,
        expires_at=NOW + timedelta(days=1),
    )
    row_insert(plan)
    return plan


def _batch(plan: Plan, seq: int) -> PlanEventBatch:
    return PlanEventBatch(
        plan=plan, stream="s" * 32, seq=seq, received_at=NOW, events=3, lost=1, end_outcome="x"
    )


def test_a_new_row_is_inserted_if_new_as_save_stores_it(plan):
    by_save = _batch(plan, 1)
    by_save.save(force_insert=True)
    by_insert = _batch(plan, 2)

    assert row_insert_if_new(by_insert) is True

    assert by_insert.pk is not None and by_insert.pk != by_save.pk
    assert not by_insert._state.adding
    stored = {row.pop("seq"): row for row in _batches(plan)}
    assert stored[1] == stored[2]


def test_a_row_stored_before_is_not_inserted_again_and_the_transaction_goes_on(plan):
    row_insert_if_new(_batch(plan, 1))
    again = _batch(plan, 1)
    again.events = 99

    with transaction.atomic():
        assert row_insert_if_new(again) is False
        assert again.pk is None and again._state.adding
        row_insert_if_new(_batch(plan, 2))

    assert [row["events"] for row in _batches(plan)] == [3, 3]


def _batches(plan: Plan) -> list[dict]:
    rows = list(PlanEventBatch.objects.filter(plan=plan).order_by("seq").values())
    for row in rows:
        row.pop("id")
    return rows


VARYING = ("at", "code", "policy_version", "rule", "details")


def test_rows_are_inserted_as_bulk_create_stores_them(team):
    template = _record(team, kind=AuditRecord.Kind.DECISION, plan_id="p" * 26)
    rows = [
        (NOW - timedelta(seconds=index), f"code-{index}", index or None, rule, details)
        for index, (rule, details) in enumerate(
            [
                ({"index": 0, "description": 'allow é "x"'}, {"n": 1, "ok": True}),
                (None, {"nested": {"a": [1, 2.5, None]}, "flag": False}),
                ({"index": None, "description": "\u2028"}, {}),
            ]
        )
    ]
    AuditRecord.objects.bulk_create(
        _record(
            team,
            kind=AuditRecord.Kind.DECISION,
            plan_id="o" * 26,
            **dict(zip(VARYING, row, strict=True)),
        )
        for row in rows
    )

    rows_insert(template, VARYING, rows)

    def stored(plan_id: str) -> list[dict]:
        found = list(AuditRecord.objects.filter(plan_id=plan_id).order_by("id").values())
        for row in found:
            row.pop("id"), row.pop("plan_id")
        return found

    assert stored("p" * 26) == stored("o" * 26)
    assert [row["rule"] for row in stored("p" * 26)][1] is None
