"""Fuzz ``GET /v1/audit/records`` from its OpenAPI schema with a real audit token over a
sealed trail: never a 5xx, only documented statuses, bodies that match the schema."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from audit.models import AuditRecord
from audit.services import record_append, records_seal
from audit.tokens import audit_token_create

from .test_schemathesis import keep_test_transaction, schema  # noqa: F401  (a fixture)

audit_records = schema.include(operation_id="audit_records_list")


@pytest.fixture
def audit_token(team) -> str:
    for number in range(5):
        record_append(team=team, kind=AuditRecord.Kind.DECISION, details={"n": number})
    records_seal()
    return audit_token_create(team=team, name="fuzz")[1]


@audit_records.parametrize()
@settings(max_examples=60, derandomize=True, suppress_health_check=list(HealthCheck))
def test_audit_records_conform_to_their_schema(case, audit_token, keep_test_transaction):  # noqa: F811
    response = case.call(headers={"Authorization": f"Bearer {audit_token}"})
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
