"""What the gateway changes in the messages it relays, and the headers it sets for a
streamable-HTTP server, message by message (no processes)."""

from __future__ import annotations

from mcp_types import (
    PROTOCOL_VERSION_META_KEY,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from guard.agent.session import NO_PLAN, CallDecision
from guard.agent.tools import DECLARE_PLAN_TOOL, mcp_tool
from guard.decisions import Decision
from guard.gateway.results import (
    blocked_call_result,
    call_completed,
    declare_plan_call_result,
    tools_with_declare_plan,
)
from guard.gateway.upstream import HttpHeaders, server_environment

ECHO = {"name": "echo", "inputSchema": {"type": "object"}}


def test_declare_plan_is_listed_first_and_a_server_tool_of_that_name_is_hidden():
    result, hidden = tools_with_declare_plan(
        {"tools": [ECHO, {"name": DECLARE_PLAN_TOOL, "inputSchema": {}}], "nextCursor": "2"}
    )

    assert hidden is True
    assert result == {"tools": [mcp_tool(), ECHO], "nextCursor": "2"}


def test_a_blocked_call_is_a_tool_error_starting_with_its_code():
    legacy = blocked_call_result(NO_PLAN, modern=False)
    modern = blocked_call_result(NO_PLAN, modern=True)

    assert legacy["isError"] is True
    assert legacy["content"][0]["text"] == f"no_plan: {NO_PLAN.reason}"
    assert legacy["_meta"] == {
        "plangate/decision": {
            "code": "no_plan",
            "step": None,
            "stepIndex": None,
            "stepNumber": None,
            "rule": None,
        }
    }
    assert "resultType" not in legacy
    assert modern == {**legacy, "resultType": "complete"}


def test_a_blocked_calls_step_is_named_by_its_index_and_its_number():
    spent = CallDecision(
        Decision.MAX_CALLS_EXCEEDED, "every matching step has used its maxCalls: step 2", 1
    )

    meta = blocked_call_result(spent, modern=False)["_meta"]["plangate/decision"]

    # `stepIndex` into the plan's steps, `stepNumber` as the text counts; `step` = the index.
    assert (meta["stepIndex"], meta["stepNumber"], meta["step"]) == (1, 2, 1)


def test_a_refused_declaration_is_a_tool_error_with_its_code_and_the_guards_result():
    refused = {"ok": False, "code": "invalid_plan", "detail": "the plan is invalid", "errors": []}

    result = declare_plan_call_result(refused, modern=False)

    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("invalid_plan: the plan is invalid\n{")
    assert result["structuredContent"] == refused


def test_only_a_complete_result_that_is_not_a_tool_error_completes_the_step():
    assert call_completed({"content": []}) is True
    assert call_completed({"content": [], "resultType": "complete"}) is True
    assert call_completed({"content": [], "isError": True}) is False
    assert call_completed({"resultType": "input_required", "requestState": "x"}) is False
    assert call_completed(None) is False


def test_http_headers_follow_the_handshake_and_each_modern_request():
    headers = HttpHeaders()
    initialize = JSONRPCRequest(jsonrpc="2.0", id=1, method="initialize", params={})
    listing = JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/list", params={})
    modern_call = JSONRPCRequest(
        jsonrpc="2.0",
        id=3,
        method="tools/call",
        params={"name": "echo", "_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28"}},
    )
    before = headers.metadata(listing)
    headers.initialized({"protocolVersion": "2025-11-25"})

    assert before is None
    assert headers.metadata(initialize) is None
    legacy = headers.metadata(JSONRPCNotification(jsonrpc="2.0", method="notifications/x"))
    assert legacy is not None
    assert legacy.headers == {"mcp-protocol-version": "2025-11-25"}
    modern = headers.metadata(modern_call)
    assert modern is not None
    assert modern.headers == {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    assert headers.metadata(JSONRPCResponse(jsonrpc="2.0", id=9, result={})) is None


def test_the_wrapped_server_gets_the_environment_without_the_api_key():
    environment = server_environment(
        {"PATH": "/bin", "GITHUB_TOKEN": "ghp_x", "PLANGATE_API_KEY": "pg_secret"}
    )

    assert environment == {"PATH": "/bin", "GITHUB_TOKEN": "ghp_x"}


def test_http_headers_take_the_version_from_the_servers_answer_to_initialize():
    headers = HttpHeaders()
    initialize = JSONRPCRequest(jsonrpc="2.0", id="init", method="initialize", params={})
    headers.metadata(initialize)  # on its way to the server
    headers.observe(JSONRPCResponse(jsonrpc="2.0", id="other", result={"protocolVersion": "x"}))
    before = headers.negotiated_version
    headers.observe(
        JSONRPCResponse(jsonrpc="2.0", id="init", result={"protocolVersion": "2025-11-25"})
    )

    assert before is None  # only the answer to initialize counts
    assert headers.negotiated_version == "2025-11-25"
