"""A tool error through `plangate-mcp` (a result with ``isError: true``) is a call that did
not run to its end: a required step whose only call failed has not run, and the plan its
guard ends is ``ended``, not ``completed``."""

from __future__ import annotations

import anyio
import pytest
from mcp.client import Client
from mcp_types import CallToolResult

from guard.agent.tools import DECLARE_PLAN_TOOL
from plans.models import Plan, PlanEventBatch

from .conftest import gateway_parameters

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

# `add` takes two integers: the server answers a call with text for one as a tool error.
REQUIRED_ADD = {
    "version": 1,
    "goal": "Add two numbers",
    "user": "alice@acme.dev",
    "steps": [{"tool": "echo"}, {"tool": "add", "required": True}],
}


def run_calls(control_plane, *calls: dict) -> list[CallToolResult]:
    async def scenario() -> list[CallToolResult]:
        async with Client(gateway_parameters(control_plane)) as client:
            declared = await client.call_tool(DECLARE_PLAN_TOOL, dict(REQUIRED_ADD))
            assert declared.is_error is False
            return [await client.call_tool(call["name"], call["arguments"]) for call in calls]

    return anyio.run(scenario)


def ended_plan() -> Plan:
    """The plan once its guard reported its end (the gateway delivers it as it exits)."""
    plan = Plan.objects.get()
    assert PlanEventBatch.objects.filter(plan=plan).exclude(end_outcome="").exists()
    return plan


def test_a_required_step_whose_tool_answered_an_error_has_not_run(control_plane):
    (result,) = run_calls(control_plane, {"name": "add", "arguments": {"a": "one", "b": 2}})

    assert result.is_error is True  # the server's own tool error, passed on unchanged
    plan = ended_plan()
    assert plan.status == Plan.Status.ENDED
    assert plan.end_reason == "required step(s) did not complete: step 2 (add): its call failed"


def test_a_required_step_whose_tool_returned_completes_the_plan(control_plane):
    (result,) = run_calls(control_plane, {"name": "add", "arguments": {"a": 1, "b": 2}})

    assert result.is_error is False
    plan = ended_plan()
    assert plan.status == Plan.Status.COMPLETED
    assert plan.end_reason == ""
