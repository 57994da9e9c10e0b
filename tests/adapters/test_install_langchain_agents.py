"""``pip install "plangate-guard[langgraph]" langchain`` into a fresh virtualenv, and
`plangate_middleware` guards an agent of LangChain's ``create_agent``: declared and
called in one message, a call outside the plan blocked as an error ``ToolMessage``,
driven by a scripted model against the live server (``sync`` with a `Guard` and
``invoke``, ``async`` with an `AsyncGuard` and ``ainvoke``)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from tests.guard.installed import fresh_virtualenv

SCRIPT = r"""
import asyncio, json, os, sys
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from guard.agent import AsyncGuard, Guard
from guard.adapters.langgraph import plangate_middleware

REPO = "acme/public-app"
ran = []
PLAN = {
    "version": 1, "goal": "Summarise the open issues", "user": os.environ["PLANGATE_MEMBER"],
    "steps": [{"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}}],
}
TURNS = [
    [("github_list_issues", {"repo": REPO}), ("declare_plan", PLAN)],
    [("github_delete_repo", {"repo": REPO})],
]


@tool
def github_list_issues(repo: str) -> str:
    "List a repository's open issues."
    ran.append("github_list_issues")
    return "1: Login page is slow"


@tool
def github_delete_repo(repo: str) -> str:
    "Delete a repository."
    ran.append("github_delete_repo")
    return "deleted"


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


def report(state, guard):
    messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    shown = {m.name: [m.status, str(m.content)] for m in messages}
    steps = [[s.tool, s.status] for s in guard.status().steps]
    return {"output": state["messages"][-1].content, "shown": shown, "ran": ran, "steps": steps}


env = os.environ
url, key, issuer = env["PLANGATE_URL"], env["PLANGATE_API_KEY"], env["PLANGATE_ISSUER"]
TOOLS = [github_list_issues, github_delete_repo]
ASK = {"messages": [("user", "Summarise the open issues")]}
if sys.argv[1] == "sync":
    with Guard(url, key, issuer=issuer) as guard:
        agent = create_agent(model(), TOOLS, middleware=[plangate_middleware(guard)])
        print(json.dumps(report(agent.invoke(ASK), guard)))
else:
    async def main():
        async with AsyncGuard(url, key, issuer=issuer) as guard:
            agent = create_agent(model(), TOOLS, middleware=[plangate_middleware(guard)])
            print(json.dumps(report(await agent.ainvoke(ASK), guard)))
    asyncio.run(main())
"""


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_the_middleware_guards_a_create_agent_agent(tmp_path, live_server, agent):
    installed = fresh_virtualenv(tmp_path)
    installed.pip_install(f"{installed.source}[langgraph]")
    installed.pip_install("langchain>=1,<2")
    script = installed.elsewhere / "agent.py"
    script.write_text(SCRIPT)

    for kind in ("sync", "async"):
        done = installed.run(
            installed.bin("python"),
            str(script),
            kind,
            extra_env={
                "PLANGATE_URL": live_server.url,
                "PLANGATE_API_KEY": agent.api_key,
                "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
                "PLANGATE_MEMBER": "alice@acme.dev",
            },
        )

        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["output"] == "done", kind
        assert report["shown"]["declare_plan"][0] == "success", kind
        # Sent before declare_plan in the same message: it waited for the declaration.
        assert report["shown"]["github_list_issues"] == ["success", "1: Login page is slow"]
        status, text = report["shown"]["github_delete_repo"]
        assert status == "error" and text.startswith("not_in_plan: "), kind
        assert report["ran"] == ["github_list_issues"], kind
        assert report["steps"] == [["github_list_issues", "completed"]], kind
