"""kernel.sql.row_insert, by which an issuance and a refresh store their plan and token rows,
stores them exactly as the ORM's save() does: every column the same, JSON, dates and
defaults included."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from kernel.sql import row_insert
from plans.models import Plan, PlanToken
from tests.conftest import plan_document

NOW = timezone.now()


def _plan(agent, member, policy_version, **overrides) -> Plan:
    now = NOW
    document = plan_document()
    fields = {
        "team": agent.team,
        "agent": agent.agent,
        "member": member,
        "goal": document["goal"],
        "document": document,
        "hash": "a" * 64,
        "policy_version": policy_version,
        "role": "engineer",
        "groups": ["oncall", "platform"],
        "created_at": now,
        "expires_at": now + timedelta(days=1),
    }
    return Plan(**{**fields, **overrides})


def _stored(model, pk) -> dict:
    row = model.objects.filter(pk=pk).values().get()
    row.pop("id")
    return row


def test_a_plan_is_stored_as_save_stores_it(agent, member, policy_version):
    by_save = _plan(agent, member, policy_version)
    by_save.save(force_insert=True)
    by_insert = _plan(agent, member, policy_version, role=None, groups=[])
    by_save_without_role = _plan(agent, member, policy_version, role=None, groups=[])
    by_save_without_role.save(force_insert=True)

    row_insert(by_insert)

    assert not by_insert._state.adding
    assert _stored(Plan, by_insert.pk) == _stored(Plan, by_save_without_role.pk)
    assert _stored(Plan, by_insert.pk)["document"] == plan_document()
    assert _stored(Plan, by_save.pk)["groups"] == ["oncall", "platform"]


def test_a_token_row_is_stored_as_create_stores_it(agent, member, policy_version):
    plan = _plan(agent, member, policy_version)
    row_insert(plan)
    now = timezone.now()
    fields = {
        "plan": plan,
        "kind": PlanToken.Kind.REFRESH,
        "kid": "k" * 43,
        "issued_at": now,
        "expires_at": now + timedelta(minutes=15),
        "policy_version": policy_version,
        "role": "sre",
        "groups": ["oncall"],
    }
    created = PlanToken.objects.create(**fields)

    row_insert(PlanToken(**fields))

    inserted = PlanToken.objects.exclude(pk=created.pk).get(plan=plan)
    assert _stored(PlanToken, inserted.pk) == _stored(PlanToken, created.pk)
    assert inserted.issued_at == now and inserted.groups == ["oncall"]
