"""Denials and approvals in the protocols' own shapes, through `plangate-mcp` and the SDK's
own client, in front of a live control plane: a blocked call carries SEP-2643's envelope
(its remediation step, declared, admits the call; a plan awaiting approval names its page),
and a ``declare_plan`` awaiting a person's approval points a client that lists URL
elicitation at the approval page (2026-07-28: ``InputRequiredResult``, then the retry gets
the plan; 2025-11-25: ``elicitation/create``, then the plan), while a client that lists none
waits as before."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from django.conf import settings
from django.db import connection
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp_types import (
    CallToolResult,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from guard.agent.outcomes import AUTHORIZATION_META_KEY, PLAN_STEP_HINT
from guard.agent.tools import DECLARE_PLAN_TOOL
from plans.approvals import approval_queue_url, plan_approval_decide
from plans.models import Plan
from policies.services import policy_set
from tests.conftest import make_agent
from tests.plans.approval_helpers import approver_for

from .conftest import GATEWAY_PLAN, ControlPlane, gateway_parameters
from .test_gateway_approval import MAX_ASKS, REVIEW_ADD_POLICY, REVIEWED_PLAN, decision_code

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

MODERN = "2026-07-28"


def envelope(result: CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    denial = result.meta[AUTHORIZATION_META_KEY]
    assert isinstance(denial, dict)
    return denial


def test_a_call_outside_the_plan_names_the_step_that_admits_it(control_plane):
    async def scenario() -> dict[str, CallToolResult]:
        seen: dict[str, CallToolResult] = {}
        async with Client(gateway_parameters(control_plane)) as client:
            seen["no_plan"] = await client.call_tool("echo", {"text": "hello"})
            await client.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN))
            seen["not_in_plan"] = await client.call_tool("add", {"a": 1, "b": 2})
            # Nothing has returned output yet: the plan with that step can be declared.
            step = envelope(seen["not_in_plan"])["remediationHints"][0]["step"]
            plan = copy.deepcopy(GATEWAY_PLAN)
            plan["steps"].append(step)
            seen["declared"] = await client.call_tool(DECLARE_PLAN_TOOL, plan)
            seen["admitted"] = await client.call_tool("add", {"a": 1, "b": 2})
        return seen

    seen = anyio.run(scenario)

    no_plan = envelope(seen["no_plan"])
    assert no_plan["reason"] == "insufficient_authorization"
    assert no_plan["remediation"] == "available"
    assert no_plan["code"] == "no_plan"
    assert no_plan["authorizationContextId"].startswith("authzctx_")
    assert no_plan["remediationHints"] == [
        {
            "type": PLAN_STEP_HINT,
            "step": {"tool": "echo", "args": {"text": {"eq": "hello"}}, "maxCalls": 1},
        }
    ]
    outside = envelope(seen["not_in_plan"])
    assert outside["code"] == "not_in_plan"
    assert outside["detail"].startswith("not_in_plan: ")
    assert outside["remediationHints"] == [
        {
            "type": PLAN_STEP_HINT,
            "step": {"tool": "add", "args": {"a": {"eq": 1}, "b": {"eq": 2}}, "maxCalls": 1},
        }
    ]
    assert seen["declared"].is_error is False
    admitted = seen["admitted"]
    assert admitted.is_error is False
    assert admitted.meta is None or AUTHORIZATION_META_KEY not in admitted.meta


def approve_the_plan(team) -> None:
    """A person approves the one plan stored (from a worker thread: its own connection)."""
    try:
        plan_approval_decide(plan=Plan.objects.get(), by_user=approver_for(team), approve=True)
    finally:
        connection.close()


@pytest.fixture
def review_plane(live_server, team, member) -> ControlPlane:
    """A control plane whose policy sends a plan calling `add` to a person."""
    version = policy_set(team=team, slug="default", document=REVIEW_ADD_POLICY)
    agent = make_agent(team, "gateway-agent", version)
    return ControlPlane(url=live_server.url, issuer=settings.PLANGATE_ISSUER, agent=agent)


def test_a_call_while_the_plan_awaits_approval_names_the_approval_page(review_plane, team):
    async def scenario() -> CallToolResult:
        async with (
            Client(gateway_parameters(review_plane)) as client,
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(client.call_tool, DECLARE_PLAN_TOOL, copy.deepcopy(REVIEWED_PLAN))
            for _ in range(MAX_ASKS):
                waiting = await client.call_tool("echo", {"text": "hello"})
                if decision_code(waiting) == "approval_pending":
                    break
                await anyio.sleep(0.1)
            await anyio.to_thread.run_sync(approve_the_plan, team)
        return waiting

    waiting = anyio.run(scenario)

    denial = envelope(waiting)
    assert denial["code"] == "approval_pending"
    assert denial["remediation"] == "available"
    assert denial["remediationHints"] == [
        {"type": "url", "url": approval_queue_url(Plan.objects.get())}
    ]


def test_a_2026_client_is_sent_to_the_approval_page_and_its_retry_gets_the_plan(review_plane, team):
    async def on_elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        raise AssertionError("2026-07-28 has no request of the server's: the result asks")

    async def scenario() -> tuple[Any, CallToolResult]:
        async with Client(
            gateway_parameters(review_plane), mode=MODERN, elicitation_callback=on_elicit
        ) as client:
            first = await client.session.call_tool(
                DECLARE_PLAN_TOOL, copy.deepcopy(REVIEWED_PLAN), allow_input_required=True
            )
            assert isinstance(first, InputRequiredResult)
            # The user opens the page, and a person approves there; the client retries.
            await anyio.to_thread.run_sync(approve_the_plan, team)
            (key,) = (first.input_requests or {}).keys()
            declared = await client.call_tool(
                DECLARE_PLAN_TOOL,
                copy.deepcopy(REVIEWED_PLAN),
                input_responses={key: ElicitResult(action="accept")},
                request_state=first.request_state,
            )
            return first, declared

    first, declared = anyio.run(scenario)

    assert first.request_state
    (request,) = (first.input_requests or {}).values()
    assert request.method == "elicitation/create"
    assert isinstance(request.params, ElicitRequestURLParams)
    assert request.params.url == approval_queue_url(Plan.objects.get())
    assert first.meta is not None
    assert first.meta[AUTHORIZATION_META_KEY]["remediationHints"] == [
        {"type": "url", "url": request.params.url}
    ]
    assert declared.is_error is False
    assert declared.structured_content is not None
    assert declared.structured_content["ok"] is True
    assert declared.structured_content["planId"] == Plan.objects.get().pk


def test_a_2025_client_with_url_elicitation_is_asked_to_open_the_page_then_gets_the_plan(
    review_plane, team
):
    asked: list[ElicitRequestParams] = []

    async def on_elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        await anyio.to_thread.run_sync(approve_the_plan, team)
        return ElicitResult(action="accept")

    async def scenario() -> CallToolResult:
        async with Client(
            gateway_parameters(review_plane), mode="legacy", elicitation_callback=on_elicit
        ) as client:
            declared = await client.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(REVIEWED_PLAN))
            # The connection goes on: the client's answer never reached the server.
            echoed = await client.call_tool("echo", {"text": "hello"})
            assert echoed.is_error is False
            return declared

    declared = anyio.run(scenario)

    (params,) = asked
    assert isinstance(params, ElicitRequestURLParams)
    assert params.url == approval_queue_url(Plan.objects.get())
    assert params.elicitation_id
    assert declared.is_error is False
    assert declared.structured_content is not None
    assert declared.structured_content["ok"] is True


def test_a_client_without_url_elicitation_waits_for_the_decision_as_before(review_plane, team):
    async def scenario() -> Any:
        outcome: dict[str, Any] = {}
        # 2026-07-28 without an elicitation callback: no URL elicitation listed.
        async with Client(gateway_parameters(review_plane), mode=MODERN) as client:

            async def declare() -> None:
                outcome["declared"] = await client.session.call_tool(
                    DECLARE_PLAN_TOOL, copy.deepcopy(REVIEWED_PLAN), allow_input_required=True
                )

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(declare)
                for _ in range(MAX_ASKS):
                    waiting = await client.call_tool("echo", {"text": "hello"})
                    if decision_code(waiting) == "approval_pending":
                        break
                    await anyio.sleep(0.1)
                outcome["answered_before_the_decision"] = "declared" in outcome
                await anyio.to_thread.run_sync(approve_the_plan, team)
        return outcome

    outcome = anyio.run(scenario)

    assert outcome["answered_before_the_decision"] is False
    declared = outcome["declared"]
    assert isinstance(declared, CallToolResult)
    assert declared.is_error is False
    assert declared.structured_content is not None
    assert declared.structured_content["ok"] is True
