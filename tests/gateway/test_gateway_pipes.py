"""The gateway's stdio framing (`guard.gateway.pipes`) on real pipes: what a peer writes
arrives as the SDK's messages with their lines, whatever the chunks; what the gateway
writes arrives whole, one line per message, however full the pipe is."""

from __future__ import annotations

import json
import os

import anyio
from mcp_types import JSONRPCNotification, JSONRPCRequest

from guard.gateway.pipes import Descriptor, PipeEnd
from guard.gateway.wire import Wire


def pipe_end() -> tuple[PipeEnd, int, int]:
    """An end reading one pipe and writing another; the peer's write and read descriptors."""
    peer_reads, end_writes = os.pipe()
    end_reads, peer_writes = os.pipe()
    return PipeEnd(Descriptor(end_reads), Descriptor(end_writes)), peer_writes, peer_reads


async def read_all(fd: int) -> bytes:
    """Everything the peer's side of a pipe receives until the end closes it."""
    os.set_blocking(fd, False)
    data = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        if not chunk:
            return bytes(data)
        data += chunk


def test_messages_arrive_with_their_lines_whatever_the_chunks():
    request = b'{"jsonrpc": "2.0", "id": "a-1", "method": "ping", "extra": true}'
    notification = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'

    async def scenario() -> list[Wire | Exception]:
        end, peer_writes, peer_reads = pipe_end()
        received: list[Wire | Exception] = []

        async def receive() -> None:
            async for item in end:
                received.append(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(receive)
            for chunk in (request[:10], request[10:] + b"\n\n  \n" + notification[:5]):
                os.write(peer_writes, chunk)
                await anyio.sleep(0.01)  # separate reads; the outcome does not depend on it
            os.write(peer_writes, notification[5:] + b"\nnot json\n" + b'{"jsonrpc":"2.0"')
            os.close(peer_writes)
        end.reading.restore()
        os.close(end.reading.fd)
        for fd in (end.writing.fd, peer_reads):
            os.close(fd)
        return received

    received = anyio.run(scenario)

    first, second, third = received
    assert isinstance(first, Wire)
    assert isinstance(first.message, JSONRPCRequest)
    assert first.message.id == "a-1"
    assert first.line == request  # kept as it came: the relay forwards these bytes
    assert isinstance(second, Wire)
    assert isinstance(second.message, JSONRPCNotification)
    assert second.line == notification
    # Not JSON-RPC: a value, as the SDK's transports hand it over; the unfinished last
    # line is dropped at the end, as the SDK does.
    assert isinstance(third, ValueError)


def test_a_message_larger_than_the_pipe_arrives_whole_and_never_interleaved():
    big = Wire(JSONRPCNotification(jsonrpc="2.0", method="notes", params={"text": "x" * 300_000}))
    small = Wire(JSONRPCNotification(jsonrpc="2.0", method="ping"))

    async def scenario() -> bytes:
        end, peer_writes, peer_reads = pipe_end()
        received = b""

        async def read() -> None:
            nonlocal received
            await anyio.sleep(0.05)  # the pipe fills up first: the big send must wait
            received = await read_all(peer_reads)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            async with anyio.create_task_group() as sends:
                sends.start_soon(end.send, big)
                sends.start_soon(end.send, small)
                sends.start_soon(end.send, big)
            os.close(end.writing.fd)
        end.reading.restore()
        for fd in (end.reading.fd, peer_writes, peer_reads):
            os.close(fd)
        return received

    received = anyio.run(scenario)

    lines = received.split(b"\n")
    assert lines[-1] == b""
    methods = [json.loads(line)["method"] for line in lines[:-1]]
    assert sorted(methods) == ["notes", "notes", "ping"]
    assert all(len(line) > 300_000 for line in lines[:-1] if b'"notes"' in line)


def test_input_that_cannot_be_watched_and_never_blocks_ends_at_once():
    # /dev/null as the client's stdin: epoll refuses to watch it, and it is at its end.
    async def scenario() -> list[Wire | Exception]:
        null = os.open(os.devnull, os.O_RDWR)
        end = PipeEnd(Descriptor(null), Descriptor(null))
        try:
            return [item async for item in end]
        finally:
            end.reading.restore()
            os.close(null)

    assert anyio.run(scenario) == []
