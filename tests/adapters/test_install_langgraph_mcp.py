"""``pip install "plangate-guard[langgraph]" langchain-mcp-adapters`` into a fresh virtualenv
resolves (``pip check`` clean), and the LangGraph adapter guards the MCP tools
langchain-mcp-adapters loads: a tiny MCP server over stdio (the SDK's FastMCP, which
langchain-mcp-adapters brings), its tools loaded from one explicit session, driven by a
scripted model against the live server. The guard's core needs no MCP SDK, so the one
langchain-mcp-adapters picks is the one installed (decision 0075)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from plans.models import Plan, PlanEvent
from tests.guard.installed import fresh_virtualenv

SERVER = r"""
import os
from mcp.server.fastmcp import FastMCP

server = FastMCP("github")


def ran(tool):
    with open(os.environ["RAN_FILE"], "a") as log:
        log.write(tool + "\n")


@server.tool()
def github_list_issues(repo: str) -> str:
    ran("github_list_issues")
    return "1: Login page is slow"


@server.tool()
def github_delete_repo(repo: str) -> str:
    ran("github_delete_repo")
    return "deleted"


server.run()
"""

SCRIPT = r"""
import asyncio, json, os, sys
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.prebuilt import create_react_agent
from guard.agent import AsyncGuard
from guard.adapters.langgraph import plangate_tool_node

REPO = "acme/public-app"
PLAN = {
    "version": 1, "goal": "Summarise the open issues", "user": os.environ["PLANGATE_MEMBER"],
    "steps": [{"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}}],
}
TURNS = [
    [("declare_plan", PLAN), ("github_list_issues", {"repo": REPO})],
    [("github_delete_repo", {"repo": REPO})],
]


class Scripted(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


def model():
    messages = [
        AIMessage(content="", tool_calls=[
            {"name": n, "args": a, "id": f"{n}_{i}", "type": "tool_call"} for n, a in turn
        ])
        for i, turn in enumerate(TURNS)
    ]
    return Scripted(messages=iter([*messages, AIMessage(content="done")]))


async def main():
    env = os.environ
    url, key, issuer = env["PLANGATE_URL"], env["PLANGATE_API_KEY"], env["PLANGATE_ISSUER"]
    server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server.py")
    client = MultiServerMCPClient(
        {"github": {"command": sys.executable, "args": [server], "transport": "stdio",
                    "env": {"RAN_FILE": env["RAN_FILE"]}}}
    )
    async with AsyncGuard(url, key, issuer=issuer) as guard, client.session("github") as session:
        tools = await load_mcp_tools(session)
        graph = create_react_agent(model(), tools=plangate_tool_node(guard, tools))
        state = await graph.ainvoke({"messages": [("user", "Summarise the open issues")]})
        steps = [[s.tool, s.status] for s in guard.status().steps]
    shown = {
        m.name: [m.status, m.content if isinstance(m.content, str) else json.dumps(m.content)]
        for m in state["messages"] if isinstance(m, ToolMessage)
    }
    print(json.dumps({"output": state["messages"][-1].content, "shown": shown, "steps": steps}))


asyncio.run(main())
"""


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_langchain_mcp_adapters_installs_beside_the_extra_and_its_tools_are_guarded(
    tmp_path, live_server, agent
):
    installed = fresh_virtualenv(tmp_path)
    installed.pip_install(f"{installed.source}[langgraph]")
    installed.pip_install("langchain-mcp-adapters")
    check = installed.run(installed.bin("python"), "-m", "pip", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    (installed.elsewhere / "server.py").write_text(SERVER)
    script = installed.elsewhere / "mcp_agent.py"
    script.write_text(SCRIPT)
    ran_file = installed.elsewhere / "ran.txt"
    ran_file.write_text("")

    done = installed.run(
        installed.bin("python"),
        str(script),
        extra_env={
            "PLANGATE_URL": live_server.url,
            "PLANGATE_API_KEY": agent.api_key,
            "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
            "PLANGATE_MEMBER": "alice@acme.dev",
            "RAN_FILE": str(ran_file),
        },
    )

    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["output"] == "done"
    assert report["shown"]["declare_plan"][0] == "success"
    # Declared in the same message, then allowed; the call outside the plan never reached
    # the MCP server, and the model got an error ToolMessage saying why.
    status, text = report["shown"]["github_list_issues"]
    assert status == "success" and "Login page is slow" in text
    status, text = report["shown"]["github_delete_repo"]
    assert status == "error" and text.startswith("not_in_plan: ")
    assert ran_file.read_text().split() == ["github_list_issues"]
    assert report["steps"] == [["github_list_issues", "completed"]]
    decisions = PlanEvent.objects.filter(plan=Plan.objects.get()).values_list("decision", flat=True)
    assert sorted(decisions) == ["allowed", "not_in_plan"]
