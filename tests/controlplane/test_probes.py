"""Liveness, readiness, the OpenAPI schema and problem+json for unknown paths."""

from __future__ import annotations

from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from guard.decisions import (
    MAX_DISPLAY_UPDATES_PER_BATCH,
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    Decision,
)
from kernel.problems import Code
from plans.keys import clear_private_key_cache, signing_keys_bootstrap
from plans.models import SigningKey
from tests.plans.keys_helpers import kid_in

WRITES = ("INSERT", "UPDATE", "DELETE")


def writes_in(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)
    ]


def test_healthz_answers_without_touching_anything(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_with_a_database_and_a_usable_key(db, client):
    signing_keys_bootstrap()

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"
    assert response.json()["checks"]["signingKey"] == kid_in("active")


def test_readyz_on_an_empty_key_table_reports_no_active_key_and_writes_nothing(db, client):
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["code"] == Code.NO_SIGNING_KEY
    assert "no signing key is active" in body["detail"].lower()
    assert body["checks"] == {"database": "ok", "signingKey": "unavailable"}
    assert writes_in(queries) == []
    assert not SigningKey.objects.exists()


def test_readyz_fails_when_the_key_cannot_be_decrypted(db, client):
    signing_keys_bootstrap()
    clear_private_key_cache()

    with override_settings(KEY_ENCRYPTION_KEY="b3RoZXIta2V5LWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM="):
        response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["code"] == Code.NO_SIGNING_KEY


def test_openapi_schema_describes_the_plan_endpoints(client):
    response = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert {"/v1/plans", "/v1/plans/{plan_id}/refresh", "/v1/keys/jwks"} <= set(schema["paths"])
    assert client.get("/v1/docs").status_code == 200


def openapi(client) -> dict:
    response = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_the_event_batchs_limits_in_the_schema_are_the_guards(client):
    schemas = openapi(client)["components"]["schemas"]

    batch = schemas["EventBatchRequest"]["properties"]
    event = batch["events"]["items"]["properties"]
    assert batch["events"]["maxItems"] == MAX_EVENTS_PER_BATCH
    assert batch["displayUpdates"]["maxItems"] == MAX_DISPLAY_UPDATES_PER_BATCH
    assert event["tool"]["maxLength"] == MAX_EVENT_TOOL_LENGTH
    assert event["reason"]["maxLength"] == MAX_EVENT_REASON_LENGTH
    assert set(event["decision"]["enum"]) == {code.value for code in Decision}


@override_settings(PLANGATE_TOKEN_MIN_TTL=30, PLANGATE_TOKEN_MAX_TTL=7200)
def test_the_ttl_bounds_in_the_schema_are_the_settings_when_it_is_generated(client):
    schemas = openapi(client)["components"]["schemas"]

    for body in ("PlanDeclarationRequest", "PlanRefreshRequest"):
        ttl = schemas[body]["properties"]["ttl"]
        assert (ttl["minimum"], ttl["maximum"]) == (30, 7200), body


def test_unknown_api_path_is_problem_json(client):
    response = client.get("/v1/nothing-here")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == Code.NOT_FOUND


def test_wrong_method_is_problem_json(db, client):
    response = client.delete("/v1/keys/jwks")

    assert response.status_code == 405
    assert response.json()["code"] == Code.METHOD_NOT_ALLOWED


def test_nul_in_an_api_url_is_a_400_problem(db, client):
    for url in ("/v1/plans/%00", "/v1/keys/jwks?x=%00", "/healthz?%00=1"):
        response = client.get(url)

        assert response.status_code == 400, url
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["code"] == Code.INVALID_REQUEST


def test_openapi_schema_documents_a_lost_database_and_an_oversized_body(client):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    operations = [
        operation
        for path_item in schema["paths"].values()
        for operation in path_item.values()
        if isinstance(operation, dict) and "responses" in operation
    ]
    assert operations
    for operation in operations:
        responses = operation["responses"]
        assert "Retry-After" in responses["503"]["headers"], operation["operationId"]
        assert "application/problem+json" in responses["503"]["content"]
        assert ("413" in responses) == ("requestBody" in operation), operation["operationId"]
    assert (
        "database_unavailable"
        in schema["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
    )
