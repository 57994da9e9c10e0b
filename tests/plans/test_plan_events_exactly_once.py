"""POST /v1/plans/{id}/events, exactly once: a batch is stored once per (plan, stream, seq),
with one audit record per decision; the losses and the end the guard reports reach the plan
and the audit trail."""

from __future__ import annotations

import hashlib

import pytest

from audit.models import AuditRecord
from guard.decisions import Decision, PlanOutcome
from kernel.problems import Code
from plans.models import Plan, PlanDisplayUpdate, PlanEvent, PlanEventBatch
from tests.conftest import plan_document

from .helpers import assert_problem

AT = "2026-11-30T09:00:00.250Z"
DIGEST = hashlib.sha256(b'{"repo":"acme/public-app"}').hexdigest()
STREAM = "0f3c9a7be2d84c51a6b0e1f2d3c4b5a6"
RULE = {"index": 0, "description": "allow github_* (rules[0])"}


def declare(persona) -> dict:
    response = persona.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def post_events(persona, plan_id: str, body: object):
    return persona.client.post(f"/v1/plans/{plan_id}/events", body, format="json")


def allowed(step: int = 0, **extra) -> dict:
    return {
        "at": AT,
        "tool": "github_list_issues",
        "decision": Decision.ALLOWED,
        "step": step,
        "rule": RULE,
        "policyVersion": 1,
        "argsDigest": DIGEST,
        **extra,
    }


def batch(seq: int, *events: dict, **extra) -> dict:
    return {"stream": STREAM, "seq": seq, "events": list(events), **extra}


def written() -> tuple[int, int, int, int]:
    return (
        PlanEventBatch.objects.count(),
        PlanEvent.objects.count(),
        PlanDisplayUpdate.objects.count(),
        AuditRecord.objects.count(),
    )


def test_a_batch_sent_again_is_answered_with_its_counts_and_stores_nothing(agent):
    plan = declare(agent)
    body = batch(1, allowed(), allowed(step=1), lost=2)

    before = written()
    first = post_events(agent, plan["id"], body)
    after_first = written()
    again = post_events(agent, plan["id"], body)

    assert first.status_code == 202, first.content
    assert again.status_code == 200, again.content
    assert again.json() == {**first.json(), "duplicate": True}
    assert first.json()["duplicate"] is False
    assert written() == after_first
    # One batch, 2 events, no display update; 2 decision records and 1 loss record.
    assert tuple(a - b for a, b in zip(after_first, before, strict=True)) == (1, 2, 0, 3)
    assert Plan.objects.get(pk=plan["id"]).decisions_lost == 2


def test_each_number_of_a_stream_is_stored_and_a_skipped_number_is_accepted(agent):
    plan = declare(agent)

    for seq in (1, 2, 5):  # 3 and 4 were given up by the guard: a visible gap
        response = post_events(agent, plan["id"], batch(seq, allowed()))
        assert response.status_code == 202, response.content
    other_stream = post_events(agent, plan["id"], {**batch(1, allowed()), "stream": "b" * 32})

    assert other_stream.status_code == 202
    assert sorted(PlanEventBatch.objects.filter(stream=STREAM).values_list("seq", flat=True)) == [
        1,
        2,
        5,
    ]
    assert PlanEvent.objects.filter(plan_id=plan["id"]).count() == 4


def test_the_same_number_for_another_plan_is_another_batch(agent):
    first, second = declare(agent), declare(agent)

    for plan in (first, second):
        assert post_events(agent, plan["id"], batch(1, allowed())).status_code == 202

    assert PlanEvent.objects.count() == 2


def test_a_batch_of_an_older_guard_without_numbers_is_stored_each_time(agent):
    plan = declare(agent)
    body = {"events": [allowed()]}

    for _ in range(2):
        assert post_events(agent, plan["id"], body).status_code == 202

    assert PlanEvent.objects.count() == 2
    assert list(PlanEventBatch.objects.values_list("stream", "seq")) == [("", None)] * 2


def test_each_decision_is_on_the_audit_trail_with_its_step_rule_and_policy(agent):
    plan = declare(agent)
    blocked = {
        "at": AT,
        "tool": "send_email",
        "decision": Decision.NOT_IN_PLAN,
        "reason": "no step of the plan calls send_email",
        "policyVersion": 1,
    }
    denied = {
        **allowed(step=1),
        "decision": Decision.POLICY_DENIED,
        "rule": {"index": None, "description": "the policy default (deny)"},
    }

    post_events(agent, plan["id"], batch(1, allowed(), blocked, denied))

    records = list(
        AuditRecord.objects.filter(kind=AuditRecord.Kind.DECISION, plan_id=plan["id"]).order_by(
            "id"
        )
    )
    assert [(r.code, r.rule, r.details["tool"], r.details["step"]) for r in records] == [
        (Decision.ALLOWED, RULE, "github_list_issues", 0),
        (Decision.NOT_IN_PLAN, None, "send_email", None),
        (
            Decision.POLICY_DENIED,
            {"index": None, "description": "the policy default (deny)"},
            "github_list_issues",
            1,
        ),
    ]
    # The step by its index (from 0) and by its number (from 1, as the pages and exports).
    assert [(r.details["stepIndex"], r.details["stepNumber"]) for r in records] == [
        (0, 1),
        (None, None),
        (1, 2),
    ]
    assert {(r.policy, r.policy_version) for r in records} == {
        (plan["policy"]["id"], plan["policy"]["version"])
    }
    assert {(r.actor, r.agent_id, r.agent_name) for r in records} == {
        (f"agent:{agent.agent.pk}", agent.agent.pk, agent.agent.name)
    }
    assert {r.user for r in records} == {plan_document()["user"]}
    assert records[0].at.microsecond == 250000
    stored = PlanEvent.objects.filter(plan_id=plan["id"]).order_by("id")
    assert [(e.rule_index, e.rule_description) for e in stored] == [
        (0, RULE["description"]),
        (None, ""),
        (None, "the policy default (deny)"),
    ]


def test_lost_decisions_add_up_on_the_plan_and_are_recorded(agent):
    plan = declare(agent)

    post_events(agent, plan["id"], batch(1, allowed(), lost=5))
    response = post_events(agent, plan["id"], {"stream": STREAM, "seq": 2, "lost": 7})

    assert response.status_code == 202, response.content
    assert Plan.objects.get(pk=plan["id"]).decisions_lost == 12
    records = AuditRecord.objects.filter(kind=AuditRecord.Kind.DECISIONS_LOST).order_by("id")
    assert [record.details["lost"] for record in records] == [5, 7]
    assert "7 decision(s) were not delivered" in records[1].details["detail"]


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (PlanOutcome.COMPLETED, Plan.Status.COMPLETED),
        (PlanOutcome.ENDED, Plan.Status.ENDED),
        (PlanOutcome.TOKEN_REFUSED, Plan.Status.TOKEN_REFUSED),
    ],
)
def test_the_end_the_guard_reports_sets_the_plans_status(agent, outcome, status):
    plan = declare(agent)
    end = {"outcome": outcome, "reason": "plan_swapped: the token carries another plan"}

    response = post_events(agent, plan["id"], {"stream": STREAM, "seq": 1, "end": end})

    assert response.status_code == 202, response.content
    stored = Plan.objects.get(pk=plan["id"])
    assert stored.status == status
    assert stored.end_reason == end["reason"]
    assert stored.ended_at is not None
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_ENDED)
    assert (record.code, record.details["status"]) == (outcome, status)


@pytest.mark.parametrize(
    "status", [Plan.Status.REVOKED, Plan.Status.EXPIRED, Plan.Status.COMPLETED]
)
def test_only_an_active_plan_changes_status_at_its_end(agent, status):
    plan = declare(agent)
    Plan.objects.filter(pk=plan["id"]).update(status=status)

    post_events(agent, plan["id"], batch(1, end={"outcome": PlanOutcome.ENDED}))

    stored = Plan.objects.get(pk=plan["id"])
    assert (stored.status, stored.ended_at) == (status, None)
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_ENDED)
    assert record.details["status"] == status


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"stream": STREAM, "events": [allowed()]}, "seq"),
        ({"seq": 1, "events": [allowed()]}, "stream"),
        (batch(0, allowed()), "seq"),
        (batch(True, allowed()), "seq"),
        ({**batch(1, allowed()), "stream": "short"}, "stream"),
        ({**batch(1, allowed()), "stream": "has spaces in it"}, "stream"),
        (batch(1, allowed(), lost=-1), "lost"),
        (batch(1, lost="3"), "lost"),
        ({"stream": STREAM, "seq": 1}, "events"),
        (batch(1, end={"outcome": "finished"}), "end.outcome"),
        (batch(1, end={"outcome": "ended", "why": "x"}), "end.why"),
        (batch(1, end={"outcome": "ended", "reason": "x" * 501}), "end.reason"),
        (batch(1, allowed(rule={"index": -1, "description": "x"})), "events[0].rule.index"),
        (batch(1, allowed(rule={"index": 0, "description": ""})), "events[0].rule.description"),
        (batch(1, allowed(rule={"index": 0})), "events[0].rule.description"),
        (batch(1, allowed(rule="rules[0]")), "events[0].rule"),
        (batch(1, allowed(policyVersion=0)), "events[0].policyVersion"),
        (batch(1, allowed(policyVersion=2)), "events[0].policyVersion"),  # no token carried it
    ],
)
def test_a_bad_batch_is_refused_whole_and_writes_nothing(agent, body, path):
    plan = declare(agent)
    before = written()

    response = post_events(agent, plan["id"], body)

    problem = assert_problem(response, 400, Code.INVALID_EVENTS)
    assert path in [error["path"] for error in problem["errors"]]
    assert written() == before
    assert Plan.objects.get(pk=plan["id"]).status == Plan.Status.ACTIVE


def test_another_agents_plan_is_not_found_even_for_a_known_batch(agent, other_agent):
    plan = declare(agent)
    body = batch(1, allowed(), end={"outcome": PlanOutcome.ENDED})
    post_events(agent, plan["id"], body)
    before = written()

    response = post_events(other_agent, plan["id"], body)

    assert_problem(response, 404, Code.PLAN_NOT_FOUND)
    assert written() == before
