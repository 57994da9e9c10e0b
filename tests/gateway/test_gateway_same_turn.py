"""A client that sends ``declare_plan`` and a tool call in one turn, as models do and as
MCP clients then send them (concurrently, the declaration first): the call waits for the
declaration in the gateway and is decided under the new plan, never ``no_plan``."""

from __future__ import annotations

import copy

import anyio
import pytest
from mcp.client import Client
from mcp_types import CallToolResult

from guard.agent.tools import DECLARE_PLAN_TOOL

from .conftest import GATEWAY_PLAN, UPSTREAM_COMMAND, gateway_parameters

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes


def test_a_call_sent_beside_declare_plan_through_the_sdk_client_is_allowed(control_plane):
    async def turn() -> dict[str, CallToolResult]:
        results: dict[str, CallToolResult] = {}
        async with Client(gateway_parameters(control_plane)) as client:

            async def call(key: str, tool: str, arguments: dict) -> None:
                results[key] = await client.call_tool(tool, arguments)

            async with anyio.create_task_group() as turn_calls:
                turn_calls.start_soon(
                    call, "declare", DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN)
                )
                turn_calls.start_soon(call, "echo", "echo", {"text": "hello"})
                turn_calls.start_soon(call, "count", "count", {"n": 3})
            # The plan was in force for both, and still holds its remaining budget.
            results["third"] = await client.call_tool("echo", {"text": "hello"})
            results["spent"] = await client.call_tool("echo", {"text": "hello"})
        return results

    results = anyio.run(turn)

    assert results["declare"].is_error is False
    for key in ("echo", "count", "third"):
        assert results[key].is_error is False, results[key]
    assert results["spent"].is_error is True
    assert results["spent"].content[0].text.startswith("max_calls_exceeded: ")


def test_with_no_declare_wait_the_sibling_call_is_decided_at_once(control_plane):
    async def turn() -> dict[str, CallToolResult]:
        results: dict[str, CallToolResult] = {}
        parameters = gateway_parameters(
            control_plane, "--declare-wait", "0", "--", *UPSTREAM_COMMAND
        )
        async with Client(parameters) as client:

            async def call(key: str, tool: str, arguments: dict) -> None:
                results[key] = await client.call_tool(tool, arguments)

            async with anyio.create_task_group() as turn_calls:
                turn_calls.start_soon(
                    call, "declare", DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN)
                )
                turn_calls.start_soon(call, "echo", "echo", {"text": "hello"})
        return results

    results = anyio.run(turn)

    assert results["declare"].is_error is False
    assert results["echo"].content[0].text.startswith("no_plan: ")
