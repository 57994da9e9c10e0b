"""The client's side of the gateway: newline-delimited JSON-RPC over this process's stdin
and stdout, the SDK's framing and message types.

Not the SDK's ``stdio_server``: it reads stdin in a worker thread that cannot be
cancelled, so it only stops once the client closes stdin or sends a line. The gateway must
stop when the wrapped server dies, while the client holds stdin open and silent; here the
lines are read by a daemon thread that is simply abandoned then.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import BinaryIO, Final

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

__all__ = ["client_stdio"]

# Time for answers already handed to the writer to reach the client when the gateway ends.
_FLUSH_SECONDS: Final = 5.0
_READ_SIZE: Final = 65536


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


@asynccontextmanager
async def client_stdio(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> AsyncIterator[TransportStreams]:
    """The client's messages (a parse failure arrives as an Exception item) and a stream for
    the messages to it. Without explicit streams, the process's own: while serving, file
    descriptor 1 points at stderr, so a stray print cannot corrupt the protocol."""
    restore_stdout: int | None = None
    if stdout is None:
        sys.stdout.flush()
        wire = os.dup(1)
        os.dup2(2, 1)
        restore_stdout = wire
        stdout = os.fdopen(wire, "wb", closefd=False)
    # Raw reads of the descriptor: a buffered reader's lock, held by the abandoned thread,
    # would abort the interpreter at exit ("could not acquire lock for <stdin>").
    source_fd = (stdin if stdin is not None else sys.stdin).fileno()
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    token = anyio.lowlevel.current_token()

    def read_lines() -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError, OSError):
            try:
                pending = b""
                while chunk := os.read(source_fd, _READ_SIZE):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            anyio.from_thread.run(read_writer.send, _parse(line), token=token)
            finally:
                anyio.from_thread.run_sync(read_writer.close, token=token)

    def write(data: bytes) -> None:
        stdout.write(data)
        stdout.flush()

    writer_done = anyio.Event()

    async def write_lines() -> None:
        try:
            with suppress(OSError, ValueError):
                async with write_reader:
                    async for message in write_reader:
                        line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await anyio.to_thread.run_sync(write, (line + "\n").encode())
        finally:
            writer_done.set()

    threading.Thread(target=read_lines, name="plangate-mcp-stdin", daemon=True).start()
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(write_lines)
            try:
                yield read_stream, write_stream
            finally:
                # What was handed to the writer still goes out, for a bounded time.
                write_stream.close()
                read_stream.close()
                with anyio.move_on_after(_FLUSH_SECONDS, shield=True):
                    await writer_done.wait()
                tasks.cancel_scope.cancel()
    finally:
        if restore_stdout is not None:
            os.dup2(restore_stdout, 1)
