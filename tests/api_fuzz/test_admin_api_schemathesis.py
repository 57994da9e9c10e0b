"""Fuzz the admin API (``/v1/admin/...``) from its OpenAPI schema with a real read-write
admin token over a team with members, a policy, an agent and a live plan: never a 5xx, only
documented statuses, bodies and content types that match the schema (refusals are
problem+json)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from adminapi.tokens import admin_token_create
from tests.conftest import plan_document

from .test_schemathesis import keep_test_transaction, schema  # noqa: F401  (a fixture)

admin_operations = schema.include(tag="admin")


@pytest.fixture
def admin_token(team, agent, sre_member) -> str:
    declared = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert declared.status_code == 201
    return admin_token_create(team=team, name="fuzz", can_write=True)[1]


@admin_operations.parametrize()
@settings(max_examples=25, derandomize=True, suppress_health_check=list(HealthCheck))
def test_the_admin_api_conforms_to_its_schema(case, admin_token, keep_test_transaction):  # noqa: F811
    response = case.call(headers={"Authorization": f"Bearer {admin_token}"})
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
