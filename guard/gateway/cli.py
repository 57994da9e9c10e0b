"""``plangate-mcp``: serve an MCP server's tools to an MCP client, every call decided by
the guard.

    plangate-mcp [--url URL] [--issuer ISS] [--] COMMAND [ARGS...]
    plangate-mcp [--url URL] [--issuer ISS] --upstream-url URL
    plangate-mcp serve --listen HOST:PORT [options] [--] COMMAND [ARGS...]   (over HTTP)
    plangate-mcp serve --listen HOST:PORT [options] --upstream-url URL
    plangate-mcp --delegation FILE -- COMMAND [ARGS...]      (a sub-agent's gateway)
    plangate-mcp --new-dpop-key FILE                         (a key for a bound child plan)

Exit status: 0 when the client closed the connection; 1 when the wrapped server exited,
broke the protocol or could not be started, or the delegation was refused (the reason on
stderr); 2 for a usage error.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from guard.tracing import provider_from_environment

if TYPE_CHECKING:
    from guard.agent.delegation import Delegation
    from guard.agent.guard import Guard
    from guard.dpop import DpopKey

__all__ = ["main"]

PROGRAM: Final = "plangate-mcp"
EXIT_UPSTREAM_FAILED: Final = 1
EXIT_USAGE: Final = 2

_DESCRIPTION = """\
Serve the tools of an MCP server to an MCP client over stdio, with the Plangate guard in
between: the client sees the server's tools plus declare_plan, and every tools/call is
decided by the guard before it reaches the server. A blocked call is answered with a tool
error whose text starts with the decision code (no_plan, not_in_plan, policy_denied...).
Everything else passes through unchanged. The wrapped server's command is everything after
the options; a -- before it is optional (and keeps options of the command from being read
as the gateway's).

The agent's API key comes from the PLANGATE_API_KEY environment variable (it is not passed
on to the wrapped server).

A sub-agent's gateway starts with a child plan another agent delegated to it
(Guard.delegate): --delegation FILE (its JSON) or the PLANGATE_DELEGATION environment
variable (the JSON itself); not stdin, which carries the MCP client's messages. Every call
is then decided under the child plan from the first; declare_plan is answered with
delegated_plan (the sub-agent runs the plan it was given). --url and --issuer default to
the delegation's. For a child plan bound to the gateway's key (a team that requires
binding): make the key first with --new-dpop-key FILE, delegate with the jkt it prints,
and start the gateway with --dpop-key FILE."""

_EPILOG = """\
examples:
  plangate-mcp --url http://localhost:8000 -- npx -y @modelcontextprotocol/server-github
  plangate-mcp --url http://localhost:8000 python my_server.py
  plangate-mcp serve --listen 127.0.0.1:8765 --url http://localhost:8000 python my_server.py
  plangate-mcp --url http://localhost:8000 --upstream-url http://127.0.0.1:9000/mcp
  plangate-mcp --delegation child.json -- python reader_server.py
  plangate-mcp --new-dpop-key reader.key      # prints {"jkt": ...} for Guard.delegate
  plangate-mcp --dpop-key reader.key --delegation child.json -- python reader_server.py"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        usage=(
            f"{PROGRAM} [options] [--] COMMAND [ARGS...]\n"
            f"       {PROGRAM} [options] --upstream-url URL\n"
            f"       {PROGRAM} serve --listen HOST:PORT [options] [--] COMMAND [ARGS...]"
            f" (see {PROGRAM} serve --help)"
        ),
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common_options(parser)
    parser.add_argument(
        "--delegation",
        metavar="FILE",
        help="run the child plan delegated to this agent: a file holding the Delegation's"
        " JSON (default: the PLANGATE_DELEGATION environment variable, the JSON itself)",
    )
    parser.add_argument(
        "--dpop-key",
        metavar="FILE",
        help="bind tokens to the key in this file (made by --new-dpop-key) instead of a"
        " key made at start: a child plan delegated to it (Guard.delegate(jkt=...)) then"
        " runs here (default: the PLANGATE_DPOP_KEY environment variable)",
    )
    parser.add_argument(
        "--new-dpop-key",
        metavar="FILE",
        help='write a new key to FILE (readable by its owner only), print {"jkt": ...}, exit',
    )
    _command_argument(parser)
    return parser


def _command_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="the wrapped MCP server's command and its arguments: everything after the"
        " options (a -- before it is optional)",
    )


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", help="the Plangate control plane (default: the PLANGATE_URL environment variable)"
    )
    parser.add_argument(
        "--issuer",
        help="the iss the intent tokens carry, the server's PLANGATE_ISSUER (default: the"
        " PLANGATE_ISSUER environment variable, else the control plane's URL)",
    )
    parser.add_argument(
        "--upstream-url",
        metavar="URL",
        help="wrap the MCP server at this streamable-HTTP endpoint instead of a command",
    )
    parser.add_argument(
        "--approval-wait",
        type=float,
        metavar="SECONDS",
        help="how long declare_plan waits for a person to approve a plan a policy sends to"
        " review (default: the guard's, 300)",
    )
    parser.add_argument(
        "--declare-wait",
        type=float,
        metavar="SECONDS",
        help="how long a call sent while declare_plan is in flight waits for it before it"
        " is decided (default: the guard's, 30)",
    )


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The gateway's options, and the wrapped server's command after ``--``."""
    arguments = list(argv)
    if "--" in arguments:
        separator = arguments.index("--")
        return arguments[:separator], arguments[separator + 1 :]
    return arguments, []


def _parse(
    parser: argparse.ArgumentParser, argv: Sequence[str]
) -> tuple[argparse.Namespace, list[str]]:
    """The gateway's options and the wrapped server's command: everything after ``--``, or
    without one, everything from the first argument that is not an option's."""
    options, command = _split_command(argv)
    arguments = parser.parse_args(options)
    if not command:
        command = list(arguments.command or [])
        if command[:1] == ["--"]:
            command = command[1:]
    elif arguments.command:
        parser.error(f"unrecognized arguments before --: {' '.join(arguments.command)}")
    return arguments, command


def _tracing() -> None:
    """Spans of the gateway's decisions, when the OTEL_* environment asks for them
    (guard.tracing; the otel-sdk extra)."""
    try:
        provider_from_environment(os.environ, service_name="plangate-mcp")
    except ImportError:
        print(
            "plangate-mcp: OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not"
            " installed (pip install 'plangate-guard[otel-sdk]'): no spans",
            file=sys.stderr,
        )
    except ValueError as error:
        print(f"plangate-mcp: no spans: {error}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _tracing()
    if argv[:1] == ["serve"]:
        from guard.gateway.serve_cli import serve_main

        return serve_main(argv[1:])
    parser = _parser()
    arguments, command = _parse(parser, argv)
    if arguments.new_dpop_key:
        return _new_dpop_key(arguments.new_dpop_key)
    dpop_key = _dpop_key(parser, arguments.dpop_key or os.environ.get("PLANGATE_DPOP_KEY"))
    delegation = _delegation(parser, arguments.delegation)
    url = (
        arguments.url
        or os.environ.get("PLANGATE_URL")
        or (delegation.url if delegation is not None else None)
    )
    api_key = os.environ.get("PLANGATE_API_KEY")
    if not url:
        parser.error("no control plane: give --url URL or set PLANGATE_URL")
    if not api_key:
        parser.error("no API key: set PLANGATE_API_KEY to the agent's key (pg_...)")
    _one_upstream(parser, command, arguments.upstream_url)
    try:
        import anyio

        from guard.gateway.serve import serve
    except ImportError as error:
        return mcp_extra_missing(error)

    guard = _guard(
        url,
        api_key,
        issuer=arguments.issuer
        or os.environ.get("PLANGATE_ISSUER")
        or (delegation.issuer if delegation is not None else None),
        approval_wait=arguments.approval_wait,
        declare_wait=arguments.declare_wait,
        dpop_key=dpop_key,
    )
    if delegation is not None:
        from guard.agent.errors import GuardError

        try:
            guard.adopt(delegation)
        except GuardError as error:
            guard.close()
            print(f"{PROGRAM}: the delegation was not taken: {error}", file=sys.stderr)
            return EXIT_UPSTREAM_FAILED
    # Everything imported so far (the SDK's and pydantic's many objects) lives as long as
    # the process: kept out of the cyclic garbage collector's sweeps, which otherwise
    # traverse all of it every few thousand calls (decision 0051).
    gc.freeze()
    try:
        failure = anyio.run(serve, guard, command or None, arguments.upstream_url)
    except OSError as error:
        failure = f"the wrapped MCP server could not be started: {error}"
    finally:
        # Ends the plan and delivers the decision log, for at most the guard's close timeout.
        guard.close()
    if failure is not None:
        print(f"{PROGRAM}: {failure}", file=sys.stderr, flush=True)
        return EXIT_UPSTREAM_FAILED
    return 0


def _delegation(parser: argparse.ArgumentParser, path: str | None) -> Delegation | None:
    """The Delegation in the file --delegation names, or in PLANGATE_DELEGATION; None when
    neither is given. An unreadable one is a usage error. (Never stdin: it carries the MCP
    client's messages.)"""
    from guard.agent.delegation import Delegation
    from guard.agent.errors import GuardError

    text = os.environ.get("PLANGATE_DELEGATION") if path is None else None
    try:
        if path is not None:
            with open(path, encoding="utf-8") as file:
                text = file.read()
    except OSError as error:
        parser.error(f"the delegation cannot be read: {error}")
    if not text:
        return None
    try:
        return Delegation.from_json(text)
    except GuardError as error:
        paths = ", ".join(str(item.get("path")) for item in error.errors)
        parser.error(f"{error}{f' ({paths})' if paths else ''}")


def _new_dpop_key(path: str) -> int:
    """``--new-dpop-key FILE``: a key for a gateway to be started later, and its thumbprint
    for the agent that delegates to it."""
    from guard.dpop import DpopKey

    key = DpopKey.generate()
    try:
        key.save(path)
    except OSError as error:
        print(f"{PROGRAM}: the key cannot be written: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps({"jkt": key.jkt}))
    return 0


def _dpop_key(parser: argparse.ArgumentParser, path: str | None) -> DpopKey | None:
    """The key in the file ``--dpop-key`` (or PLANGATE_DPOP_KEY) names; None when neither
    is given. An unreadable one is a usage error."""
    if not path:
        return None
    from guard.dpop import DpopKey

    try:
        return DpopKey.load(path)
    except (OSError, ValueError) as error:
        parser.error(f"the DPoP key cannot be read: {error}")


def _one_upstream(
    parser: argparse.ArgumentParser, command: Sequence[str], upstream_url: str | None
) -> None:
    """The wrapped server is a command or a URL: exactly one (a usage error otherwise)."""
    if command and upstream_url:
        parser.error("give the wrapped server's command or --upstream-url, not both")
    if not command and not upstream_url:
        parser.error("no MCP server to wrap: give its command, or --upstream-url URL")


def mcp_extra_missing(error: ImportError) -> int:
    """What the gateway says when the MCP SDK is not installed (the mcp extra)."""
    print(
        f'{PROGRAM}: the MCP gateway needs the mcp extra: pip install "plangate-guard[mcp]"'
        f" ({error})",
        file=sys.stderr,
    )
    return EXIT_USAGE


def _guard(
    url: str,
    api_key: str,
    *,
    issuer: str | None,
    approval_wait: float | None,
    declare_wait: float | None = None,
    dpop_key: DpopKey | None = None,
) -> Guard:
    from guard.agent.guard import Guard

    options: dict[str, Any] = {"issuer": issuer, "dpop_key": dpop_key}
    if approval_wait is not None:
        options["approval_wait_seconds"] = approval_wait
    if declare_wait is not None:
        options["declare_wait_seconds"] = declare_wait
    return Guard(url, api_key, **options)
