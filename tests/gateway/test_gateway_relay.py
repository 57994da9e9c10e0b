"""The relay between a client and a server that speak raw JSON-RPC lines on real pipes, in
this process, with a real guard that has no plan: what is relayed arrives byte for byte,
ids included, in both directions (a cancellation, a request of the server to the client and
its answer, progress); a tools/call is the guard's; a server that closes its output leaves
no request unanswered."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp_types import CONNECTION_CLOSED, PARSE_ERROR

from guard.agent import Guard
from guard.gateway.pipes import Descriptor, PipeEnd
from guard.gateway.relay import UPSTREAM_CLOSED, Relay

UNREACHABLE = "http://127.0.0.1:9"  # the guard never declares here: nothing is sent


class Peer:
    """One side's raw lines: written to the relay, read from it."""

    def __init__(self, writes: int, reads: int) -> None:
        self.writes = writes
        self.reads = reads
        os.set_blocking(reads, False)
        self._pending = b""

    def send(self, line: bytes) -> None:
        os.write(self.writes, line + b"\n")

    async def line(self) -> bytes:
        while b"\n" not in self._pending:
            try:
                chunk = os.read(self.reads, 65536)
            except BlockingIOError:
                await anyio.wait_readable(self.reads)
                continue
            assert chunk, "the relay closed the pipe"
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    async def message(self) -> dict[str, Any]:
        return json.loads(await self.line())


@dataclass
class Running:
    client: Peer
    server: Peer
    open_descriptors: set[int]
    outcome: list[str | None] = field(default_factory=list)

    def close(self, fd: int) -> None:
        if fd in self.open_descriptors:
            self.open_descriptors.discard(fd)
            os.close(fd)


@asynccontextmanager
async def relayed() -> AsyncIterator[Running]:
    """A relay between two raw peers, running; the client's end closes on the way out."""
    client_to_relay, client_writes = os.pipe()
    client_reads, relay_to_client = os.pipe()
    server_reads, relay_to_server = os.pipe()
    server_to_relay, server_writes = os.pipe()
    client_end = PipeEnd(Descriptor(client_to_relay), Descriptor(relay_to_client))
    upstream_end = PipeEnd(Descriptor(server_to_relay), Descriptor(relay_to_server))
    guard = Guard(UNREACHABLE, "pg_unused", auto_refresh=False, watch_status=False, report=False)
    running = Running(
        Peer(client_writes, client_reads),
        Peer(server_writes, server_reads),
        open_descriptors={
            client_to_relay,
            client_writes,
            client_reads,
            relay_to_client,
            server_reads,
            relay_to_server,
            server_to_relay,
            server_writes,
        },
    )

    async def relay() -> None:
        running.outcome.append(await Relay(guard, client=client_end, upstream=upstream_end).run())

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(relay)
            yield running
            running.close(client_writes)  # the client goes away: the relay ends
    finally:
        guard.close()
        for descriptor in (client_end.reading, upstream_end.reading):
            descriptor.restore()
        for fd in list(running.open_descriptors):
            running.close(fd)


def run(scenario: Callable[[Running], Awaitable[None]]) -> list[str | None]:
    async def main() -> list[str | None]:
        async with relayed() as running:
            await scenario(running)
        return running.outcome

    return anyio.run(main)


def test_what_either_side_says_arrives_byte_for_byte_ids_included():
    lines = {
        "read": b'{"jsonrpc": "2.0", "id": "r-1", "method": "resources/read",'
        b' "params": {"uri": "notes://readme"}, "x-unknown": [1, 2]}',
        "cancel": b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
        b'"params":{"requestId":"r-0","reason":"the user stopped it"}}',
        "sampling": b'{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage",'
        b'"params":{"messages":[],"maxTokens":5}}',
        "sampled": b'{"jsonrpc":"2.0","id":7,"result":{"role":"assistant",'
        b'"content":{"type":"text","text":"hi"},"model":"m"}}',
        "progress": b'{"jsonrpc":"2.0","method":"notifications/progress",'
        b'"params":{"progressToken":"r-1","progress":1,"total":2}}',
        "answer": b'{"jsonrpc":"2.0","id":"r-1","result":{"contents":[]}}',
    }
    arrived: dict[str, bytes] = {}

    async def scenario(running: Running) -> None:
        client, server = running.client, running.server
        client.send(lines["read"])
        arrived["read"] = await server.line()
        client.send(lines["cancel"])
        arrived["cancel"] = await server.line()
        server.send(lines["sampling"])
        arrived["sampling"] = await client.line()
        client.send(lines["sampled"])
        arrived["sampled"] = await server.line()
        server.send(lines["progress"])
        arrived["progress"] = await client.line()
        server.send(lines["answer"])
        arrived["answer"] = await client.line()

    outcome = run(scenario)

    assert arrived == lines
    assert outcome == [None]  # the client closed its side: a normal end


def test_a_tools_call_is_the_guards_and_a_blocked_one_never_reaches_the_server():
    answers: list[dict[str, Any]] = []
    reached: list[dict[str, Any]] = []

    async def scenario(running: Running) -> None:
        call = {"name": "echo", "arguments": {"text": "hello"}}
        request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}
        running.client.send(json.dumps(request).encode())
        answers.append(await running.client.message())
        running.client.send(b'{"jsonrpc":"2.0","id":4,"method":"ping"}')
        reached.append(await running.server.message())

    run(scenario)

    (answer,) = answers
    assert answer["id"] == 3
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"].startswith("no_plan: ")
    assert answer["result"]["_meta"]["plangate/decision"]["code"] == "no_plan"
    # The next thing the server hears is the ping: the blocked call never reached it.
    assert reached == [{"jsonrpc": "2.0", "id": 4, "method": "ping"}]


def test_a_line_from_the_client_that_is_not_json_rpc_gets_a_parse_error():
    answers: list[dict[str, Any]] = []

    async def scenario(running: Running) -> None:
        running.client.send(b'{"jsonrpc": "2.0", "id": 1}')
        answers.append(await running.client.message())

    run(scenario)

    assert answers[0]["id"] is None
    assert answers[0]["error"]["code"] == PARSE_ERROR


def test_a_server_that_closes_its_output_leaves_no_request_unanswered():
    answers: list[dict[str, Any]] = []

    async def scenario(running: Running) -> None:
        running.client.send(b'{"jsonrpc":"2.0","id":"slow","method":"resources/list"}')
        await running.server.line()
        running.close(running.server.writes)
        answers.append(await running.client.message())

    outcome = run(scenario)

    (answer,) = answers
    assert answer["id"] == "slow"
    assert answer["error"]["code"] == CONNECTION_CLOSED
    assert UPSTREAM_CLOSED in answer["error"]["message"]
    assert outcome == [UPSTREAM_CLOSED]
