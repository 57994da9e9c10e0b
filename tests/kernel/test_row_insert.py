"""kernel.row_insert stores a row as save(force_insert=True) stores it, and sets an automatic
primary key as save() does. The plan and token rows are held to save()'s in
tests/plans/test_row_insert.py; the audit record (audit.services.record_append) here."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_append, record_build
from kernel.row_insert import row_insert

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
