"""POST /v1/plans takes a version-2 plan as guard.plan validates it, and the OpenAPI
document describes both versions with the guard's own schema."""

from __future__ import annotations

import copy

from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from guard.plan import plan_hash, plan_json_schema, validate_plan
from kernel.problems import Code
from plans.models import Plan
from plans.serializers import openapi_30_schema

from .helpers import assert_problem, claims_of, table_counts

URL = "/v1/plans"

PLAN_V2 = {
    "version": 2,
    "goal": "Triage the open issues, then label them",
    "user": "alice@acme.dev",
    "steps": [
        {"tool": "github_list_issues", "id": "list", "args": {"repo": {"eq": "acme/app"}}},
        {
            "tool": "github_label_issue",
            "id": "label",
            "after": ["list"],
            "args": {"repo": {"eq": "acme/app"}, "label": {"maxLength": 40}},
            "additionalArgs": False,
            "maxCalls": 5,
        },
    ],
    "budgets": [{"id": "labels", "arg": "count", "steps": ["label"], "max": 10}],
}


def declare(client: APIClient, plan: object):
    return client.post(URL, {"plan": plan}, format="json")


def test_a_version_2_plan_is_issued_with_its_defaults_signed(agent):
    response = declare(agent.client, PLAN_V2)

    assert response.status_code == 201, response.content
    body = response.json()
    claims = claims_of(body["token"])
    normalized = validate_plan(PLAN_V2)
    assert claims["plan"] == normalized
    assert claims["plan"]["steps"][0]["after"] == []
    assert claims["plan"]["steps"][0]["additionalArgs"] is True
    assert body["planHash"] == claims["ph"] == plan_hash(normalized)
    stored = Plan.objects.get(pk=body["id"])
    assert (stored.document, stored.hash) == (normalized, plan_hash(normalized))


def test_a_cycle_is_refused_with_its_path_and_writes_nothing(agent):
    document = copy.deepcopy(PLAN_V2)
    document["steps"][0]["after"] = ["label"]
    before = table_counts()

    response = declare(agent.client, document)

    problem = assert_problem(response, 400, Code.INVALID_PLAN)
    assert problem["errors"] == [
        {"path": "plan.steps[1].after", "detail": "forms a cycle: label -> list -> label"}
    ]
    assert table_counts() == before


def test_an_unknown_budget_step_is_refused_with_its_path_and_writes_nothing(agent):
    document = copy.deepcopy(PLAN_V2)
    document["budgets"][0]["steps"] = ["label", "github_label_issue"]
    before = table_counts()

    response = declare(agent.client, document)

    problem = assert_problem(response, 400, Code.INVALID_PLAN)
    assert problem["errors"] == [
        {
            "path": "plan.budgets[0].steps[1]",
            "detail": "names no step id 'github_label_issue'",
        }
    ]
    assert table_counts() == before


def test_the_openapi_plan_field_is_one_of_the_guards_version_schemas(client):
    document = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    body = document["components"]["schemas"]["PlanDeclarationRequest"]

    plan = body["properties"]["plan"]

    assert plan == {
        **openapi_30_schema(plan_json_schema()),
        "description": "the plan document, version 1 or 2",
    }
    assert [branch["properties"]["version"]["enum"] for branch in plan["oneOf"]] == [[1], [2]]
    budget_max = plan["oneOf"][1]["properties"]["budgets"]["items"]["properties"]["max"]
    assert (budget_max["minimum"], budget_max["exclusiveMinimum"]) == (0, True)


def test_the_openapi_document_with_both_versions_is_valid_openapi(client):
    document = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    validate_schema(document)  # raises on a keyword or value OpenAPI 3.0 does not allow
