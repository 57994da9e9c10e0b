"""Plans bound to their holder's key (DPoP, RFC 9449; docs/decisions/0069): the declaration's
proof binds, then every door that serves the plan wants a fresh proof by that key."""

from __future__ import annotations

import hashlib
import time

import jwt
import pytest

from audit.models import AuditRecord
from guard.dpop import DpopKey
from kernel.problems import Code
from plans.models import Plan
from tests.conftest import plan_document

from .helpers import assert_problem

BASE = "http://testserver"
BATCH = {
    "events": [
        {
            "at": "2026-11-30T09:00:00.250Z",
            "tool": "github_list_issues",
            "decision": "allowed",
            "step": 0,
            "argsDigest": hashlib.sha256(b'{"repo":"acme/public-app"}').hexdigest(),
        }
    ]
}


def proof(persona, key: DpopKey, method: str, path: str, **options) -> str:
    options.setdefault("access_token", persona.api_key)
    return key.proof(htm=method, htu=BASE + path, **options)


def declare(persona, key: DpopKey | None) -> dict:
    extra = {"HTTP_DPOP": proof(persona, key, "POST", "/v1/plans")} if key else {}
    response = persona.client.post("/v1/plans", {"plan": plan_document()}, format="json", **extra)
    assert response.status_code == 201, response.content
    return response.json()


def refresh(persona, body: dict, dpop: str | None = None):
    extra = {"HTTP_DPOP": dpop} if dpop is not None else {}
    return persona.client.post(
        f"/v1/plans/{body['id']}/refresh", {"token": body["token"]}, format="json", **extra
    )


def status(persona, plan_id: str, dpop: str | None = None):
    extra = {"HTTP_DPOP": dpop} if dpop is not None else {}
    return persona.client.get(f"/v1/plans/{plan_id}/status", **extra)


def events(persona, plan_id: str, dpop: str | None = None):
    extra = {"HTTP_DPOP": dpop} if dpop is not None else {}
    return persona.client.post(f"/v1/plans/{plan_id}/events", BATCH, format="json", **extra)


def refused(response) -> dict:
    body = assert_problem(response, 401, Code.INVALID_DPOP_PROOF)
    assert response["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"')
    assert [error["path"] for error in body["errors"]] == ["DPoP"]
    return body


@pytest.fixture
def key() -> DpopKey:
    return DpopKey.generate()


def test_a_declaration_with_a_proof_binds_the_plan_and_its_token(agent, key):
    body = declare(agent, key)

    assert Plan.objects.get(pk=body["id"]).jkt == key.jkt
    assert jwt.decode(body["token"], options={"verify_signature": False})["cnf"] == {"jkt": key.jkt}


def test_a_declaration_without_a_proof_is_unbound_and_needs_none(agent):
    body = declare(agent, None)

    assert Plan.objects.get(pk=body["id"]).jkt == ""
    assert "cnf" not in jwt.decode(body["token"], options={"verify_signature": False})
    assert refresh(agent, body).status_code == 200
    assert status(agent, body["id"]).status_code == 200


def test_a_bound_refresh_passes_with_a_proof_and_keeps_the_binding(agent, key):
    body = declare(agent, key)

    response = refresh(agent, body, proof(agent, key, "POST", f"/v1/plans/{body['id']}/refresh"))

    assert response.status_code == 200, response.content
    claims = jwt.decode(response.json()["token"], options={"verify_signature": False})
    assert claims["cnf"] == {"jkt": key.jkt}


def test_a_copied_token_and_api_key_are_refused_on_every_door(agent, key):
    body = declare(agent, key)
    plan_id = body["id"]
    thief = DpopKey.generate()

    refused(refresh(agent, body))
    refused(refresh(agent, body, proof(agent, thief, "POST", f"/v1/plans/{plan_id}/refresh")))
    refused(status(agent, plan_id))
    refused(status(agent, plan_id, proof(agent, thief, "GET", f"/v1/plans/{plan_id}/status")))
    refused(events(agent, plan_id))
    refused(events(agent, plan_id, proof(agent, thief, "POST", f"/v1/plans/{plan_id}/events")))
    refused(agent.client.post(f"/v1/plans/{plan_id}/token", {}, format="json"))
    refused(
        agent.client.post(
            f"/v1/plans/{plan_id}/delegations", {"plan": plan_document()}, format="json"
        )
    )
    # The holder goes on.
    own = proof(agent, key, "GET", f"/v1/plans/{plan_id}/status")
    assert status(agent, plan_id, own).status_code == 200
    own = proof(agent, key, "POST", f"/v1/plans/{plan_id}/events")
    assert events(agent, plan_id, own).status_code == 202


def test_a_refused_refresh_is_in_the_trail(agent, key):
    body = declare(agent, key)

    refused(refresh(agent, body))

    record = AuditRecord.objects.filter(kind=AuditRecord.Kind.REFRESH_REFUSED).get()
    assert record.code == Code.INVALID_DPOP_PROOF


def test_a_replayed_proof_is_refused(agent, key):
    body = declare(agent, key)
    path = f"/v1/plans/{body['id']}/status"
    once = proof(agent, key, "GET", path)

    assert status(agent, body["id"], once).status_code == 200
    detail = refused(status(agent, body["id"], once))["detail"]
    assert "used before" in detail


@pytest.mark.parametrize(
    ("method", "path", "options", "says"),
    [
        ("POST", "/v1/plans/{id}/status", {}, "method"),
        ("GET", "/v1/plans/{id}/refresh", {}, "is for"),
        ("GET", "/v1/plans/{id}/status", {"access_token": "pk_other"}, "ath"),
        ("GET", "/v1/plans/{id}/status", {"iat": int(time.time()) - 3600}, "iat"),
        ("GET", "/v1/plans/{id}/status", {"iat": int(time.time()) + 3600}, "iat"),
    ],
    ids=["method", "url", "access-token", "old", "future"],
)
def test_a_proof_for_another_request_is_refused(agent, key, method, path, options, says):
    body = declare(agent, key)

    response = status(agent, body["id"], proof(agent, key, method, path.format(**body), **options))

    assert says in refused(response)["detail"]


def test_a_garbled_proof_is_refused_even_for_an_unbound_declaration(agent):
    response = agent.client.post(
        "/v1/plans", {"plan": plan_document()}, format="json", HTTP_DPOP="not.a.proof"
    )

    refused(response)
    assert not Plan.objects.exists()


def test_a_team_that_requires_binding_refuses_an_unbound_declaration(agent, team, key):
    team.require_token_binding = True
    team.save(update_fields=["require_token_binding"])
    before = type(team).objects.values_list("status_list_next", flat=True).get(pk=team.pk)

    refused(agent.client.post("/v1/plans", {"plan": plan_document()}, format="json"))

    assert not Plan.objects.exists()
    after = type(team).objects.values_list("status_list_next", flat=True).get(pk=team.pk)
    assert after == before
    # With a proof it is declared, and bound.
    assert Plan.objects.get(pk=declare(agent, key)["id"]).jkt == key.jkt


@pytest.mark.parametrize("door", ["refresh", "token", "events", "delegations"])
def test_text_that_is_no_plan_id_is_not_found_on_every_bound_door(agent, door):
    # NUL included: PostgreSQL refuses it in a query, so it must never reach one.
    for plan_id in ("%00", "x" * 300, "01JD0000000000000000000000%00"):
        response = agent.client.post(f"/v1/plans/{plan_id}/{door}", {}, format="json")

        assert response.status_code in (400, 404), (door, plan_id, response.content)
        assert response["Content-Type"] == "application/problem+json"
