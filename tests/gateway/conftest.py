"""The gateway as an MCP client meets it: `plangate-mcp` (``python -m guard.gateway``) in a
subprocess, wrapping `upstream_server.py`, driven by the SDK's own client, in front of a
real control plane (pytest-django's live server) that holds a team, a member, an agent and
a policy allowing the test server's tools."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from mcp.client.stdio import StdioServerParameters

from policies.services import policy_set
from tests.conftest import AgentPersona, make_agent
from tests.integration.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_SERVER = Path(__file__).resolve().parent / "upstream_server.py"
UPSTREAM_COMMAND = [sys.executable, str(UPSTREAM_SERVER)]

GATEWAY_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [{"effect": "allow", "tools": ["echo", "add", "count", "die"]}],
}

# A plan for the test server's tools: `add` is left out on purpose.
GATEWAY_PLAN = {
    "version": 1,
    "goal": "Echo a greeting and count",
    "user": "alice@acme.dev",
    "steps": [
        {"tool": "echo", "args": {"text": {"eq": "hello"}}, "maxCalls": 2},
        {"tool": "count", "args": {"n": {"lte": 5}}},
        {"tool": "die"},
    ],
}


@dataclass
class ControlPlane:
    url: str
    issuer: str
    agent: AgentPersona


@pytest.fixture
def control_plane(live_server, team, member) -> ControlPlane:
    version = policy_set(team=team, slug="default", document=GATEWAY_POLICY)
    agent = make_agent(team, "gateway-agent", version)
    return ControlPlane(url=live_server.url, issuer=settings.PLANGATE_ISSUER, agent=agent)


def gateway_environment(api_key: str) -> dict[str, str]:
    return {**os.environ, "PLANGATE_API_KEY": api_key, "PYTHONPATH": str(ROOT)}


def gateway_arguments(url: str, issuer: str, *upstream: str) -> list[str]:
    """``python -m guard.gateway``'s arguments: the control plane, then the wrapped server
    (``--upstream-url URL``, or ``--`` and a command)."""
    return ["-m", "guard.gateway", "--url", url, "--issuer", issuer, *upstream]


def gateway_parameters(control_plane: ControlPlane, *upstream: str) -> StdioServerParameters:
    """The SDK client's parameters to start the gateway in front of `upstream` (default:
    the test server over stdio)."""
    return StdioServerParameters(
        command=sys.executable,
        args=gateway_arguments(
            control_plane.url, control_plane.issuer, *(upstream or ("--", *UPSTREAM_COMMAND))
        ),
        env=gateway_environment(control_plane.agent.api_key),
        cwd=str(ROOT),
    )


@pytest.fixture
def http_upstream() -> Iterator[str]:
    """The test server over streamable HTTP; its endpoint's URL."""
    port = free_port()
    process = subprocess.Popen(
        [*UPSTREAM_COMMAND, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP test server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_for_http(url: str, process: subprocess.Popen, what: str) -> None:
    """Waits until `url` answers HTTP at all (any status)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.05)


@contextmanager
def http_gateway(
    control_plane: ControlPlane, *arguments: str, environment: dict[str, str] | None = None
) -> Iterator[str]:
    """``plangate-mcp serve`` on a free port with `arguments` (options, then the wrapped
    server); its endpoint's URL. The gateway's own PLANGATE_API_KEY is the agent's."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "guard.gateway",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--url",
            control_plane.url,
            "--issuer",
            control_plane.issuer,
            *arguments,
        ],
        env={**gateway_environment(control_plane.agent.api_key), **(environment or {})},
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_http(url, process, "the HTTP gateway")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
