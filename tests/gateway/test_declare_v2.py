"""A version-2 plan declared through `plangate-mcp`'s ``declare_plan`` tool: signed by the
control plane, then enforced by the gateway's guard before any call reaches the server
(order, a budget, closed arguments), and what it counted reported to the control plane."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp_types import CallToolResult

from guard.agent.tools import DECLARE_PLAN_TOOL
from guard.plan import plan_hash, validate_plan
from plans.models import Plan, PlanEvent

from .conftest import gateway_parameters

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

# `add` only after `echo` has returned, at most 5 in total over its `a`, and no argument
# but `a` and `b`.
PLAN = {
    "version": 2,
    "goal": "Greet, then add a little",
    "user": "alice@acme.dev",
    "steps": [
        {"id": "greet", "tool": "echo", "args": {"text": {"eq": "hello"}}},
        {
            "id": "sum",
            "tool": "add",
            "args": {"b": {"type": "integer"}},
            "after": ["greet"],
            "additionalArgs": False,
        },
    ],
    "budgets": [{"id": "total", "arg": "a", "steps": ["sum"], "max": 5}],
}


def text(result: CallToolResult) -> str:
    (content,) = result.content
    assert content.type == "text"
    return content.text


def test_a_version_2_plan_declared_through_the_gateway_is_enforced(control_plane):
    async def scenario() -> list[CallToolResult]:
        async with Client(gateway_parameters(control_plane)) as client:
            return [
                await client.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(PLAN)),
                await client.call_tool("add", {"a": 1, "b": 1}),
                await client.call_tool("echo", {"text": "hello"}),
                await client.call_tool("add", {"a": 3, "b": 1}),
                await client.call_tool("add", {"a": 3, "b": 0}),
                await client.call_tool("add", {"a": 1, "b": 1, "c": 1}),
                await client.call_tool("add", {"a": 2, "b": 2}),
            ]

    declared, early, greeted, added, over, extra, last = anyio.run(scenario)

    assert declared.is_error is False
    assert declared.structured_content is not None and declared.structured_content["ok"] is True
    plan = Plan.objects.get()
    assert plan.hash == plan_hash(validate_plan(copy.deepcopy(PLAN)))
    assert declared.structured_content["planId"] == plan.pk
    # Before `echo` returned, `add` never reached the server.
    assert early.is_error is True and text(early).startswith("out_of_order: ")
    assert early.meta is not None
    assert early.meta["plangate/decision"]["code"] == "out_of_order"
    assert greeted.is_error is False
    assert added.is_error is False and text(added) == "4"
    assert over.is_error is True and text(over).startswith("budget_exceeded: ")
    assert extra.is_error is True and text(extra).startswith("unexpected_argument: ")
    # 3 + 2 = 5: reaching the max exactly is allowed.
    assert last.is_error is False and text(last) == "4"

    allowed = PlanEvent.objects.filter(plan=plan, decision="allowed", step=1)
    assert sorted(event.amounts["total"] for event in allowed) == [2, 3]


def test_the_declare_plan_tool_refuses_a_cycle_with_its_path(control_plane):
    cyclic: dict[str, Any] = copy.deepcopy(PLAN)
    cyclic["steps"][0]["after"] = ["sum"]

    async def scenario() -> CallToolResult:
        async with Client(gateway_parameters(control_plane)) as client:
            return await client.call_tool(DECLARE_PLAN_TOOL, cyclic)

    result = anyio.run(scenario)

    assert result.is_error is True
    assert result.structured_content is not None
    assert result.structured_content["code"] == "invalid_plan"
    # Refused by the guard before anything is sent, the cycle named at its back edge.
    assert result.structured_content["errors"] == [
        {"path": "steps[1].after", "detail": "forms a cycle: sum -> greet -> sum"}
    ]
    assert not Plan.objects.exists()
