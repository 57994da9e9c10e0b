"""The client's side of the gateway: newline-delimited JSON-RPC over this process's stdin
and stdout, the SDK's framing and message types (`guard.gateway.pipes`).

Not the SDK's ``stdio_server``, for two reasons. It reads stdin in a worker thread that
cannot be cancelled, so it only stops once the client closes stdin or sends a line, and
the gateway must stop when the wrapped server dies while the client holds stdin open and
silent. And every line then crosses between threads twice, which is most of what a
gateway adds to a call. Here the event loop reads and writes the descriptors itself, non-
blocking (a regular file, which never blocks, is read and written as it is).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import BinaryIO, Final

import anyio

from guard.gateway.pipes import Descriptor, PipeEnd

__all__ = ["client_stdio"]

# Time for an answer a cancelled write left half written to reach the client at the end.
_FLUSH_SECONDS: Final = 5.0


@asynccontextmanager
async def client_stdio(
    stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> AsyncIterator[PipeEnd]:
    """The client's end. Without explicit streams, the process's own: while serving, file
    descriptor 1 points at stderr, so a stray print cannot corrupt the protocol."""
    restore_stdout: int | None = None
    if stdout is None:
        sys.stdout.flush()
        wire = os.dup(1)
        os.dup2(2, 1)
        restore_stdout = wire
    source = Descriptor((stdin if stdin is not None else sys.stdin).fileno())
    target = Descriptor(wire if stdout is None else stdout.fileno())
    try:
        yield PipeEnd(source, target)
    finally:
        try:
            with anyio.move_on_after(_FLUSH_SECONDS, shield=True):
                await target.flush()
        except anyio.BrokenResourceError:
            pass  # the client is gone
        finally:
            source.restore()
            target.restore()
            if restore_stdout is not None:
                os.dup2(restore_stdout, 1)
                os.close(restore_stdout)
