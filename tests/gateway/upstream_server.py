"""A real MCP server for the gateway's tests and benchmark, built on the SDK's MCPServer.

    python tests/gateway/upstream_server.py                 # over stdio
    python tests/gateway/upstream_server.py --http PORT     # over streamable HTTP at /mcp

Tools: `echo` (its text back, also as structured content), `add`, `count` (reports
progress, and logs), `die` (the process exits in the middle of the call: a server that
dies mid-call). A resource `notes://readme`, a resource template `notes://{name}`, and a
prompt `summarise`.
"""

from __future__ import annotations

import argparse
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

README_TEXT = "The notes of the gateway's test server."

server = MCPServer("gateway-test-upstream", instructions="A server for the gateway's tests.")


@server.tool(description="Return the text unchanged.")
def echo(text: str) -> dict[str, str]:
    return {"text": text}


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Count to n, reporting progress at each step.")
async def count(n: int, ctx: Context) -> str:
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step} of {n}")
    return f"counted to {n}"


@server.tool(description="Exit the server process in the middle of the call.")
def die() -> str:
    sys.stdout.flush()
    os._exit(3)


@server.resource("notes://readme", description="The server's readme.", mime_type="text/plain")
def readme() -> str:
    return README_TEXT


@server.resource("notes://{name}", description="A note by name.", mime_type="text/plain")
def note(name: str) -> str:
    return f"note {name}"


@server.prompt(description="Ask the model to summarise a text.")
def summarise(text: str) -> str:
    return f"Summarise this: {text}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    arguments = parser.parse_args()
    if arguments.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=arguments.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
