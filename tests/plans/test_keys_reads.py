"""Reads never write: the JWKS answers from what is stored and creates no key (readiness:
tests/controlplane/test_probes.py).

The first keys come from a write: the first signature (issuing a plan) or a rotation
(`manage.py rotate_keys`, which `make run` runs at start, or the scheduled check).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from plans.models import PlanToken, SigningKey
from tests.conftest import plan_document

pytestmark = pytest.mark.django_db

WRITES = ("INSERT", "UPDATE", "DELETE")


def writes_in(queries: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith(WRITES)
    ]


def test_jwks_on_an_empty_key_table_lists_no_key_and_writes_nothing(anonymous_client):
    with CaptureQueriesContext(connection) as queries:
        response = anonymous_client.get("/v1/keys/jwks")

    assert response.status_code == 200
    assert response.json() == {"keys": []}
    assert writes_in(queries) == []
    assert not SigningKey.objects.exists()


def test_the_first_plan_on_an_empty_key_table_creates_the_keys_and_is_signed(agent):
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert response.status_code == 201
    active = SigningKey.objects.get(state="active")
    assert SigningKey.objects.filter(state="next").count() == 1
    assert PlanToken.objects.get().kid == active.kid
    assert active.kid in {key["kid"] for key in agent.client.get("/v1/keys/jwks").json()["keys"]}
