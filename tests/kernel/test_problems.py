"""The API's error codes: one enum, each with its status and title, refused when unknown."""

from __future__ import annotations

import json

import pytest

from kernel.problems import PROBLEMS, Code, DomainError, problem_body


def test_every_code_has_exactly_one_problem():
    assert set(PROBLEMS) == set(Code)


def test_a_domain_error_keeps_its_code():
    error = DomainError(Code.POLICY_DENIED)

    assert error.code is Code.POLICY_DENIED
    assert error.status == 403
    assert str(error) == "policy_denied: The active policy denies the plan"


@pytest.mark.parametrize("code", ["policy_denied", "policy_deny"])
def test_a_plain_string_is_a_programming_error(code):
    with pytest.raises(TypeError, match=f"not '{code}'"):
        DomainError(code)  # type: ignore[arg-type]


def test_the_body_carries_plain_strings():
    body = problem_body(Code.PLAN_REVOKED, "gone", instance="/v1/plans/x")

    assert type(body["code"]) is str
    assert json.loads(json.dumps(body))["code"] == "plan_revoked"
    assert body["type"] == "urn:plangate:problem:plan_revoked"
    assert body["status"] == 410


def test_the_openapi_schema_lists_every_code(client):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/json").json()

    assert set(schema["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]) == {
        code.value for code in Code
    }
