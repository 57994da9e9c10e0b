"""POST /v1/plans/{id}/events stores a batch in a fixed number of queries, whatever its size,
and its one-statement insert (kernel.sql.rows_insert: COPY on PostgreSQL, executemany on
SQLite) stores exactly what the ORM's ``bulk_create`` stores for the same events and
decision records."""

from __future__ import annotations

import string
from datetime import datetime
from typing import Any

import pytest
from django.core.cache import cache
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.models import AuditRecord
from audit.services import record_build, records_append
from guard.decisions import DECISION_CODES, MAX_EVENT_REASON_LENGTH, Decision
from guard.events import validate_event_batch
from plans.event_intake import (
    DECISION_RECORD_FIELDS,
    EVENT_FIELDS,
    _common,
    _decision_fields,
    _event_fields,
    _policy_versions,
    plan_events_record,
)
from plans.models import Plan, PlanEvent, PlanEventBatch
from tests.conftest import plan_document

STREAM = "0f3c9a7be2d84c51a6b0e1f2d3c4b5a6"
# The address's failed authentications (kernel.sql.counter_hits), the API key read, the
# rate limit's one statement, the plan read, the transaction's savepoint pair (pytest-django
# runs each test in a transaction), the plan's tokens (which policy version each decision
# was made under), and three inserts: the batch (ON CONFLICT DO NOTHING, no savepoint of
# its own), its events, their decision records. 9 while the failures and the key were read
# in one statement (73f4589 to 5ca17aa; decision 0061 split them again).
EVENTS_QUERIES = 10


def event(index: int) -> dict[str, Any]:
    return {
        "at": f"2026-11-30T09:00:{index % 60:02d}.250Z",
        "tool": "github_list_issues",
        "decision": Decision.ALLOWED,
        "step": 0,
        "rule": {"index": 0, "description": "allow github_* (rules[0])"},
        "policyVersion": 1,
        "argsDigest": "a" * 64,
    }


@pytest.fixture
def declared(agent) -> dict:
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    cache.clear()
    return response.json()


@pytest.mark.parametrize("size", [1, 50, 500])
def test_a_batch_costs_the_same_queries_whatever_its_size(
    agent, declared, django_assert_num_queries, size
):
    body = {"stream": STREAM, "seq": 1, "events": [event(index) for index in range(size)]}

    with django_assert_num_queries(EVENTS_QUERIES):
        response = agent.client.post(f"/v1/plans/{declared['id']}/events", body, format="json")

    assert response.status_code == 202, response.content
    assert PlanEvent.objects.filter(plan_id=declared["id"]).count() == size
    assert (
        AuditRecord.objects.filter(plan_id=declared["id"], kind=AuditRecord.Kind.DECISION).count()
        == size
    )


# --- the one-statement insert, held to bulk_create's answer ------------------------------

texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=40,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
times = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
).map(lambda moment: moment.isoformat(timespec="microseconds") + "Z")


@st.composite
def wire_events(draw: st.DrawFn) -> dict[str, Any]:
    decision = draw(st.sampled_from(sorted(DECISION_CODES)))
    wire: dict[str, Any] = {
        "at": draw(times),
        "tool": draw(st.text(alphabet=string.ascii_letters + "_-", min_size=1, max_size=64)),
        "decision": decision,
    }
    step = draw(st.none() | st.integers(0, 1))
    if decision == Decision.ALLOWED and step is None:
        step = 0
    if step is not None:
        wire["step"] = step
    if draw(st.booleans()):
        wire["reason"] = draw(texts)[:MAX_EVENT_REASON_LENGTH]
    if draw(st.booleans()):
        wire["rule"] = {
            "index": draw(st.none() | st.integers(0, 10)),
            "description": draw(texts.filter(bool)),
        }
    if draw(st.booleans()):
        wire["policyVersion"] = 1
    if draw(st.booleans()):
        wire["argsDigest"] = draw(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
        if draw(st.booleans()):
            wire["args"] = draw(st.dictionaries(texts, json_values, max_size=3))
    return wire


def stored_events(batch: PlanEventBatch) -> list[dict[str, Any]]:
    return list(
        # received_at is each insert's own "now" (auto_now_add), so it is left out.
        PlanEvent.objects.filter(batch=batch).order_by("id").values(*EVENT_FIELDS)
    )


def stored_records(ids: list[int]) -> list[dict[str, Any]]:
    fields = [f.name for f in AuditRecord._meta.concrete_fields if f.name not in ("id",)]
    return list(AuditRecord.objects.filter(pk__in=ids).order_by("id").values(*fields))


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(wire_events(), min_size=1, max_size=20), keep_arguments=st.booleans())
def test_the_insert_stores_what_bulk_create_stores(agent, declared, events, keep_arguments):
    plan = Plan.objects.select_related("policy_version__policy", "member").get(pk=declared["id"])
    plan.team.log_call_arguments = keep_arguments
    plan.team.save(update_fields=["log_call_arguments"])
    stream = f"stream-{PlanEventBatch.objects.count():08d}-xxxxxxxx"
    records_before = set(AuditRecord.objects.values_list("id", flat=True))

    recorded = plan_events_record(
        agent=agent.agent, plan_id=plan.pk, batch={"stream": stream, "seq": 1, "events": events}
    )

    assert recorded.events == len(events)
    fast_batch = PlanEventBatch.objects.get(plan=plan, stream=stream)
    fast_record_ids = sorted(set(AuditRecord.objects.values_list("id", flat=True)) - records_before)
    # The ORM's answer for the same validated events: instances, bulk_create.
    valid = validate_event_batch({"events": events}, steps=2)
    orm_batch = PlanEventBatch.objects.create(
        plan=plan, stream=stream + "-orm", seq=1, received_at=fast_batch.received_at
    )
    versions = _policy_versions(plan, valid.events)

    def orm_event(item: Any) -> PlanEvent:
        fields = dict(
            zip(
                EVENT_FIELDS,
                _event_fields(item, versions.decided_under(item), keep_arguments),
                strict=True,
            )
        )
        fields["decided_under_id"] = fields.pop("decided_under")
        return PlanEvent(plan=plan, batch=orm_batch, **fields)

    PlanEvent.objects.bulk_create(orm_event(item) for item in valid.events)
    orm_records = records_append(
        record_build(
            **_common(plan, agent.agent),
            kind=AuditRecord.Kind.DECISION,
            **dict(
                zip(
                    DECISION_RECORD_FIELDS,
                    _decision_fields(item, versions.decided_under(item), versions),
                    strict=True,
                )
            ),
        )
        for item in valid.events
    )

    assert stored_events(fast_batch) == stored_events(orm_batch)
    assert stored_records(fast_record_ids) == stored_records(
        sorted(record.pk for record in orm_records)
    )
