"""A tool error through `plangate-mcp` (a result with ``isError: true``) is a call that did
not run to its end: a required step whose only call failed has not run, and the plan its
guard ends is ``ended``, not ``completed``.

The client is raw JSON-RPC lines, as in test_gateway_ends.py, so that the test closes the
gateway's stdin and waits for it to exit: the guard's close (the end of the plan, reported
to the control plane) is then over, with no client killing the process first."""

from __future__ import annotations

from typing import Any

import pytest

from guard.agent.tools import DECLARE_PLAN_TOOL
from plans.models import Plan, PlanEventBatch

from .conftest import UPSTREAM_COMMAND, gateway_arguments
from .test_gateway_ends import INITIALIZE, INITIALIZED, RawGateway

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

# `add` takes two integers: the server answers a call with text for one as a tool error.
REQUIRED_ADD = {
    "version": 1,
    "goal": "Add two numbers",
    "user": "alice@acme.dev",
    "steps": [{"tool": "echo"}, {"tool": "add", "required": True}],
}


def call_through_the_gateway(control_plane, arguments: dict[str, Any]) -> dict[str, Any]:
    """Declare REQUIRED_ADD, call `add` with `arguments`, close stdin; the call's result
    once the gateway has exited (status 0: the client closed the connection)."""
    gateway = RawGateway(
        gateway_arguments(control_plane.url, control_plane.issuer, "--", *UPSTREAM_COMMAND),
        api_key=control_plane.agent.api_key,
    )
    try:
        gateway.send(INITIALIZE)
        gateway.answer(1)
        gateway.send(INITIALIZED)
        for request_id, name, call_arguments in (
            (2, DECLARE_PLAN_TOOL, REQUIRED_ADD),
            (3, "add", arguments),
        ):
            gateway.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": call_arguments},
                }
            )
            result = gateway.answer(request_id)["result"]
        assert gateway.process.stdin is not None
        gateway.process.stdin.close()
        status, stderr = gateway.wait()
        assert status == 0, stderr
        return result
    finally:
        gateway.close()


def ended_plan() -> Plan:
    plan = Plan.objects.get()
    assert PlanEventBatch.objects.filter(plan=plan).exclude(end_outcome="").exists()
    return plan


def test_a_required_step_whose_tool_answered_an_error_has_not_run(control_plane):
    result = call_through_the_gateway(control_plane, {"a": "one", "b": 2})

    assert result["isError"] is True  # the server's own tool error, passed on unchanged
    plan = ended_plan()
    assert plan.status == Plan.Status.ENDED
    assert plan.end_reason == "required step(s) did not complete: step 2 (add): its call failed"


def test_a_required_step_whose_tool_returned_completes_the_plan(control_plane):
    result = call_through_the_gateway(control_plane, {"a": 1, "b": 2})

    assert result.get("isError") is not True
    plan = ended_plan()
    assert plan.status == Plan.Status.COMPLETED
    assert plan.end_reason == ""
