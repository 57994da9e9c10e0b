"""A declaration that waits for a person's approval does not hold up the gateway: the
guard declares in a worker thread, and meanwhile every call gets ``approval_pending`` from
the gateway; once a person approves, the declaration returns and the plan's calls pass."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from django.conf import settings
from django.db import connection
from mcp.client import Client
from mcp_types import CallToolResult

from guard.agent.tools import DECLARE_PLAN_TOOL
from plans.approvals import plan_approval_decide
from plans.models import Plan
from policies.services import policy_set
from tests.conftest import make_agent
from tests.plans.approval_helpers import approver_for

from .conftest import ControlPlane, gateway_parameters

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

# Bounds a loop that would otherwise wait forever; never a pass/fail criterion on speed.
MAX_ASKS = 600

REVIEW_ADD_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["echo"]},
        {"effect": "review", "tools": ["add"], "description": "sums need a person"},
    ],
}
REVIEWED_PLAN = {
    "version": 1,
    "goal": "Echo a greeting, then add",
    "user": "alice@acme.dev",
    "steps": [{"tool": "echo", "args": {"text": {"eq": "hello"}}}, {"tool": "add"}],
}


def decision_code(result: CallToolResult) -> str | None:
    meta = result.meta or {}
    decision = meta.get("plangate/decision")
    return decision.get("code") if isinstance(decision, dict) else None


def test_calls_during_a_declaration_awaiting_approval_get_approval_pending(
    live_server, team, member
):
    version = policy_set(team=team, slug="default", document=REVIEW_ADD_POLICY)
    agent = make_agent(team, "gateway-agent", version)
    control_plane = ControlPlane(url=live_server.url, issuer=settings.PLANGATE_ISSUER, agent=agent)
    approver = approver_for(team)

    def approve() -> None:
        try:
            plan_approval_decide(plan=Plan.objects.get(), by_user=approver, approve=True)
        finally:
            connection.close()  # this worker thread's own connection

    async def scenario() -> dict[str, Any]:
        outcome: dict[str, Any] = {}
        async with Client(gateway_parameters(control_plane)) as client:

            async def declare() -> None:
                plan = copy.deepcopy(REVIEWED_PLAN)
                outcome["declared"] = await client.call_tool(DECLARE_PLAN_TOOL, plan)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(declare)
                # Before the control plane has answered the declaration, a call is no_plan;
                # once the plan waits for a person, approval_pending.
                for _ in range(MAX_ASKS):
                    waiting = await client.call_tool("echo", {"text": "hello"})
                    if decision_code(waiting) == "approval_pending":
                        break
                    await anyio.sleep(0.1)
                outcome["waiting"] = waiting
                outcome["declared_while_waiting"] = "declared" in outcome
                await anyio.to_thread.run_sync(approve)
            outcome["after"] = await client.call_tool("echo", {"text": "hello"})
        return outcome

    outcome = anyio.run(scenario)

    waiting = outcome["waiting"]
    assert waiting.is_error is True
    assert decision_code(waiting) == "approval_pending"
    assert outcome["declared_while_waiting"] is False  # the gateway answered meanwhile
    declared = outcome["declared"]
    assert declared.is_error is False
    assert declared.structured_content is not None
    assert declared.structured_content["ok"] is True
    after = outcome["after"]
    assert after.is_error is False
    assert after.structured_content == {"text": "hello"}
