"""Child plans against a real HTTP server: the guard's verifier reads a child token's
parent and act; a real guard declares and ends the parent, and the child ends with it;
revoking the parent stops the child's refresh and its status feed (docs/decisions/0070)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings

from guard.agent import Guard
from guard.jwk import KeySet
from guard.tokens import verify_intent_token
from plans.models import Plan
from plans.services import plan_revoke
from tests.conftest import plan_document

pytestmark = pytest.mark.django_db(transaction=True)

STEP = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 2}


@pytest.fixture
def api(live_server, agent) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {agent.api_key}"},
        timeout=30,
    ) as client:
        yield client


@pytest.fixture
def guard(live_server, agent) -> Iterator[Guard]:
    guard = Guard(live_server.url, agent.api_key, issuer=settings.PLANGATE_ISSUER)
    yield guard
    guard.close()


def delegate(api: httpx.Client, parent_id: str) -> dict:
    response = api.post(
        f"/v1/plans/{parent_id}/delegations",
        json={"plan": plan_document(goal="List them", steps=[STEP])},
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_a_child_token_verifies_with_the_published_keys(api, agent):
    parent = api.post("/v1/plans", json={"plan": plan_document()}).json()

    child = delegate(api, parent["id"])

    keys = KeySet(api.get("/v1/keys/jwks").json())
    claims = verify_intent_token(child["token"], keys, issuer=settings.PLANGATE_ISSUER)
    assert (claims.parent.jti, claims.parent.ph) == (parent["id"], parent["planHash"])
    assert claims.act == {"sub": agent.agent.pk, "act": {"sub": agent.agent.pk}}
    assert claims.exp <= int(Plan.objects.get(pk=parent["id"]).expires_at.timestamp())


def test_a_child_ends_when_the_guard_ends_its_parent(api, guard):
    declared = guard.declare(plan_document())
    # The guard binds its plan to its key: its own delegate() carries the proof.
    delegation = guard.delegate(plan_document(goal="List them", steps=[STEP]))
    child = {"id": delegation.plan_id, "token": delegation.token}
    assert guard.check("github_list_issues", {"repo": "acme/public-app"}).allowed

    guard.end_plan()
    assert guard.flush(timeout=30)

    row = Plan.objects.get(pk=child["id"])
    assert row.status == Plan.Status.ENDED
    assert declared.plan_id in row.end_reason
    refresh = api.post(f"/v1/plans/{child['id']}/refresh", json={"token": child["token"]})
    assert (refresh.status_code, refresh.json()["code"]) == (410, "plan_revoked")


def test_revoking_the_parent_stops_the_childs_refresh_and_feed(api):
    parent = api.post("/v1/plans", json={"plan": plan_document()}).json()
    child = delegate(api, parent["id"])
    assert api.get(f"/v1/plans/{child['id']}/status").json()["status"] == "active"

    plan_revoke(plan=Plan.objects.get(pk=parent["id"]), by="admin", reason="leak")

    feed = api.get(f"/v1/plans/{child['id']}/status").json()
    assert (feed["status"], feed["code"]) == ("revoked", "plan_revoked")
    refresh = api.post(f"/v1/plans/{child['id']}/refresh", json={"token": child["token"]})
    assert (refresh.status_code, refresh.json()["code"]) == (410, "plan_revoked")
