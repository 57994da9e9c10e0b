"""The client's side of the gateway: newline-delimited JSON-RPC over this process's stdin
and stdout, the SDK's framing and message types.

Not the SDK's ``stdio_server``, for two reasons. It reads stdin in a worker thread that
cannot be cancelled, so it only stops once the client closes stdin or sends a line, and
the gateway must stop when the wrapped server dies while the client holds stdin open and
silent. And every line then crosses between threads twice, which is most of what a
gateway adds to a call. Here the event loop reads and writes the descriptors itself, non-
blocking (a regular file, which never blocks, is read and written as it is).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import BinaryIO, Final

import anyio
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

__all__ = ["client_stdio"]

# Time for answers already handed to the writer to reach the client when the gateway ends.
_FLUSH_SECONDS: Final = 5.0
_READ_SIZE: Final = 65536
# Messages that may wait between the descriptors and the relay: a hand-over then costs no
# rendezvous (the sender goes on at once), and a line read ahead is parsed ahead.
_BUFFERED: Final = 64


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


class _Descriptor:
    """A file descriptor the event loop reads or writes without blocking."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.regular = stat.S_ISREG(os.fstat(fd).st_mode)
        self.was_blocking = os.get_blocking(fd)
        if not self.regular:
            os.set_blocking(fd, False)

    def restore(self) -> None:
        if not self.regular:
            with suppress(OSError):
                os.set_blocking(self.fd, self.was_blocking)

    async def read(self) -> bytes:
        """The next bytes; empty at the end."""
        while True:
            try:
                return os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)

    async def write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.fd)


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
    source = _Descriptor((stdin if stdin is not None else sys.stdin).fileno())
    target = _Descriptor(wire if stdout is None else stdout.fileno())
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        _BUFFERED
    )
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](_BUFFERED)
    writer_done = anyio.Event()

    async def read_lines() -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with read_writer:
                pending = b""
                while chunk := await source.read():
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            await read_writer.send(_parse(line))

    async def write_lines() -> None:
        try:
            with suppress(OSError):
                async with write_reader:
                    async for message in write_reader:
                        line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await target.write_all((line + "\n").encode())
        finally:
            writer_done.set()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_lines)
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
        source.restore()
        target.restore()
        if restore_stdout is not None:
            os.dup2(restore_stdout, 1)
            os.close(restore_stdout)
