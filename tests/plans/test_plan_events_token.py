"""POST /v1/plans/{id}/events with the plan's own intent token (docs/decisions/0054): once
the agent's API key is refused (revoked, expired, the agent disabled), its guard sends the
decision log with the plan's token. The token vouches for its own plan's decisions made up
to its expiry; later ones are counted as lost; another plan's token, a token of a revoked
signing key or a forged one store nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditRecord, UnattributedRefusal
from guard.tokens import unverified_claims
from kernel.problems import Code
from members.models import ApiKey
from members.services import agent_update, api_key_revoke
from plans.keys import signing_key_revoke
from plans.models import Plan, PlanEvent, PlanEventBatch, PlanToken

from .helpers import assert_problem
from .test_plan_events_exactly_once import allowed, batch, declare, post_events, written


@dataclass
class TokenSender:
    """Sends as a persona does (``.client``), with the plan's intent token."""

    client: APIClient


def token_client(token: str) -> TokenSender:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return TokenSender(client)


def at(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")


STOPS = {
    "API key revoked": lambda persona: api_key_revoke(api_key=persona.agent.api_keys.get()),
    "API key expired": lambda persona: ApiKey.objects.filter(agent=persona.agent).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    ),
    "agent disabled": lambda persona: agent_update(agent=persona.agent, is_active=False),
}


@pytest.mark.parametrize("stop", STOPS.values(), ids=STOPS.keys())
def test_a_refused_keys_plan_takes_its_decision_log_by_its_token(agent, stop):
    plan = declare(agent)
    stop(agent)
    refused = post_events(agent, plan["id"], batch(1, allowed()))
    assert refused.status_code in (401, 403)

    response = post_events(token_client(plan["token"]), plan["id"], batch(1, allowed()))

    assert response.status_code == 202, response.content
    assert response.json()["events"] == 1
    stored = PlanEventBatch.objects.get(plan_id=plan["id"])
    assert stored.credential == PlanEventBatch.Credential.PLAN_TOKEN
    assert PlanEvent.objects.filter(plan_id=plan["id"]).count() == 1
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.DECISION).count() == 1
    # Exactly once, as with the key.
    again = post_events(token_client(plan["token"]), plan["id"], batch(1, allowed()))
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    assert PlanEvent.objects.filter(plan_id=plan["id"]).count() == 1


def test_decisions_after_the_tokens_expiry_are_counted_as_lost(agent, settings):
    plan = declare(agent)
    exp = unverified_claims(plan["token"])["exp"]
    late = exp + settings.PLANGATE_CLOCK_SKEW + 1
    body = batch(1, allowed(at=at(exp - 5)), allowed(at=at(late)), allowed(at=at(late)), lost=2)

    response = post_events(token_client(plan["token"]), plan["id"], body)

    assert response.status_code == 202, response.content
    assert (response.json()["events"], response.json()["lost"]) == (1, 4)
    assert PlanEvent.objects.filter(plan_id=plan["id"]).count() == 1
    assert Plan.objects.get(pk=plan["id"]).decisions_lost == 4
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.DECISIONS_LOST)
    assert record.details["lost"] == 4
    assert record.details["credential"] == PlanEventBatch.Credential.PLAN_TOKEN


def test_another_plans_token_is_refused_and_writes_nothing(agent):
    plan, other = declare(agent), declare(agent)
    before = written()

    response = post_events(token_client(other["token"]), plan["id"], batch(1, allowed()))

    assert_problem(response, 409, Code.PLAN_MISMATCH)
    assert written() == before


def test_a_token_of_a_revoked_signing_key_is_refused_and_writes_nothing(agent):
    plan = declare(agent)
    signing_key_revoke(kid=PlanToken.objects.get(plan_id=plan["id"]).kid)
    before = written()

    response = post_events(token_client(plan["token"]), plan["id"], batch(1, allowed()))

    assert_problem(response, 401, Code.INVALID_TOKEN)
    assert written() == before


def test_a_forged_token_is_refused_and_writes_nothing(agent):
    plan = declare(agent)
    header, payload, signature = plan["token"].split(".")
    forged = f"{header}.{payload}.{signature[:-4]}AAAA"
    before = written()

    response = post_events(token_client(forged), plan["id"], batch(1, allowed()))

    assert_problem(response, 401, Code.INVALID_TOKEN)
    assert written() == before


def test_a_token_opens_no_other_endpoint(agent):
    plan = declare(agent)

    response = token_client(plan["token"]).client.get(f"/v1/plans/{plan['id']}")

    assert_problem(response, 401, Code.INVALID_API_KEY)


def test_the_schema_says_the_decision_log_takes_a_plans_token(client):
    response = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    schema = response.json()
    operation = schema["paths"]["/v1/plans/{plan_id}/events"]["post"]
    assert {"planToken": []} in operation["security"]
    assert {"bearerAuth": []} in operation["security"]
    assert schema["components"]["securitySchemes"]["planToken"]["scheme"] == "bearer"
    assert "409" in operation["responses"]
    # Only the decision log takes it.
    refresh = schema["paths"]["/v1/plans/{plan_id}/refresh"]["post"]
    assert {"planToken": []} not in refresh["security"]


@pytest.mark.parametrize("header", [None, "Bearer pg_unknown", "Bearer not.a-valid.token"])
def test_a_refusal_without_a_usable_credential_is_still_counted(agent, header):
    plan = declare(agent)
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    before = written()

    response = client.post(f"/v1/plans/{plan['id']}/events", batch(1, allowed()), format="json")

    code = Code.INVALID_TOKEN if header and "." in header else Code.INVALID_API_KEY
    assert_problem(response, 401, code)
    assert written() == before
    if code == Code.INVALID_API_KEY:
        assert response["WWW-Authenticate"] == 'Bearer realm="plangate"'
        counted = UnattributedRefusal.objects.get(code=Code.INVALID_API_KEY)
        assert counted.count == 1
