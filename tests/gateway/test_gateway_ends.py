"""A wrapped server that exits, at once or in the middle of a call, ends the gateway with
a message on stderr and a non-zero status, while the client still holds stdin open: the
client's pending request is answered with an error, nothing waits forever.

The client here is raw JSON-RPC lines (the handshake of protocol 2025-11-25), so the test
owns the gateway's process and reads its exit status."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import IO, Any

import pytest

from guard.agent.tools import DECLARE_PLAN_TOOL

from .conftest import (
    GATEWAY_PLAN,
    ROOT,
    UPSTREAM_COMMAND,
    gateway_arguments,
    gateway_environment,
)

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

# Bounds a test that would otherwise hang; never a pass/fail criterion on speed.
HANG_GUARD_SECONDS = 120

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-test-client", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class RawGateway:
    """The gateway in a subprocess, with a line reader so no read can block the test."""

    def __init__(self, arguments: list[str], api_key: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=gateway_environment(api_key),
            cwd=str(ROOT),
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: int) -> dict[str, Any]:
        """The answer to `request_id` (notifications and other answers are skipped)."""
        while True:
            line = self.lines.get(timeout=HANG_GUARD_SECONDS)
            assert line, f"the gateway closed stdout before answering request {request_id}"
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def wait(self) -> tuple[int, str]:
        """The exit status and stderr; stdin is still open, as a client would hold it."""
        status = self.process.wait(timeout=HANG_GUARD_SECONDS)
        assert self.process.stderr is not None
        return status, self.process.stderr.read().decode()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def test_a_server_that_exits_at_once_ends_the_gateway():
    # No control plane is needed: the server is gone before any plan could be declared.
    unreachable = "http://127.0.0.1:9"
    arguments = gateway_arguments(unreachable, unreachable, "--", sys.executable, "-c", "pass")
    gateway = RawGateway(arguments, api_key="pg_unused")
    try:
        gateway.send(INITIALIZE)
        answer = gateway.answer(1)
        status, stderr = gateway.wait()
    finally:
        gateway.close()

    assert "error" in answer
    assert "the wrapped MCP server closed the connection" in answer["error"]["message"]
    assert status == 1
    assert "plangate-mcp: the wrapped MCP server closed the connection" in stderr


def test_a_server_that_dies_in_the_middle_of_a_call_ends_the_gateway(control_plane):
    arguments = gateway_arguments(control_plane.url, control_plane.issuer, "--", *UPSTREAM_COMMAND)
    gateway = RawGateway(arguments, api_key=control_plane.agent.api_key)
    try:
        gateway.send(INITIALIZE)
        initialized = gateway.answer(1)
        gateway.send(INITIALIZED)
        gateway.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": DECLARE_PLAN_TOOL, "arguments": GATEWAY_PLAN},
            }
        )
        declared = gateway.answer(2)
        gateway.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "die", "arguments": {}},
            }
        )
        died = gateway.answer(3)
        status, stderr = gateway.wait()
    finally:
        gateway.close()

    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert declared["result"]["isError"] is False
    # No resultType on a 2025-11-25 connection: that field is the 2026-07-28 protocol's.
    assert "resultType" not in declared["result"]
    assert "the wrapped MCP server closed the connection" in died["error"]["message"]
    assert status == 1
    assert "plangate-mcp: the wrapped MCP server closed the connection" in stderr
