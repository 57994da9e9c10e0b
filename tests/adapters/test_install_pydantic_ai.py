"""``pip install "plangate-guard[pydantic-ai]"`` into a fresh virtualenv gives a working
`guard.adapters.pydantic_ai`, and its toolset guards an MCP server in the agent's own
process: an ``MCPToolset`` (over FastMCP, installed from PyPI here) wrapped in a
`PlangateToolset`, driven by a scripted ``FunctionModel`` against the live server."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from plans.models import Plan, PlanEvent
from tests.guard.installed import fresh_virtualenv

SCRIPT = r"""
import asyncio, json, os
from fastmcp import FastMCP
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from guard.agent import AsyncGuard
from guard.adapters.pydantic_ai import PlangateToolset

REPO = "acme/public-app"
ran = []
server = FastMCP("github")


@server.tool
def github_list_issues(repo: str) -> str:
    ran.append("github_list_issues")
    return "1: Login page is slow"


@server.tool
def github_delete_repo(repo: str) -> str:
    ran.append("github_delete_repo")
    return "deleted"


PLAN = {
    "version": 1, "goal": "Summarise the open issues", "user": os.environ["PLANGATE_MEMBER"],
    "steps": [{"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}}],
}
TURNS = [
    [("declare_plan", PLAN), ("github_list_issues", {"repo": REPO})],
    [("github_delete_repo", {"repo": REPO})],
]


def respond(messages, info):
    done = sum(isinstance(m, ModelResponse) for m in messages)
    if done >= len(TURNS):
        return ModelResponse(parts=[TextPart("done")])
    calls = [ToolCallPart(n, a, tool_call_id=f"{n}_{done}") for n, a in TURNS[done]]
    return ModelResponse(parts=calls)


async def main():
    env = os.environ
    url, key, issuer = env["PLANGATE_URL"], env["PLANGATE_API_KEY"], env["PLANGATE_ISSUER"]
    async with AsyncGuard(url, key, issuer=issuer) as guard:
        toolset = PlangateToolset(MCPToolset(server, tool_error_behavior="failed"), guard=guard)
        agent = Agent(FunctionModel(respond), toolsets=[toolset])
        async with agent:
            result = await agent.run("Summarise the open issues of acme/public-app")
        shown = {
            part.tool_name: [part.outcome, part.model_response_str(wrap_if_error=False)]
            for m in result.all_messages() if isinstance(m, ModelRequest)
            for part in m.parts if isinstance(part, ToolReturnPart)
        }
        steps = [[s.tool, s.status] for s in guard.status().steps]
    print(json.dumps({"output": result.output, "shown": shown, "ran": ran, "steps": steps}))


asyncio.run(main())
"""


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_the_extra_installs_and_its_toolset_guards_an_mcp_toolset(tmp_path, live_server, agent):
    installed = fresh_virtualenv(tmp_path)
    installed.pip_install(f"{installed.source}[pydantic-ai]")
    installed.pip_install("fastmcp-slim[server]>=4.2,<5")
    script = installed.elsewhere / "mcp_agent.py"
    script.write_text(SCRIPT)

    done = installed.run(
        installed.bin("python"),
        str(script),
        extra_env={
            "PLANGATE_URL": live_server.url,
            "PLANGATE_API_KEY": agent.api_key,
            "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
            "PLANGATE_MEMBER": "alice@acme.dev",
        },
    )

    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["output"] == "done"
    assert report["shown"]["declare_plan"][0] == "success"
    # Declared in the same response, then allowed; the call outside the plan never reached
    # the MCP server, and the model got a failed tool result saying why.
    assert report["shown"]["github_list_issues"] == ["success", "1: Login page is slow"]
    outcome, text = report["shown"]["github_delete_repo"]
    assert outcome == "failed" and text.startswith("not_in_plan: ")
    assert report["ran"] == ["github_list_issues"]
    assert report["steps"] == [["github_list_issues", "completed"]]
    decisions = PlanEvent.objects.filter(plan=Plan.objects.get()).values_list("decision", flat=True)
    assert sorted(decisions) == ["allowed", "not_in_plan"]
