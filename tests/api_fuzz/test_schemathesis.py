"""Fuzz the REST API from its own OpenAPI schema, in process, with a real API key.

Schemathesis generates requests for every operation of ``/v1/schema`` (its examples, the
schema's boundaries, then random data, positive and negative) and checks each answer: never
a 5xx, a status the operation documents, and a body and content type that match what the
schema declares (errors are ``application/problem+json`` with the ``Problem`` schema).
Bounded and derandomized, so a run is short and repeatable.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

# The real WSGI application, as gunicorn runs it (schema loading touches no database).
schema = schemathesis.openapi.from_wsgi("/v1/schema?format=json", get_wsgi_application())


@pytest.fixture
def keep_test_transaction():
    """Django closes the connection after each request, which would end pytest-django's
    test transaction on PostgreSQL; Django's own test client suspends that the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


# The admin API has its own credential and its own run (test_admin_api_schemathesis.py).
@schema.exclude(tag="admin").parametrize()
# Not the profile's: a fixed, derandomized run per operation, so a run is short and repeats.
@settings(
    max_examples=40,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, agent, keep_test_transaction):
    response = case.call(headers={"Authorization": f"Bearer {agent.api_key}"})
    case.validate_response(
        response,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
