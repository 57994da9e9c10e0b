"""``plangate-mcp serve``: the gateway over streamable HTTP (`guard.gateway.http`).

plangate-mcp serve --listen HOST:PORT [options] [--] COMMAND [ARGS...]
plangate-mcp serve --listen HOST:PORT [options] --upstream-url URL
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from guard.gateway.cli import (
    PROGRAM,
    _command_argument,
    _common_options,
    _one_upstream,
    _parse,
    mcp_extra_missing,
)

__all__ = ["serve_main"]

_DESCRIPTION = """\
Serve the tools of an MCP server to many MCP clients over streamable HTTP (endpoint /mcp),
each client with a guard of its own: MCP 2025-11-25 (sessions: a session's guard holds its
plan, and with a command, the session has its own server process) and MCP 2026-07-28
(stateless: a plan is named by its id, which the declare_plan result carries in
_meta["plangate/plan"] and each call sends back in its own _meta).

Every request carries Authorization: Bearer <credential>: the client's own Plangate API
key (pg_..., its guard declares with it), or a key the operator issued for the gateway
(--client-keys FILE, or PLANGATE_GATEWAY_CLIENT_KEYS), whose guards declare with the
gateway's PLANGATE_API_KEY. Anything else is answered 401. A client's credential and its
intent tokens are never sent to the wrapped server; credentials for that server are
given with --upstream-header (or PLANGATE_UPSTREAM_HEADERS, one "Name: value" a line)."""

_EPILOG = """\
examples:
  plangate-mcp serve --listen 127.0.0.1:8765 --url http://localhost:8000 python server.py
  plangate-mcp serve --listen 0.0.0.0:8765 --client-keys keys.txt \\
      --upstream-url https://mcp.example.com/mcp --upstream-header "Authorization: Bearer ..."
  client: POST http://127.0.0.1:8765/mcp  with  Authorization: Bearer pg_..."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROGRAM} serve",
        usage=(
            f"{PROGRAM} serve --listen HOST:PORT [options] [--] COMMAND [ARGS...]\n"
            f"       {PROGRAM} serve --listen HOST:PORT [options] --upstream-url URL"
        ),
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--listen", required=True, metavar="HOST:PORT", help="the address to serve HTTP on"
    )
    _common_options(parser)
    parser.add_argument(
        "--client-keys",
        metavar="FILE",
        help="the gateway keys clients may present, one a line (default: the"
        " PLANGATE_GATEWAY_CLIENT_KEYS environment variable, comma-separated); a client"
        " presenting one declares with PLANGATE_API_KEY",
    )
    parser.add_argument(
        "--upstream-header",
        action="append",
        default=[],
        metavar='"NAME: VALUE"',
        help="a header every request to the wrapped server carries (repeatable): its own"
        " credentials, never a client's",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=1000,
        help="2025-11-25 sessions open at once, at most (default 1000)",
    )
    parser.add_argument(
        "--session-idle",
        type=float,
        default=1800.0,
        metavar="SECONDS",
        help="a session with no request for this long is closed (default 1800)",
    )
    parser.add_argument(
        "--max-plans",
        type=int,
        default=10000,
        help="2026-07-28 plans held at once, at most; the least recently used is ended"
        " (default 10000)",
    )
    parser.add_argument(
        "--plan-idle",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="a 2026-07-28 plan with no call for this long is ended (default 3600)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a Host header the gateway answers to (repeatable; HOST:* any port). Listening"
        " on a loopback address it answers only to 127.0.0.1, localhost and [::1] unless"
        " told more; elsewhere to any Host unless told which",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser Origin allowed to call the gateway (repeatable; the allowed hosts'"
        " own http and https origins are); a request with any other Origin is refused 403",
    )
    _command_argument(parser)
    return parser


def _headers(parser: argparse.ArgumentParser, lines: Sequence[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, separator, value = line.partition(":")
        if not separator or not name.strip():
            parser.error(f'--upstream-header takes "Name: value", not {line!r}')
        headers[name.strip()] = value.strip()
    return headers


def serve_main(argv: Sequence[str]) -> int:
    parser = _parser()
    arguments, command = _parse(parser, argv)
    host, separator, port = arguments.listen.rpartition(":")
    if not separator or not port.isdigit():
        parser.error("--listen takes HOST:PORT")
    url = arguments.url or os.environ.get("PLANGATE_URL")
    if not url:
        parser.error("no control plane: give --url URL or set PLANGATE_URL")
    _one_upstream(parser, command, arguments.upstream_url)
    try:
        import anyio

        from guard.gateway.http import AllowedPeers, HttpOptions, read_client_keys, serve_http
    except ImportError as error:
        return mcp_extra_missing(error)
    keys_text = os.environ.get("PLANGATE_GATEWAY_CLIENT_KEYS", "")
    if arguments.client_keys:
        try:
            with open(arguments.client_keys, encoding="utf-8") as file:
                keys_text = file.read()
        except OSError as error:
            parser.error(f"the client keys cannot be read: {error}")
    client_keys = read_client_keys(keys_text)
    api_key = os.environ.get("PLANGATE_API_KEY")
    if client_keys and not api_key:
        parser.error("gateway keys need the gateway's own PLANGATE_API_KEY to declare with")
    upstream_lines = [
        line for line in os.environ.get("PLANGATE_UPSTREAM_HEADERS", "").splitlines() if line
    ]
    guard_options: dict[str, Any] = {}
    if arguments.approval_wait is not None:
        guard_options["approval_wait_seconds"] = arguments.approval_wait
    if arguments.declare_wait is not None:
        guard_options["declare_wait_seconds"] = arguments.declare_wait
    options = HttpOptions(
        url=url,
        issuer=arguments.issuer or os.environ.get("PLANGATE_ISSUER"),
        api_key=api_key,
        client_keys=client_keys,
        command=command or None,
        upstream_url=arguments.upstream_url,
        upstream_headers=_headers(parser, [*upstream_lines, *arguments.upstream_header]),
        guard_options=guard_options,
        max_sessions=arguments.max_sessions,
        session_idle_seconds=arguments.session_idle,
        max_plans=arguments.max_plans,
        plan_idle_seconds=arguments.plan_idle,
        allowed=AllowedPeers.for_listener(
            host, hosts=arguments.allowed_host, origins=arguments.allowed_origin
        ),
    )
    print(f"{PROGRAM}: serving MCP on http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve_http, options, host.strip("[]"), int(port))
    return 0
