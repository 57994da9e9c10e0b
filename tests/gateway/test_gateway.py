"""`plangate-mcp` in front of a real MCP server and a real control plane, driven by the
SDK's own client: what the client sees is the server's, except that every tools/call is
the guard's to decide first."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from guard.agent.tools import DECLARE_PLAN_TOOL, mcp_tool
from plans.models import Plan

from .conftest import GATEWAY_PLAN, UPSTREAM_COMMAND, gateway_parameters

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

BARE_SERVER = StdioServerParameters(command=UPSTREAM_COMMAND[0], args=UPSTREAM_COMMAND[1:])


def text(result: CallToolResult) -> str:
    (content,) = result.content
    assert content.type == "text"
    return content.text


def comparable(result: CallToolResult) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def declare(client: Client, plan: dict[str, Any] | None = None) -> CallToolResult:
    return await client.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(plan or GATEWAY_PLAN))


def test_the_client_sees_the_servers_tools_and_declare_plan(control_plane):
    async def scenario() -> tuple[list[Any], list[Any]]:
        async with Client(BARE_SERVER) as bare:
            bare_tools = (await bare.list_tools()).tools
        async with Client(gateway_parameters(control_plane)) as client:
            return bare_tools, (await client.list_tools()).tools

    bare_tools, tools = anyio.run(scenario)

    assert [tool.name for tool in tools] == [DECLARE_PLAN_TOOL, "echo", "add", "count", "die"]
    assert tools[0].model_dump(mode="json", by_alias=True, exclude_none=True) == mcp_tool()
    # The server's own tools, as the server describes them.
    assert [tool.model_dump() for tool in tools[1:]] == [tool.model_dump() for tool in bare_tools]


def test_every_call_before_a_plan_is_blocked_with_no_plan(control_plane):
    async def scenario() -> list[CallToolResult]:
        async with Client(gateway_parameters(control_plane)) as client:
            return [
                await client.call_tool("echo", {"text": "hello"}),
                await client.call_tool("add", {"a": 1, "b": 2}),
            ]

    results = anyio.run(scenario)

    for result in results:
        assert result.is_error is True
        assert text(result).startswith("no_plan: ")
        assert result.meta is not None
        assert result.meta["plangate/decision"] == {
            "code": "no_plan",
            "step": None,
            "stepIndex": None,
            "stepNumber": None,
            "rule": None,
        }
        # beside it, the SEP-2643 envelope (tests/gateway/test_gateway_denials.py)
        assert result.meta["io.modelcontextprotocol/authorization"]["code"] == "no_plan"
    assert not Plan.objects.exists()


def test_a_declared_plan_lets_its_calls_through_unchanged_and_blocks_the_rest(control_plane):
    async def scenario() -> dict[str, Any]:
        async with Client(BARE_SERVER) as bare:
            direct = await bare.call_tool("echo", {"text": "hello"})
        async with Client(gateway_parameters(control_plane)) as client:
            declared = await declare(client)
            allowed = await client.call_tool("echo", {"text": "hello"})
            other_argument = await client.call_tool("echo", {"text": "goodbye"})
            outside = await client.call_tool("add", {"a": 1, "b": 2})
            again = await declare(client)
        return {
            "direct": direct,
            "declared": declared,
            "allowed": allowed,
            "other_argument": other_argument,
            "outside": outside,
            "again": again,
        }

    results = anyio.run(scenario)

    declared = results["declared"]
    assert declared.is_error is False
    assert declared.structured_content is not None
    assert declared.structured_content["ok"] is True
    plan = Plan.objects.get()
    assert declared.structured_content["planId"] == plan.pk
    assert plan.agent_id == control_plane.agent.agent.pk
    # Forwarded, and the server's answer reaches the client as the bare server gives it.
    assert comparable(results["allowed"]) == comparable(results["direct"])
    assert results["allowed"].structured_content == {"text": "hello"}
    for blocked in ("other_argument", "outside"):
        assert results[blocked].is_error is True
        assert text(results[blocked]).startswith("not_in_plan: ")
    # A tool has returned: a new plan now could be written by the tool's output.
    again = results["again"]
    assert again.is_error is True
    assert text(again).startswith("declare_after_output: ")
    assert again.structured_content is not None
    assert again.structured_content["code"] == "declare_after_output"
    assert Plan.objects.count() == 1


def test_progress_notifications_reach_the_client(control_plane):
    async def scenario() -> tuple[CallToolResult, list[tuple[float, float | None, str | None]]]:
        reports: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            reports.append((progress, total, message))

        async with Client(gateway_parameters(control_plane)) as client:
            await declare(client)
            result = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)
        return result, reports

    result, progress = anyio.run(scenario)

    assert result.is_error is False
    assert text(result) == "counted to 3"
    assert progress == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


def test_resources_and_prompts_pass_through_unchanged(control_plane):
    async def read(client: Client) -> list[dict[str, Any]]:
        answers = [
            await client.list_resources(),
            await client.list_resource_templates(),
            await client.read_resource("notes://readme"),
            await client.read_resource("notes://groceries"),
            await client.list_prompts(),
            await client.get_prompt("summarise", {"text": "the minutes"}),
        ]
        return [answer.model_dump(mode="json", exclude_none=True) for answer in answers]

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with Client(BARE_SERVER) as bare:
            direct = await read(bare)
        async with Client(gateway_parameters(control_plane)) as client:
            return direct, await read(client)

    direct, through_gateway = anyio.run(scenario)

    assert through_gateway == direct
    assert through_gateway[2]["contents"][0]["text"] == "The notes of the gateway's test server."


def test_a_server_over_streamable_http_is_guarded_the_same_way(control_plane, http_upstream):
    async def scenario() -> dict[str, Any]:
        parameters = gateway_parameters(control_plane, "--upstream-url", http_upstream)
        async with Client(parameters) as client:
            return {
                "tools": [tool.name for tool in (await client.list_tools()).tools],
                "before": await client.call_tool("echo", {"text": "hello"}),
                "declared": await declare(client),
                "allowed": await client.call_tool("echo", {"text": "hello"}),
                "outside": await client.call_tool("add", {"a": 1, "b": 2}),
                "readme": await client.read_resource("notes://readme"),
            }

    results = anyio.run(scenario)

    assert results["tools"] == [DECLARE_PLAN_TOOL, "echo", "add", "count", "die"]
    assert text(results["before"]).startswith("no_plan: ")
    assert results["declared"].is_error is False
    assert results["allowed"].is_error is False
    assert results["allowed"].structured_content == {"text": "hello"}
    assert text(results["outside"]).startswith("not_in_plan: ")
    assert results["readme"].contents[0].text == "The notes of the gateway's test server."
    assert Plan.objects.count() == 1
