"""Newline-delimited JSON-RPC over file descriptors, read and written by the event loop
itself without blocking: the client's stdio, and a wrapped server's stdin and stdout.

No worker thread, no task and no memory stream between a descriptor and the relay: the
relay's loop reads a descriptor and writes the other end's straight away, so a relayed
message costs one wake-up of the event loop on its way in and usually none on its way out
(a write that fits in the pipe returns at once). The SDK's stdio transports put a task and
a stream (or a thread) on each side of each pipe, and serialise every message again; their
hand-overs were most of what the gateway added to a call (decision 0051). POSIX only, as
non-blocking pipes are.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections import deque
from contextlib import suppress
from typing import Final

import anyio

from guard.gateway.wire import Wire, parse_line

__all__ = ["Descriptor", "PipeEnd"]

_READ_SIZE: Final = 65536
# Bytes read from a descriptor before its reader takes them, at most (plus one read).
_READ_AHEAD: Final = 1 << 20


class Descriptor:
    """A file descriptor read or written without blocking the event loop (asyncio's: the
    gateway runs on anyio's asyncio backend). A regular file, which never blocks (and which
    epoll cannot watch), is used as it is.

    Reading: the event loop watches the descriptor for as long as it is read, and its
    callback reads what arrives, up to `_READ_AHEAD` bytes ahead of the reader (then it
    stops watching until the reader catches up): a message costs one callback and one
    wake-up of the reading task, not a watch set up and torn down for each (anyio's
    ``wait_readable``, about four times the work)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.regular = stat.S_ISREG(os.fstat(fd).st_mode)
        self._was_blocking = os.get_blocking(fd)
        if not self.regular:
            os.set_blocking(fd, False)
        self._chunks: deque[bytes] = deque()
        self._read_ahead = 0
        self._ended = False
        self._watching: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        # What a cancelled write left unwritten: it goes out before anything else does, so
        # no line is ever cut in two on the wire.
        self._unwritten = b""
        self._writing: anyio.Event | None = None  # set while a write waits for room

    def restore(self) -> None:
        """Stops reading; back to the blocking mode it came in (a descriptor the gateway was
        handed). Before the descriptor is closed."""
        self.stop_reading()
        if not self.regular:
            with suppress(OSError):
                os.set_blocking(self.fd, self._was_blocking)

    async def read(self) -> bytes:
        """The next bytes; empty at the end (or once the descriptor fails)."""
        if self.regular:
            try:
                return os.read(self.fd, _READ_SIZE)
            except OSError:
                return b""
        while not self._chunks:
            if self._ended:
                return b""
            loop = asyncio.get_running_loop()
            if self._watching is None:
                # Not watched yet (the first read, or the reader has caught up): what is
                # there is read at once. A descriptor epoll cannot watch (/dev/null) never
                # blocks, so it never gets this far.
                self._readable()
                if self._chunks or self._ended:
                    continue
                loop.add_reader(self.fd, self._readable)
                self._watching = loop
            waiter = self._waiter = loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        chunk = self._chunks.popleft()
        self._read_ahead -= len(chunk)
        return chunk

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self._chunks.append(chunk)
            self._read_ahead += len(chunk)
            if self._read_ahead >= _READ_AHEAD:
                self.stop_reading()  # the reader watches again once it has caught up
        else:
            self._ended = True
            self.stop_reading()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def stop_reading(self) -> None:
        """No more watching for input (before the descriptor is closed, or read otherwise)."""
        if self._watching is not None:
            self._watching.remove_reader(self.fd)
            self._watching = None

    async def write(self, data: bytes) -> None:
        """Writes all of `data`, after whatever an earlier write still has to write. Returns
        without awaiting when the descriptor takes it all at once (the usual case).

        Raises ``anyio.BrokenResourceError`` when the reading side is gone."""
        while self._writing is not None:  # one writer at a time: lines never interleave
            await self._writing.wait()
        pending = self._unwritten + data if self._unwritten else data
        self._unwritten = b""
        try:
            written = os.write(self.fd, pending)
        except BlockingIOError:
            written = 0
        except OSError as error:
            raise anyio.BrokenResourceError from error
        if written == len(pending):
            return
        self._unwritten = pending[written:]
        await self._drain()

    async def flush(self) -> None:
        """Writes what a cancelled write left unwritten."""
        while self._writing is not None:
            await self._writing.wait()
        if self._unwritten:
            await self._drain()

    async def _drain(self) -> None:
        writing = self._writing = anyio.Event()
        try:
            while self._unwritten:
                await anyio.wait_writable(self.fd)
                try:
                    written = os.write(self.fd, self._unwritten)
                except BlockingIOError:
                    continue
                except OSError as error:
                    self._unwritten = b""
                    raise anyio.BrokenResourceError from error
                self._unwritten = self._unwritten[written:]
        finally:
            self._writing = None
            writing.set()


class PipeEnd:
    """A peer that speaks newline-delimited JSON-RPC on two descriptors (the SDK's stdio
    framing): iterating yields its messages, each validated by the SDK and kept with its
    line; `send` writes a message as one line. A blank line is skipped; a line that is not
    JSON-RPC arrives as a ValueError; the end of input (or a read error) ends the iteration,
    and a last line without its newline is dropped, as the SDK does."""

    def __init__(self, reading: Descriptor, writing: Descriptor) -> None:
        self.reading = reading
        self.writing = writing
        self._lines: deque[bytes] = deque()
        self._partial: list[bytes] = []  # the start of a line still being read
        self._ended = False

    def __aiter__(self) -> PipeEnd:
        return self

    async def __anext__(self) -> Wire | Exception:
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            chunk = await self.reading.read()
            if not chunk:
                self._ended = True
                continue
            if b"\n" not in chunk:
                # Joined once its newline comes: a long message read in many chunks costs
                # one copy, not one per chunk.
                self._partial.append(chunk)
                continue
            if self._partial:
                chunk = b"".join([*self._partial, chunk])
                self._partial.clear()
            *lines, rest = chunk.split(b"\n")
            if rest:
                self._partial.append(rest)
            self._lines.extend(line for line in lines if line.strip())
        return parse_line(self._lines.popleft())

    async def send(self, wire: Wire) -> None:
        await self.writing.write(wire.encoded() + b"\n")
