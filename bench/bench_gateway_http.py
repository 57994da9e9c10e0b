"""What ``plangate-mcp serve`` adds to a tools/call over HTTP: the gateway in front of an
MCP server vs the bare server, both over streamable HTTP (MCP 2026-07-28, stateless: one
POST per call), with the SDK's own client; then the throughput of 100 clients calling at
once, through the gateway and straight to the server, in the same run.

Both sides are the gateway tests' server (``tests/gateway/upstream_server.py --http``, its
``echo`` tool); the gateway (``python -m guard.gateway serve --upstream-url``) wraps that
same server process, and decides each call under a plan declared first, against the
stand-in control plane of `bench_gateway` (real EdDSA tokens, verified in full). The
clients present a gateway key. Latency: each call timed alone, the rounds alternating bare
and guarded so a load change on the shared machine touches both; p50 and p99 of all of a
side's calls. Throughput: calls per second of 100 concurrent clients, each calling in a
loop, for each side. Target: under 1 ms added per call at p50.

Run alone: ``python bench/bench_gateway_http.py [--gateway-http-calls N]
[--gateway-http-rounds N] [--gateway-http-clients N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root
sys.path.insert(0, str(ROOT / "bench"))

from bench_gateway import ARGUMENTS, PLAN, POLICY, TOOL, UPSTREAM_SERVER, served  # noqa: E402
from bench_guard import ISSUER, StandInControlPlane  # noqa: E402
from benchlib import percentile  # noqa: E402

MODERN = "2026-07-28"
CLIENT_KEY = "gw_bench_client"
TARGET_MICROSECONDS = 1000.0
PLAN_META_KEY = "plangate/plan"


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--gateway-http-calls",
        type=int,
        default=300,
        help="tools/call per timed latency round (default 300)",
    )
    group.add_argument(
        "--gateway-http-rounds",
        type=int,
        default=4,
        help="latency rounds per side, alternating (default 4)",
    )
    group.add_argument(
        "--gateway-http-clients",
        type=int,
        default=100,
        help="concurrent clients for the throughput figure (default 100)",
    )
    group.add_argument(
        "--gateway-http-seconds",
        type=float,
        default=5.0,
        help="seconds each side's throughput is measured for (default 5)",
    )


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not start") from None
            time.sleep(0.05)


@contextmanager
def process(arguments: list[str], url: str, environment: dict[str, str]) -> Iterator[str]:
    started = subprocess.Popen(
        [sys.executable, *arguments],
        env={**os.environ, **environment},
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(url, started)
        yield url
    finally:
        started.terminate()
        started.wait(timeout=10)


@asynccontextmanager
async def client(url: str, headers: dict[str, str]) -> Any:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODERN) as connected,
    ):
        yield connected


async def one_call(mcp: Any, meta: dict[str, Any] | None) -> float:
    start = time.perf_counter_ns()
    result = await mcp.call_tool(TOOL, ARGUMENTS, meta=meta)
    elapsed = (time.perf_counter_ns() - start) / 1000
    if result.is_error:
        raise RuntimeError(f"the call failed: {result.content}")
    return elapsed


async def latencies(
    bare_url: str, gateway_url: str, calls: int, rounds: int
) -> tuple[list[float], list[float], dict[str, Any]]:
    auth = {"Authorization": f"Bearer {CLIENT_KEY}"}
    async with client(bare_url, {}) as bare, client(gateway_url, auth) as gateway:
        declared = await gateway.call_tool("declare_plan", json.loads(json.dumps(PLAN)))
        if declared.is_error:
            raise RuntimeError(f"declare_plan failed: {declared.content}")
        meta = {PLAN_META_KEY: declared.meta[PLAN_META_KEY]}
        for _ in range(max(1, calls // 10)):  # warm-up
            await one_call(bare, None)
            await one_call(gateway, meta)
        bare_times: list[float] = []
        gateway_times: list[float] = []
        for _ in range(rounds):
            bare_times += [await one_call(bare, None) for _ in range(calls)]
            gateway_times += [await one_call(gateway, meta) for _ in range(calls)]
    return sorted(bare_times), sorted(gateway_times), meta


async def throughput(
    url: str, headers: dict[str, str], meta: dict[str, Any] | None, clients: int, seconds: float
) -> float:
    """Calls per second of `clients` concurrent clients calling for `seconds`."""
    done = 0
    ready = anyio.Event()
    connected = 0

    async def run() -> None:
        nonlocal done, connected
        async with client(url, headers) as mcp:
            connected += 1
            if connected == clients:
                ready.set()
            await ready.wait()
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                await one_call(mcp, meta)
                done += 1

    start = 0.0

    async def clock() -> None:
        nonlocal start
        await ready.wait()
        start = time.monotonic()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(clock)
        for _ in range(clients):
            tasks.start_soon(run)
    return done / (time.monotonic() - start)


def main(args: argparse.Namespace) -> int:
    calls = max(1, getattr(args, "gateway_http_calls", 300))
    rounds = max(1, getattr(args, "gateway_http_rounds", 4))
    clients = max(1, getattr(args, "gateway_http_clients", 100))
    seconds = max(0.5, getattr(args, "gateway_http_seconds", 5.0))
    try:
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("gateway_http: skipped, the mcp package is not installed (pip install 'guard[mcp]')")
        return 0
    print()
    print("== gateway_http: tools/call through plangate-mcp serve vs the bare server (HTTP) ==")
    print(f"MCP {MODERN}; latency: {rounds} alternating rounds of {calls} calls per side")
    control_plane = StandInControlPlane(POLICY)
    upstream_port, gateway_port = _free_port(), _free_port()
    bare_url = f"http://127.0.0.1:{upstream_port}/mcp"
    gateway_url = f"http://127.0.0.1:{gateway_port}/mcp"
    with (
        served(control_plane) as control_url,
        process([str(UPSTREAM_SERVER), "--http", str(upstream_port)], bare_url, {}),
        process(
            [
                "-m",
                "guard.gateway",
                "serve",
                "--listen",
                f"127.0.0.1:{gateway_port}",
                "--url",
                control_url,
                "--issuer",
                ISSUER,
                "--upstream-url",
                bare_url,
            ],
            gateway_url,
            {
                "PLANGATE_API_KEY": "pg_bench",
                "PLANGATE_GATEWAY_CLIENT_KEYS": CLIENT_KEY,
                "PYTHONPATH": str(ROOT),
            },
        ),
    ):
        bare, guarded, meta = anyio.run(latencies, bare_url, gateway_url, calls, rounds)
        auth = {"Authorization": f"Bearer {CLIENT_KEY}"}
        bare_rate = anyio.run(throughput, bare_url, {}, None, clients, seconds)
        gateway_rate = anyio.run(throughput, gateway_url, auth, meta, clients, seconds)
    rows = []
    for name, fraction in (("p50", 0.50), ("p99", 0.99)):
        b, g = percentile(bare, fraction), percentile(guarded, fraction)
        rows.append((name, b, g))
        print(
            f"{name}: bare {b:8.0f} us, through the gateway {g:8.0f} us"
            f" ({g / b:.2f}x), added {g - b:7.0f} us"
        )
    added = rows[0][2] - rows[0][1]
    verdict = "yes" if added < TARGET_MICROSECONDS else "NO"
    print(f"added at p50: {added:.0f} us (target under {TARGET_MICROSECONDS:.0f} us: {verdict})")
    print(
        f"throughput, {clients} clients at once: bare {bare_rate:.0f} calls/s, through the"
        f" gateway {gateway_rate:.0f} calls/s ({gateway_rate / bare_rate:.2f}x)"
    )
    print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser.add_argument_group("gateway_http"))
    raise SystemExit(main(parser.parse_args()))
