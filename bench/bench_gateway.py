"""What `plangate-mcp` adds to a tools/call: the gateway in front of an MCP server vs the
bare server, over stdio, with the SDK's own client, calling the same tool many times.

Both sides are the test server of the gateway's tests (``tests/gateway/upstream_server.py``,
its ``echo`` tool) started as a subprocess; the gateway (``python -m guard.gateway``)
declares a plan first, against a stand-in of the control plane served over HTTP from this
process (`bench_guard.StandInControlPlane`: real EdDSA tokens, verified in full). The
figures alternate bare and guarded rounds, so a load change on the shared machine touches
both; each is the median of the rounds' mean per call. `Guard.check` for the same plan and
policy, timed in this process, is printed for reference: the gateway's own work per call is
that decision plus relaying the request and the answer through one more process (the relay
alone, in this process between ends made in memory, is printed too). The gateway's CPU time
per call (from /proc) is steadier than the wall clock on a loaded machine; the load average
is printed at the end, next to the figures.
Target: the gateway adds under 1 ms per call on top of the decision.

Run alone: ``python bench/bench_gateway.py [--gateway-calls N] [--gateway-rounds N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root
sys.path.insert(0, str(ROOT / "bench"))

from bench_guard import ISSUER, StandInControlPlane, per_call_microseconds  # noqa: E402

from guard.agent import Guard  # noqa: E402
from guard.plan import MAX_MAX_CALLS  # noqa: E402

UPSTREAM_SERVER = ROOT / "tests" / "gateway" / "upstream_server.py"
TOOL = "echo"
ARGUMENTS = {"text": "hello"}
TARGET_MICROSECONDS = 1000.0
POLICY = {"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": [TOOL]}]}
PLAN = {
    "version": 1,
    "goal": "Benchmark the gateway",
    "user": "alice@acme.dev",
    "steps": [{"tool": TOOL, "args": {"text": {"eq": "hello"}}, "maxCalls": MAX_MAX_CALLS}],
}


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--gateway-calls",
        type=int,
        default=1000,
        help="tools/call per timed round (default 1000)",
    )
    group.add_argument(
        "--gateway-rounds",
        type=int,
        default=5,
        help="timed rounds per side, alternating (default 5)",
    )


@contextmanager
def served(control_plane: StandInControlPlane) -> Iterator[str]:
    """The stand-in control plane over HTTP on 127.0.0.1; its URL."""
    control_plane.events_gate.set()  # the decision log is accepted at once

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = httpx.Request(
                self.command,
                f"http://127.0.0.1{self.path}",
                headers=dict(self.headers),
                content=self.rfile.read(length),
            )
            response = control_plane.handle(request)
            body = response.content
            self.send_response(response.status_code)
            for name, value in response.headers.items():
                if name.lower() not in {"content-length", "transfer-encoding"}:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def timed_calls(client: Any, calls: int) -> float:
    """Mean microseconds per tools/call over `calls` sequential calls."""
    start = time.perf_counter_ns()
    for _ in range(calls):
        result = await client.call_tool(TOOL, ARGUMENTS)
        if result.is_error:
            raise RuntimeError(f"the call failed: {result.content}")
    return (time.perf_counter_ns() - start) / calls / 1000


def child_processes(marker: str) -> list[int]:
    """This process's children whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and marker in command:
            found.append(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Figures:
    bare: float  # median microseconds per call, bare server
    guarded: float  # the same through the gateway
    gateway_cpu: float | None  # the gateway process's CPU microseconds per call
    server_cpu: float | None  # the bare server process's CPU microseconds per call


async def measure(url: str, calls: int, rounds: int) -> Figures:
    """Per-call figures for the bare server and through the gateway."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    bare_parameters = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM_SERVER)])
    gateway_parameters = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "guard.gateway",
            "--url",
            url,
            "--issuer",
            ISSUER,
            "--",
            sys.executable,
            str(UPSTREAM_SERVER),
        ],
        env={**os.environ, "PLANGATE_API_KEY": "pg_bench", "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    async with Client(bare_parameters) as bare, Client(gateway_parameters) as gateway:
        declared = await gateway.call_tool("declare_plan", json.loads(json.dumps(PLAN)))
        if declared.is_error:
            raise RuntimeError(f"declare_plan failed: {declared.content}")
        warm_up = max(1, calls // 10)
        await timed_calls(bare, warm_up)
        await timed_calls(gateway, warm_up)
        # CPU time where /proc tells it: on a loaded machine, a steadier figure of the
        # work a process does per call than the wall clock.
        gateways = child_processes("guard.gateway")
        servers = [pid for pid in child_processes(str(UPSTREAM_SERVER)) if pid not in gateways]
        cpu = {pid: cpu_seconds(pid) for pid in [*gateways, *servers]}
        bare_rounds, gateway_rounds = [], []
        for _ in range(rounds):
            bare_rounds.append(await timed_calls(bare, calls))
            gateway_rounds.append(await timed_calls(gateway, calls))
        spent = {
            pid: (cpu_seconds(pid) - before) * 1e6 / (calls * rounds) for pid, before in cpu.items()
        }
    return Figures(
        bare=statistics.median(bare_rounds),
        guarded=statistics.median(gateway_rounds),
        gateway_cpu=spent[gateways[0]] if len(gateways) == 1 else None,
        server_cpu=spent[servers[0]] if len(servers) == 1 else None,
    )


class _LoopbackClient:
    """A client end in memory: sends the next tools/call once the last one was answered.
    Waits as `guard.gateway.pipes` does, on a future the other side resolves."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.sent = 0
        self.answered: asyncio.Future[None] | None = None

    def __aiter__(self) -> _LoopbackClient:
        return self

    async def __anext__(self) -> Any:
        from guard.gateway.wire import parse_line

        if self.answered is not None:
            await self.answered
        if self.sent == self.calls:
            raise StopAsyncIteration
        self.answered = asyncio.get_running_loop().create_future()
        self.sent += 1
        params = {"name": TOOL, "arguments": ARGUMENTS}
        request = {"jsonrpc": "2.0", "id": self.sent, "method": "tools/call", "params": params}
        return parse_line(json.dumps(request).encode())

    async def send(self, wire: Any) -> None:
        wire.encoded()
        if self.answered is not None and not self.answered.done():
            self.answered.set_result(None)


class _LoopbackServer:
    """A server end in memory: answers every request with the same result."""

    def __init__(self) -> None:
        self.answers: deque[Any] = deque()
        self.arrived: asyncio.Future[None] | None = None

    def __aiter__(self) -> _LoopbackServer:
        return self

    async def __anext__(self) -> Any:
        from guard.gateway.wire import parse_line

        while not self.answers:
            self.arrived = asyncio.get_running_loop().create_future()
            await self.arrived
        request_id = self.answers.popleft()
        result = {"content": [{"type": "text", "text": "hello"}], "isError": False}
        answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return parse_line(json.dumps(answer).encode())

    async def send(self, wire: Any) -> None:
        wire.encoded()
        self.answers.append(wire.message.id)
        if self.arrived is not None and not self.arrived.done():
            self.arrived.set_result(None)


async def relay_microseconds(guard: Guard, calls: int, rounds: int) -> float:
    """The relay's own work per tools/call, in this process: `guard.gateway.relay.Relay`
    between a client and a server made in memory, each message parsed from its line and
    written out as the pipes would (no pipes, no processes); CPU time, steadier than the
    wall clock on a loaded machine; the median of `rounds`."""
    from guard.gateway.relay import Relay

    samples = []
    for round_index in range(rounds + 1):  # the first round warms up
        start = time.process_time_ns()
        await Relay(guard, client=_LoopbackClient(calls), upstream=_LoopbackServer()).run()
        if round_index:
            samples.append((time.process_time_ns() - start) / calls / 1000)
    return statistics.median(samples)


def decision_microseconds(control_plane: StandInControlPlane) -> tuple[float, float]:
    """(Guard.check alone, a call through the in-process relay), microseconds."""
    guard = Guard(
        "http://plangate.bench",
        "pg_bench",
        issuer=ISSUER,
        transport=httpx.MockTransport(control_plane.handle),
        auto_refresh=False,
        report=False,
    )
    guard.declare(json.loads(json.dumps(PLAN)))
    check: Callable[[], object] = lambda: guard.check(TOOL, ARGUMENTS)  # noqa: E731
    try:
        return per_call_microseconds(check, 20_000, 7), anyio.run(
            relay_microseconds, guard, 5000, 5
        )
    finally:
        guard.close()


def main(args: argparse.Namespace) -> int:
    calls = max(1, getattr(args, "gateway_calls", 1000))
    rounds = max(1, getattr(args, "gateway_rounds", 5))
    try:
        import mcp  # noqa: F401
    except ImportError:
        print("gateway: skipped, the mcp package is not installed (pip install 'guard[mcp]')")
        return 0
    print()
    print("== gateway: tools/call through plangate-mcp vs the bare MCP server (stdio) ==")
    print(f"median of {rounds} alternating rounds of {calls} sequential calls per side")
    control_plane = StandInControlPlane(POLICY)
    with served(control_plane) as url:
        figures = anyio.run(measure, url, calls, rounds)
    decision, relayed = decision_microseconds(control_plane)
    bare, guarded = figures.bare, figures.guarded
    added = guarded - bare
    print(f"bare server:       {bare:9.1f} us per call")
    print(f"through gateway:   {guarded:9.1f} us per call ({guarded / bare:.2f}x the bare server)")
    print(f"gateway adds:      {added:9.1f} us per call")
    print(f"Guard.check alone: {decision:9.2f} us per decision (in this process, for reference)")
    print(
        f"relay in-process:  {relayed:9.1f} us of CPU per call (the relay's own work: the"
        " decision, the messages parsed and written; no pipes, no processes)"
    )
    if figures.gateway_cpu is not None and figures.server_cpu is not None:
        print(
            f"CPU per call:      gateway {figures.gateway_cpu:.0f} us, bare server"
            f" {figures.server_cpu:.0f} us (the wrapped server's is the same work again)"
        )
    beyond = added - decision
    verdict = "yes" if beyond < TARGET_MICROSECONDS else "NO"
    print(
        f"added beyond the decision: {beyond:.1f} us (target under {TARGET_MICROSECONDS:.0f} us:"
        f" {verdict})"
    )
    print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser.add_argument_group("gateway"))
    raise SystemExit(main(parser.parse_args()))
