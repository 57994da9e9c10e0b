"""The API's error codes: one enum, each with its status and title, refused when unknown."""

from __future__ import annotations

import json

import pytest

from kernel.problems import PROBLEMS, Code, DomainError, problem_body


def test_every_code_has_exactly_one_problem():
    assert set(PROBLEMS) == set(Code)


def test_a_domain_error_takes_a_code_or_its_string_and_keeps_the_code():
    by_member = DomainError(Code.POLICY_DENIED)
    by_string = DomainError("policy_denied")

    assert by_member.code is Code.POLICY_DENIED
    assert by_string.code is Code.POLICY_DENIED
    assert by_string.status == 403


def test_an_unknown_code_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown problem code 'policy_deny'"):
        DomainError("policy_deny")


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
