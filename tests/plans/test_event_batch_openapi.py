"""The OpenAPI document describes the event batch with the guard's own declaration of it."""

from __future__ import annotations

from guard.events import event_batch_json_schema
from plans.serializers import openapi_30_schema


def _openapi(client) -> dict:
    response = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def test_the_events_body_is_the_guards_event_batch_schema(client):
    document = _openapi(client)
    body = document["paths"]["/v1/plans/{plan_id}/events"]["post"]["requestBody"]
    reference = body["content"]["application/json"]["schema"]["$ref"]
    name = reference.removeprefix("#/components/schemas/")

    assert document["components"]["schemas"][name] == openapi_30_schema(event_batch_json_schema())


def test_the_component_keeps_the_guards_limits_and_says_no_other_keys(client):
    guard = event_batch_json_schema()
    component = _openapi(client)["components"]["schemas"]["EventBatchRequest"]

    assert component["additionalProperties"] is False
    assert set(component["properties"]) == set(guard["properties"])
    events = component["properties"]["events"]
    assert events["maxItems"] == guard["properties"]["events"]["maxItems"]
    assert events["items"]["properties"]["step"]["nullable"] is True
    assert events["items"]["required"] == ["at", "tool", "decision"]
