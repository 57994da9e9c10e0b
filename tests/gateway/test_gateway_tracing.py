"""`plangate-mcp` with traces on (OTEL_TRACES_EXPORTER), in front of a test server that
traces too, to an OTLP receiver in the test: a tools/call carrying the client's
traceparent in `_meta` is decided in an `execute_tool` span under the client's span, and
the wrapped server's span is the decision's child; a blocked call reaches no server."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from guard.agent.tools import DECLARE_PLAN_TOOL
from guard.gateway.http import PLAN_META_KEY
from tests.otlp import OtlpReceiver

from .conftest import GATEWAY_PLAN, gateway_arguments, gateway_environment, http_gateway
from .test_gateway import declare
from .test_http_gateway import MODERN, client

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

TRACED_UPSTREAM = [sys.executable, str(Path(__file__).with_name("traced_upstream.py"))]
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


def traced_environment(receiver: OtlpReceiver) -> dict[str, str]:
    """What turns a process's traces on, to `receiver`."""
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


def test_a_call_is_traced_from_the_client_through_the_decision_to_the_tool(control_plane):
    with OtlpReceiver() as receiver:
        otel = traced_environment(receiver)
        parameters = StdioServerParameters(
            command=sys.executable,
            args=gateway_arguments(control_plane.url, control_plane.issuer, "--", *TRACED_UPSTREAM),
            env={**gateway_environment(control_plane.agent.api_key), **otel},
            cwd=str(Path(__file__).resolve().parents[2]),
        )
        traceparent = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}

        async def scenario() -> None:
            async with Client(parameters) as client:
                await declare(client, GATEWAY_PLAN)
                allowed = await client.call_tool("echo", {"text": "hello"}, meta=traceparent)
                blocked = await client.call_tool("add", {"a": 1, "b": 2}, meta=traceparent)
                assert not allowed.is_error and blocked.is_error

        anyio.run(scenario)

        def complete(spans) -> bool:
            names = {span.name for span in spans}
            return {"execute_tool echo", "execute_tool add", "tools/call echo"} <= names

        spans = receiver.wait_for_spans(complete)
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (decided,) = by_name["execute_tool echo"]
    (refused,) = by_name["execute_tool add"]
    for span in (decided, refused):  # under the client's span, in its trace
        assert (span.trace_id, span.parent_span_id) == (CLIENT_TRACE, CLIENT_SPAN)
        assert span.resource["service.name"] == "plangate-mcp"
    assert decided.attributes["plangate.decision"] == "allowed"
    assert refused.attributes["plangate.decision"] == "not_in_plan"
    assert refused.status_code == 2
    (tool,) = by_name["tools/call echo"]  # the wrapped server's own span (the MCP SDK's)
    assert tool.resource["service.name"] == "upstream"
    assert (tool.trace_id, tool.parent_span_id) == (CLIENT_TRACE, decided.span_id)
    assert "tools/call add" not in by_name  # blocked: never reached the server


def test_a_stateless_call_over_http_is_traced_through_the_decision_to_the_tool(control_plane):
    """`plangate-mcp serve` in 2026-07-28's stateless mode, its upstream over stdio."""
    with OtlpReceiver() as receiver:
        otel = traced_environment(receiver)
        traceparent = {"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}

        async def scenario() -> list:
            with http_gateway(control_plane, *TRACED_UPSTREAM, environment=otel) as url:
                async with client(url, control_plane.agent.api_key, MODERN) as mcp:
                    declared = await mcp.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
                    meta = {PLAN_META_KEY: declared.meta[PLAN_META_KEY], **traceparent}
                    allowed = await mcp.call_tool("echo", {"text": "hello"}, meta=meta)
                    assert not allowed.is_error
                spans = receiver.wait_for_spans(
                    lambda spans: (
                        {"execute_tool echo", "tools/call echo"} <= {span.name for span in spans}
                    )
                )
            return spans

        spans = anyio.run(scenario)
    (decided,) = [span for span in spans if span.name == "execute_tool echo"]
    (tool,) = [span for span in spans if span.name == "tools/call echo"]
    assert (decided.trace_id, decided.parent_span_id) == (CLIENT_TRACE, CLIENT_SPAN)
    assert (tool.trace_id, tool.parent_span_id) == (CLIENT_TRACE, decided.span_id)
