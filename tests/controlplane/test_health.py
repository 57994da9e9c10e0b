"""Liveness, readiness, the OpenAPI schema and problem+json for unknown paths."""

from __future__ import annotations

from django.test import override_settings

from plans.keys import clear_private_key_cache, signing_keys_bootstrap


def test_healthz_answers_without_touching_anything(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ready_with_a_database_and_a_usable_key(db, client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["checks"]["database"] == "ok"


def test_readyz_fails_when_the_key_cannot_be_decrypted(db, client):
    signing_keys_bootstrap()
    clear_private_key_cache()

    with override_settings(KEY_ENCRYPTION_KEY="b3RoZXIta2V5LWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM="):
        response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["code"] == "no_signing_key"


def test_openapi_schema_describes_the_plan_endpoints(client):
    response = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert {"/v1/plans", "/v1/plans/{plan_id}/refresh", "/v1/keys/jwks"} <= set(schema["paths"])
    assert client.get("/v1/docs").status_code == 200


def test_unknown_api_path_is_problem_json(client):
    response = client.get("/v1/nothing-here")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_found"


def test_wrong_method_is_problem_json(db, client):
    response = client.delete("/v1/keys/jwks")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


def test_nul_in_an_api_url_is_a_400_problem(db, client):
    for url in ("/v1/plans/%00", "/v1/keys/jwks?x=%00", "/healthz?%00=1"):
        response = client.get(url)

        assert response.status_code == 400, url
        assert response["Content-Type"] == "application/problem+json"
        assert response.json()["code"] == "invalid_request"


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
