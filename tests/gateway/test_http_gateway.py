"""``plangate-mcp serve``: the gateway over streamable HTTP, driven by the SDK's own
streamable-HTTP client in both protocol revisions (2025-11-25 sessions, 2026-07-28
stateless), in front of a real control plane."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from guard.agent.tools import DECLARE_PLAN_TOOL
from guard.gateway.http import PLAN_META_KEY

from .conftest import GATEWAY_PLAN, UPSTREAM_COMMAND, gateway_parameters, http_gateway

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

MODERN = "2026-07-28"
LEGACY = "legacy"

COUNT_PLAN = {
    "version": 1,
    "goal": "Count",
    "user": "alice@acme.dev",
    "steps": [{"tool": "count", "args": {"n": {"lte": 5}}}],
}


@asynccontextmanager
async def client(url: str, credential: str, mode: str) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {credential}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as connected,
    ):
        yield connected


def text(result: CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_a_client_lists_declares_and_is_decided_in_both_revisions(control_plane, mode):
    key = control_plane.agent.api_key

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with http_gateway(control_plane, *UPSTREAM_COMMAND) as url:
            async with client(url, key, mode) as mcp:
                tools = await mcp.list_tools()
                seen["tools"] = [tool.name for tool in tools.tools]
                seen["cache_scope"] = tools.cache_scope
                seen["before"] = await mcp.call_tool("echo", {"text": "hello"})
                declared = await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                seen["declared"] = declared
                plan = {PLAN_META_KEY: declared.structured_content["planId"]}
                meta = plan if mode == MODERN else None
                seen["allowed"] = await mcp.call_tool("echo", {"text": "hello"}, meta=meta)
                seen["blocked"] = await mcp.call_tool("echo", {"text": "rm -rf /"}, meta=meta)
                seen["outside"] = await mcp.call_tool("add", {"a": 1, "b": 2}, meta=meta)
        return seen

    seen = anyio.run(scenario)

    assert seen["tools"][0] == DECLARE_PLAN_TOOL
    assert {"echo", "add", "count"} <= set(seen["tools"])
    assert text(seen["before"]).startswith("no_plan: ")
    assert seen["declared"].is_error is False
    assert seen["allowed"].is_error is False
    assert seen["allowed"].structured_content == {"text": "hello"}
    assert text(seen["blocked"]).startswith("not_in_plan: ")
    assert text(seen["outside"]).startswith("not_in_plan: ")
    # The structured denial, the same in both revisions.
    assert "io.modelcontextprotocol/authorization" in seen["blocked"].meta
    if mode == MODERN:
        # The list is the gateway's (declare_plan joined it): one client's to cache.
        assert seen["cache_scope"] == "private"
        assert seen["declared"].meta[PLAN_META_KEY] == seen["declared"].structured_content["planId"]


def test_stateless_requests_are_decided_under_the_plan_they_name(control_plane):
    """Three requests, no session: the plan's budget (echo x2) is spent across them."""
    key = control_plane.agent.api_key

    async def scenario() -> list[CallToolResult]:
        with http_gateway(control_plane, *UPSTREAM_COMMAND) as url:
            async with client(url, key, MODERN) as mcp:
                declared = await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                meta = {PLAN_META_KEY: declared.meta[PLAN_META_KEY]}
            results = []
            for _ in range(3):  # a new client each time: nothing shared but the plan id
                async with client(url, key, MODERN) as mcp:
                    results.append(await mcp.call_tool("echo", {"text": "hello"}, meta=meta))
            async with client(url, key, MODERN) as mcp:
                results.append(await mcp.call_tool("echo", {"text": "hello"}))
        return results

    first, second, spent, unnamed = anyio.run(scenario)

    assert first.is_error is False and second.is_error is False
    assert text(spent).startswith("max_calls_exceeded: ")
    assert text(unnamed).startswith("no_plan: ")


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
def test_two_clients_at_once_each_have_their_own_plan(control_plane, mode):
    key = control_plane.agent.api_key

    async def scenario() -> dict[str, CallToolResult]:
        results: dict[str, CallToolResult] = {}
        with http_gateway(control_plane, "--", *UPSTREAM_COMMAND) as url:
            # Both connected at once; one declaration after the other (the live server's
            # SQLite takes one writer at a time), then both call at once.
            a_declared, b_declared = anyio.Event(), anyio.Event()

            async def run(who: str, plan: dict, allowed: tuple, other: tuple) -> None:
                async with client(url, key, mode) as mcp:
                    if who == "b":
                        await a_declared.wait()
                    declared = await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(plan))
                    (a_declared if who == "a" else b_declared).set()
                    await b_declared.wait()
                    meta = (
                        {PLAN_META_KEY: declared.structured_content["planId"]}
                        if mode == MODERN
                        else None
                    )
                    results[f"{who} allowed"] = await mcp.call_tool(*allowed, meta=meta)
                    results[f"{who} other"] = await mcp.call_tool(*other, meta=meta)

            async with anyio.create_task_group() as both:
                both.start_soon(
                    run, "a", GATEWAY_PLAN, ("echo", {"text": "hello"}), ("add", {"a": 1, "b": 1})
                )
                both.start_soon(
                    run, "b", COUNT_PLAN, ("count", {"n": 2}), ("echo", {"text": "hello"})
                )
        return results

    results = anyio.run(scenario)

    assert results["a allowed"].is_error is False
    assert results["b allowed"].is_error is False
    assert text(results["a other"]).startswith("not_in_plan: ")
    assert text(results["b other"]).startswith("not_in_plan: ")


def test_a_call_sent_beside_declare_plan_over_http_is_allowed(control_plane):
    key = control_plane.agent.api_key

    async def scenario() -> dict[str, CallToolResult]:
        results: dict[str, CallToolResult] = {}
        with http_gateway(control_plane, *UPSTREAM_COMMAND) as url:
            async with client(url, key, LEGACY) as mcp:

                async def call(name: str, arguments: dict) -> None:
                    results[name] = await mcp.call_tool(name, arguments)

                async with anyio.create_task_group() as turn:
                    turn.start_soon(call, DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                    turn.start_soon(call, "echo", {"text": "hello"})
        return results

    results = anyio.run(scenario)

    assert results[DECLARE_PLAN_TOOL].is_error is False
    assert results["echo"].is_error is False, results["echo"]


def test_a_request_without_an_accepted_credential_is_refused_401(control_plane, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# issued by the operator\ngw_key_one\n")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with http_gateway(control_plane, "--client-keys", str(keys), *UPSTREAM_COMMAND) as url:
        answers = {
            credential: httpx.post(
                url,
                json=initialize,
                headers={**headers, **({"Authorization": credential} if credential else {})},
                timeout=30,
            )
            for credential in (
                None,
                "Bearer gw_key_two",
                "Bearer pg_not_a_key_the_control_plane_knows",
                "Basic Z3dfa2V5X29uZQ==",
                "Bearer gw_key_one",
                f"Bearer {control_plane.agent.api_key}",
            )
        }

    for credential in (None, "Bearer gw_key_two", "Basic Z3dfa2V5X29uZQ=="):
        assert answers[credential].status_code == 401, credential
        assert answers[credential].headers["www-authenticate"].startswith("Bearer ")
    refused = answers["Bearer pg_not_a_key_the_control_plane_knows"]
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert answers["Bearer gw_key_one"].status_code == 200
    assert answers[f"Bearer {control_plane.agent.api_key}"].status_code == 200


def test_a_gateway_key_declares_with_the_gateways_own_api_key(control_plane):
    async def scenario() -> CallToolResult:
        with http_gateway(
            control_plane,
            *UPSTREAM_COMMAND,
            environment={"PLANGATE_GATEWAY_CLIENT_KEYS": "gw_issued_key"},
        ) as url:
            async with client(url, "gw_issued_key", LEGACY) as mcp:
                await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                return await mcp.call_tool("echo", {"text": "hello"})

    assert anyio.run(scenario).is_error is False


def test_the_upstream_gets_its_own_header_and_never_the_clients_credential(
    control_plane, recording_upstream
):
    url_upstream, record = recording_upstream
    key = control_plane.agent.api_key

    async def scenario() -> None:
        with http_gateway(
            control_plane,
            "--upstream-url",
            url_upstream,
            "--upstream-header",
            "X-Upstream-Token: upstream-secret",
        ) as url:
            for mode in (LEGACY, MODERN):
                async with client(url, key, mode) as mcp:
                    declared = await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                    meta = {PLAN_META_KEY: declared.structured_content["planId"]}
                    result = await mcp.call_tool(
                        "echo", {"text": "hello"}, meta=meta if mode == MODERN else None
                    )
                    assert result.is_error is False

    anyio.run(scenario)

    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert any(request.get("mcp-method") == "tools/call" for request in requests)
    for request in requests:
        assert request.get("x-upstream-token") == "upstream-secret"
        assert "authorization" not in request
        values = " ".join(request.values())
        assert key not in values
        assert "eyJ" not in values  # no intent token (a JWS) in any header


def test_routing_headers_that_disagree_with_the_body_are_refused(control_plane, recording_upstream):
    url_upstream, record = recording_upstream
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {control_plane.agent.api_key}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
    }
    with http_gateway(control_plane, "--upstream-url", url_upstream) as url:
        wrong_name = httpx.post(url, json=call, headers={**headers, "Mcp-Name": "add"}, timeout=30)
        wrong_method = httpx.post(
            url,
            json=call,
            headers={**headers, "Mcp-Method": "tools/list", "Mcp-Name": "echo"},
            timeout=30,
        )
        locate = {
            **call,
            "params": {"name": "locate", "arguments": {"region": "us"}, "_meta": meta},
        }
        locate_headers = {**headers, "Mcp-Name": "locate"}
        wrong_param = httpx.post(
            url, json=locate, headers={**locate_headers, "Mcp-Param-Region": "eu"}, timeout=30
        )
        right_param = httpx.post(
            url, json=locate, headers={**locate_headers, "Mcp-Param-Region": "us"}, timeout=30
        )
        unsupported = httpx.post(
            url,
            json={
                **call,
                "params": {
                    **call["params"],
                    "_meta": {**meta, "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
                },
            },
            headers={**headers, "MCP-Protocol-Version": "2099-01-01", "Mcp-Name": "echo"},
            timeout=30,
        )

    for answer in (wrong_name, wrong_method, wrong_param):
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == -32020  # HEADER_MISMATCH
        assert answer.json()["id"] == 7
    # Headers that agree reach the guard, which decides (no plan here).
    assert right_param.status_code == 200
    assert right_param.json()["result"]["content"][0]["text"].startswith("no_plan: ")
    assert unsupported.status_code == 400
    assert unsupported.json()["error"]["data"]["supported"] == [MODERN]
    relayed = [json.loads(line) for line in record.read_text().splitlines()]
    assert not any(request.get("mcp-method") == "tools/call" for request in relayed)


@pytest.fixture
def recording_upstream(tmp_path):
    """The test server over HTTP, recording each request's headers; (its URL, the record)."""
    import subprocess
    import sys
    from pathlib import Path

    from tests.integration.processes import free_port

    from .conftest import wait_for_http

    record = tmp_path / "headers.jsonl"
    record.touch()
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).parent / "recording_upstream.py"),
            str(port),
            str(record),
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_http(url, process, "the recording server")
        record.write_text("")
        yield url, record
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_stdio_gateway_takes_its_command_without_a_separator(control_plane):
    """``plangate-mcp --url U COMMAND...``: everything after the options is the command."""
    parameters = gateway_parameters(control_plane, *UPSTREAM_COMMAND)
    assert "--" not in parameters.args

    async def scenario() -> list[str]:
        async with Client(parameters) as mcp:
            return [tool.name for tool in (await mcp.list_tools()).tools]

    tools = anyio.run(scenario)

    assert tools[0] == DECLARE_PLAN_TOOL
    assert "echo" in tools


def test_a_sessions_progress_comes_on_the_calls_own_stream(control_plane):
    """The test server's ``count`` reports progress: the client gets it for its call."""
    key = control_plane.agent.api_key
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def scenario() -> CallToolResult:
        with http_gateway(control_plane, *UPSTREAM_COMMAND) as url:
            async with client(url, key, LEGACY) as mcp:
                await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                return await mcp.call_tool("count", {"n": 3}, progress_callback=on_progress)

    result = anyio.run(scenario)

    assert result.is_error is False
    assert progress == [1, 2, 3]
