"""A client for the MCP conformance suite's client scenarios, on the official Python SDK:
``conformance client --command "python conformance_client.py [--via-gateway]"`` starts it
with the scenario's server URL last and the scenario's name in MCP_CONFORMANCE_SCENARIO.

Straight to that server over streamable HTTP, or with ``--via-gateway`` through
`plangate-mcp --upstream-url URL` (PLANGATE_URL, PLANGATE_ISSUER and PLANGATE_API_KEY from
the environment), which it first asks for the tools and declares a plan of one step each.
Then it does what the scenario expects of a client."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from guard.agent.tools import DECLARE_PLAN_TOOL


async def accept_defaults(context: Any, params: Any) -> types.ElicitResult:
    """Accept with the defaults the requested schema gives (SEP-1034)."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: field["default"]
        for name, field in schema.get("properties", {}).items()
        if "default" in field
    }
    return types.ElicitResult(action="accept", content=content)


async def main(url: str, via_gateway: bool, scenario: str) -> None:
    server: StdioServerParameters | str = url
    if via_gateway:
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "guard.gateway", "--upstream-url", url],
            env=dict(os.environ),
        )
    async with Client(server, mode="legacy", elicitation_callback=accept_defaults) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        if via_gateway:
            steps = [{"tool": tool} for tool in tools if tool != DECLARE_PLAN_TOOL]
            if steps:
                plan = {"version": 1, "goal": scenario, "user": "alice@acme.dev", "steps": steps}
                declared = await client.call_tool(DECLARE_PLAN_TOOL, plan)
                assert not declared.is_error, declared
        if scenario == "tools_call":
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario.startswith("elicitation"):
            for tool in tools:
                if "elicitation" in tool:
                    await client.call_tool(tool, {})
        elif scenario == "sse-retry":
            await client.call_tool("test_reconnection", {})


if __name__ == "__main__":
    anyio.run(
        main,
        sys.argv[-1],
        "--via-gateway" in sys.argv[1:-1],
        os.environ.get("MCP_CONFORMANCE_SCENARIO", ""),
    )
