"""A plan sent to a person, declared through the gateway's HTTP side by a stateless
2026-07-28 client that lists URL elicitation: the answer is an ``InputRequiredResult``
pointing at the approval page while the declaration goes on, and the client's retry with
its ``requestState`` gets the approved plan, whose calls then run."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from guard.agent.outcomes import AUTHORIZATION_META_KEY
from guard.agent.tools import DECLARE_PLAN_TOOL
from guard.gateway.http import PLAN_META_KEY
from plans.approvals import approval_queue_url
from plans.models import Plan

from .conftest import UPSTREAM_COMMAND, http_gateway
from .test_gateway_approval import REVIEWED_PLAN
from .test_gateway_denials import approve_the_plan, review_plane  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

MODERN = "2026-07-28"


async def on_elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    raise AssertionError("2026-07-28 has no request of the server's: the result asks")


def test_a_stateless_client_is_sent_to_the_approval_page_and_its_retry_gets_the_plan(
    review_plane,  # noqa: F811 - the fixture
    team,
):
    key = review_plane.agent.api_key

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        with http_gateway(review_plane, *UPSTREAM_COMMAND) as url:
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
                Client(
                    streamable_http_client(url, http_client=http),
                    mode=MODERN,
                    elicitation_callback=on_elicit,
                ) as mcp,
            ):
                first = await mcp.session.call_tool(
                    DECLARE_PLAN_TOOL, copy.deepcopy(REVIEWED_PLAN), allow_input_required=True
                )
                seen["first"] = first
                assert isinstance(first, InputRequiredResult)
                (input_key,) = (first.input_requests or {}).keys()
                await anyio.to_thread.run_sync(approve_the_plan, team)
                declared = await mcp.call_tool(
                    DECLARE_PLAN_TOOL,
                    copy.deepcopy(REVIEWED_PLAN),
                    input_responses={input_key: ElicitResult(action="accept")},
                    request_state=first.request_state,
                )
                seen["declared"] = declared
                plan_id = declared.structured_content["planId"]
                seen["added"] = await mcp.call_tool(
                    "add", {"a": 2, "b": 3}, meta={PLAN_META_KEY: plan_id}
                )
        return seen

    seen = anyio.run(scenario)

    first = seen["first"]
    (request,) = (first.input_requests or {}).values()
    assert request.method == "elicitation/create"
    assert isinstance(request.params, ElicitRequestURLParams)
    assert request.params.url == approval_queue_url(Plan.objects.get())
    assert first.meta[AUTHORIZATION_META_KEY]["remediationHints"] == [
        {"type": "url", "url": request.params.url}
    ]
    declared = seen["declared"]
    assert declared.is_error is False
    assert declared.structured_content["ok"] is True
    assert declared.structured_content["planId"] == Plan.objects.get().pk
    assert seen["added"].is_error is False
