"""POST /v1/plans/{id}/events: the guard's decisions and the ACP plan it showed."""

from __future__ import annotations

import hashlib

import pytest

from guard.decisions import MAX_EVENTS_PER_BATCH, Decision
from guard.errors import DocumentInvalid
from guard.events import validate_event_batch
from kernel.problems import Code
from plans.models import PlanDisplayUpdate, PlanEvent
from tests.conftest import plan_document

from .helpers import assert_problem

AT = "2026-11-30T09:00:00.250Z"
DIGEST = hashlib.sha256(b'{"repo":"acme/public-app"}').hexdigest()


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
        "argsDigest": DIGEST,
        **extra,
    }


def counts() -> tuple[int, int]:
    return PlanEvent.objects.count(), PlanDisplayUpdate.objects.count()


def test_batch_of_decisions_and_display_updates_is_stored(agent):
    plan = declare(agent)
    blocked = {
        "at": AT,
        "tool": "send_email",
        "decision": Decision.NOT_IN_PLAN,
        "reason": "no step",
    }
    update = {
        "sessionId": "s1",
        "update": {"sessionUpdate": "plan_update", "planId": plan["id"], "type": "items"},
    }

    response = post_events(
        agent, plan["id"], {"events": [allowed(), blocked], "displayUpdates": [{"message": update}]}
    )

    assert response.status_code == 202, response.content
    assert response.json() == {
        "events": 2,
        "displayUpdates": 1,
        "argumentsStored": False,
        "lost": 0,
        "duplicate": False,
    }
    stored = list(PlanEvent.objects.filter(plan_id=plan["id"]).order_by("id"))
    assert [(event.tool, event.decision, event.step) for event in stored] == [
        ("github_list_issues", Decision.ALLOWED, 0),
        ("send_email", Decision.NOT_IN_PLAN, None),
    ]
    assert stored[0].args_digest == DIGEST
    assert stored[0].occurred_at.microsecond == 250000
    assert PlanDisplayUpdate.objects.get().message == update


def test_arguments_are_kept_only_when_the_team_asks(agent, team):
    plan = declare(agent)
    event = allowed(args={"repo": "acme/public-app"})

    post_events(agent, plan["id"], {"events": [event]})
    team.log_call_arguments = True
    team.save()
    response = post_events(agent, plan["id"], {"events": [event]})

    assert response.json()["argumentsStored"] is True
    assert list(PlanEvent.objects.order_by("id").values_list("args", flat=True)) == [
        None,
        {"repo": "acme/public-app"},
    ]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({}, "events"),
        ({"events": []}, "events"),
        ({"events": "x"}, "events"),
        ({"events": [allowed()], "extra": 1}, "extra"),
        ({"events": [allowed(decision="maybe")]}, "events[0].decision"),
        ({"events": [allowed(step=2)]}, "events[0].step"),
        ({"events": [allowed(step=None)]}, "events[0].step"),
        ({"events": [allowed(at="yesterday")]}, "events[0].at"),
        ({"events": [allowed(at="2026-11-30T09:00:00")]}, "events[0].at"),
        ({"events": [allowed(argsDigest="abc")]}, "events[0].argsDigest"),
        ({"events": [allowed(), allowed(extra=True)]}, "events[1].extra"),
        ({"events": [allowed()] * (MAX_EVENTS_PER_BATCH + 1)}, "events"),
        ({"displayUpdates": [{"message": "plan"}]}, "displayUpdates[0].message"),
    ],
)
def test_a_bad_batch_is_refused_whole_and_names_the_path(agent, body, path):
    plan = declare(agent)
    before = counts()

    response = post_events(agent, plan["id"], body)

    problem = assert_problem(
        response, 400, Code.INVALID_EVENTS if path != "extra" else Code.INVALID_REQUEST
    )
    assert path in [error["path"] for error in problem["errors"]]
    assert counts() == before


def test_the_refusal_lists_exactly_the_guards_own_validation_errors(agent):
    plan = declare(agent)
    body = {
        "events": [allowed(step=5, tool=""), {"at": AT}],
        "displayUpdates": [{"message": [], "x": 1}],
    }
    with pytest.raises(DocumentInvalid) as expected:
        validate_event_batch(body, steps=len(plan_document()["steps"]))

    response = post_events(agent, plan["id"], body)

    problem = assert_problem(response, 400, Code.INVALID_EVENTS)
    assert problem["errors"] == [
        {"path": error.path, "detail": error.detail} for error in expected.value.errors
    ]
    assert len(problem["errors"]) >= 5
    assert counts() == (0, 0)


def test_another_agents_plan_is_not_found(agent, other_agent):
    plan = declare(agent)

    response = post_events(other_agent, plan["id"], {"events": [allowed()]})

    assert_problem(response, 404, Code.PLAN_NOT_FOUND)
    assert counts() == (0, 0)


def test_events_need_an_api_key(agent, anonymous_client):
    plan = declare(agent)

    response = anonymous_client.post(
        f"/v1/plans/{plan['id']}/events", {"events": [allowed()]}, format="json"
    )

    assert_problem(response, 401, Code.INVALID_API_KEY)
