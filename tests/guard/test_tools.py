"""The built-in declare_plan tool, for OpenAI-style, Anthropic-style and MCP tool lists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from jsonschema import Draft202012Validator

from guard.agent.tools import (
    DECLARE_PLAN_TOOL,
    anthropic_tool,
    declare_plan_parameters,
    declare_plan_tool,
    mcp_tool,
    openai_tool,
)
from guard.plan import plan_json_schema, validate_plan
from tests.conftest import plan_document

from .strategies_v2 import v2_plans


def schema_of(style: str) -> dict:
    tool = declare_plan_tool(style)
    if style == "openai":
        assert tool["type"] == "function"
        assert tool["function"]["name"] == DECLARE_PLAN_TOOL
        return tool["function"]["parameters"]
    if style == "anthropic":
        assert tool["name"] == DECLARE_PLAN_TOOL
        return tool["input_schema"]
    assert tool["name"] == DECLARE_PLAN_TOOL
    return tool["inputSchema"]


@pytest.mark.parametrize("style", ["openai", "anthropic", "mcp"])
def test_each_style_carries_the_version_2_plan_schema_alone(style):
    schema = schema_of(style)

    version_2 = plan_json_schema(version=2)
    without_marker = {key: value for key, value in version_2.items() if key != "$schema"}
    assert {key: value for key, value in schema.items() if key != "$schema"} == without_marker
    # One object at the root, as tool-calling APIs want: no oneOf of the versions.
    assert schema["type"] == "object"
    assert "oneOf" not in schema
    assert schema["properties"]["version"]["const"] == 2
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(plan_document(version=2))
    assert not Draft202012Validator(schema).is_valid(plan_document())


def test_the_description_names_what_version_2_adds():
    for tool in (openai_tool()["function"], anthropic_tool(), mcp_tool()):
        for word in (
            "type",
            "maxLength",
            "subpath",
            "url",
            "cidr",
            "argv",
            "additionalArgs",
            "id",
            "after",
            "budgets",
        ):
            assert word in tool["description"].replace(",", " ").split(), word


def test_the_description_tells_the_model_to_plan_before_reading_output():
    for tool in (openai_tool()["function"], anthropic_tool(), mcp_tool()):
        assert "before you read any tool output" in tool["description"]


def test_the_responses_api_form_is_flat():
    tool = openai_tool(api="responses")

    assert tool["type"] == "function"
    assert tool["name"] == DECLARE_PLAN_TOOL
    assert tool["parameters"] == declare_plan_parameters()


def test_mcp_keeps_the_2020_12_marker_and_the_others_drop_it():
    assert mcp_tool()["inputSchema"]["$schema"].endswith("2020-12/schema")
    assert "$schema" not in anthropic_tool()["input_schema"]
    assert "$schema" not in openai_tool()["function"]["parameters"]


def test_an_unknown_style_is_refused():
    with pytest.raises(ValueError, match="unknown tool style"):
        declare_plan_tool("langchain")  # type: ignore[arg-type]


# Half the profile: each example validates a plan against the JSON Schema, which is slow.
@settings(max_examples=settings.default.max_examples // 2)
@given(document=v2_plans())
def test_plans_the_guard_accepts_satisfy_the_tool_schema(document):
    validate_plan(document)

    Draft202012Validator(declare_plan_parameters()).validate(document)
