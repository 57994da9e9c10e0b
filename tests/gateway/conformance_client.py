"""A client for the MCP conformance suite's client scenarios, on the official Python SDK:
``conformance client --command "python conformance_client.py [--via-gateway]"`` starts it
with the scenario's server URL last and the scenario's name in MCP_CONFORMANCE_SCENARIO.

Straight to that server over streamable HTTP; with ``--via-gateway`` through
`plangate-mcp --upstream-url URL` over stdio; with ``--via-http-gateway`` through
`plangate-mcp serve --listen ... --upstream-url URL`, which it starts and reaches over
streamable HTTP with the agent's key as its bearer credential (PLANGATE_URL,
PLANGATE_ISSUER and PLANGATE_API_KEY from the environment). Through a gateway it first asks
for the tools and declares a plan of one step each. Then it does what the scenario expects
of a client."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

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


def http_gateway(upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    """`plangate-mcp serve` in front of ``upstream`` on a free port, once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listen = ["serve", "--listen", f"127.0.0.1:{port}", "--upstream-url", upstream]
    process = subprocess.Popen([sys.executable, "-m", "guard.gateway", *listen])
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"plangate-mcp serve did not answer at {url}")


@asynccontextmanager
async def connect(url: str, via: str) -> AsyncIterator[Client]:
    if via == "http-gateway":
        process, gateway_url = http_gateway(url)
        bearer = {"Authorization": f"Bearer {os.environ['PLANGATE_API_KEY']}"}
        try:
            async with (
                create_mcp_http_client(headers=bearer) as http,
                Client(
                    streamable_http_client(gateway_url, http_client=http),
                    mode="legacy",
                    elicitation_callback=accept_defaults,
                ) as client,
            ):
                yield client
        finally:
            process.terminate()
            process.wait(timeout=10)
        return
    server: StdioServerParameters | str = url
    if via == "gateway":
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "guard.gateway", "--upstream-url", url],
            env=dict(os.environ),
        )
    async with Client(server, mode="legacy", elicitation_callback=accept_defaults) as client:
        yield client


async def main(url: str, via: str, scenario: str) -> None:
    async with connect(url, via) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        if via:
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
        next((arg.removeprefix("--via-") for arg in sys.argv[1:-1]), ""),
        os.environ.get("MCP_CONFORMANCE_SCENARIO", ""),
    )
