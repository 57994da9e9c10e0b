"""A body over the upload limit is refused with 413, on every endpoint, and writes nothing."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from guard.decisions import MAX_DISPLAY_UPDATES_PER_BATCH, MAX_EVENTS_PER_BATCH, Decision
from guard.plan import MAX_GOAL_LENGTH, MAX_STEPS
from kernel.problems import PROBLEM_CONTENT_TYPE, Code
from members.models import ApiKey
from plans.models import Plan, PlanToken
from tests.adminapi.conftest import token_client
from tests.conftest import plan_document

PLAN_ID = "01JAAAAAAAAAAAAAAAAAAAAAAA"


ADMIN_PATH_ARGUMENTS = {
    "<str:agent_id>": PLAN_ID,
    "<str:prefix>": "pg_0123456789ab",
    "<slug:slug>": "default",
}


def _api_post_paths() -> list[str]:
    """Every /v1/ route whose view answers POST, its path arguments filled with a plan id.

    Walking the URLconf keeps the test complete when an endpoint is added.
    """
    found: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                view_class = getattr(pattern.callback, "cls", None) or getattr(
                    pattern.callback, "view_class", None
                )
                if view_class is not None and hasattr(view_class, "post"):
                    found.append("/" + route)

    walk(get_resolver().url_patterns, "")
    paths = []
    for route in found:
        if not route.startswith("/v1/"):
            continue
        for name in ("<str:plan_id>", "<plan_id>"):
            route = route.replace(name, PLAN_ID)
        # The admin API's other arguments (a refusal of the size comes before any lookup).
        for name, value in ADMIN_PATH_ARGUMENTS.items():
            route = route.replace(name, value)
        assert "<" not in route, f"fill in the path argument of {route}"
        paths.append(route)
    return sorted(paths)


API_POST_PATHS = _api_post_paths()


def _oversized_json() -> bytes:
    padding = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    return json.dumps({"plan": plan_document(goal=padding), "token": padding}).encode()


def _rows() -> dict[str, int]:
    return {
        "plans": Plan.objects.count(),
        "tokens": PlanToken.objects.count(),
        "keys_used": ApiKey.objects.filter(last_used_at__isnull=False).count(),
    }


def test_every_post_endpoint_of_the_api_is_covered():
    assert {"/v1/plans", f"/v1/plans/{PLAN_ID}/refresh", f"/v1/plans/{PLAN_ID}/events"} <= set(
        API_POST_PATHS
    )


@pytest.mark.parametrize("path", API_POST_PATHS)
def test_a_body_over_the_limit_is_a_413_problem_and_writes_nothing(agent, path):
    before = _rows()
    # The admin API's doors want an admin token, the agents' an API key.
    client = token_client(agent.team) if path.startswith("/v1/admin/") else agent.client

    response = client.post(path, data=_oversized_json(), content_type="application/json")

    assert response.status_code == 413, response.content[:300]
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE
    body = response.json()
    assert body["code"] == Code.PAYLOAD_TOO_LARGE
    assert body["status"] == 413
    assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in body["detail"]
    assert _rows() == before


def test_the_limit_is_the_setting_read_at_request_time(agent):
    body = json.dumps({"plan": plan_document()}).encode()

    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(body) - 1):
        refused = agent.client.post("/v1/plans", data=body, content_type="application/json")
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=len(body)):
        accepted = agent.client.post("/v1/plans", data=body, content_type="application/json")

    assert refused.status_code == 413
    assert refused.json()["code"] == Code.PAYLOAD_TOO_LARGE
    assert accepted.status_code == 201, accepted.content[:300]
    assert Plan.objects.count() == 1


def test_a_page_outside_the_api_answers_a_plain_413(db, client):
    response = client.post(
        "/admin/login/",
        data="username=root&password=" + "x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE,
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    assert b"too large" in response.content


def test_the_default_limit_holds_a_large_plan_and_a_full_event_batch():
    """The documented default is Django's 2.5 MiB: both largest everyday bodies fit in it
    many times over."""
    step = {
        "tool": "github_search_code",
        "args": {
            f"argument_{number}": {"glob": "acme/" + "p" * 200 + "/*"} for number in range(10)
        },
        "maxCalls": 100,
        "required": True,
    }
    plan = plan_document(goal="g" * MAX_GOAL_LENGTH, steps=[step] * MAX_STEPS)
    event = {
        "at": "2026-01-01T00:00:00.000000Z",
        "tool": "t" * 64,
        "decision": Decision.NOT_IN_PLAN,
        "step": 49,
        "reason": "r" * 200,
        "argsDigest": "d" * 64,
        "args": {"repo": "acme/" + "p" * 200, "query": "q" * 200},
    }
    batch = {
        "events": [event] * MAX_EVENTS_PER_BATCH,
        "displayUpdates": [{"message": {"sessionUpdate": "plan", "entries": []}}]
        * MAX_DISPLAY_UPDATES_PER_BATCH,
    }
    limit = 2_621_440

    assert len(json.dumps({"plan": plan})) * 2 < limit
    assert len(json.dumps(batch)) * 2 < limit
