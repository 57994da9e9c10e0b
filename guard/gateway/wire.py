"""The messages the relay moves, and the two kinds of end it moves them between.

A `Wire` is one JSON-RPC message as the SDK's types define it (`mcp_types.JSONRPCMessage`,
validated by the SDK's own ``jsonrpc_message_adapter``), together with the line it arrived
as. A message the gateway relays unchanged goes out as that line, byte for byte: it is not
serialised again. Only what the gateway writes itself (its answers, a changed tool list, a
message that came over HTTP) is serialised, as the SDK's transports do.

An end (`MessageEnd`) yields what one side says and takes what is said to it. Two kinds:
`guard.gateway.pipes.PipeEnd`, newline-delimited JSON over file descriptors (the client's
stdio, a wrapped server's pipes), and `StreamEnd`, the SDK's message streams (a wrapped
server over streamable HTTP, through the SDK's client transport).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from mcp.shared.message import MessageMetadata, SessionMessage
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter

__all__ = ["MessageEnd", "SessionMessageSender", "StreamEnd", "Wire", "parse_line"]


@dataclass(slots=True)
class Wire:
    """A JSON-RPC message, and the line it came as (None: the gateway made it, or it came
    over a transport that hands over messages, not lines)."""

    message: JSONRPCMessage
    line: bytes | None = None

    def encoded(self) -> bytes:
        """The message as one line of JSON, without the newline: the line it came as, else
        the message serialised as the SDK's stdio transports write it."""
        if self.line is not None:
            return self.line
        return self.message.model_dump_json(by_alias=True, exclude_unset=True).encode()


def parse_line(line: bytes) -> Wire | ValueError:
    """One line read from a peer: the message, or why it is not JSON-RPC (a value, as the
    SDK's transports hand parse failures to the session)."""
    try:
        return Wire(jsonrpc_message_adapter.validate_json(line, by_name=False), line)
    except ValueError as error:
        return error


class MessageEnd(Protocol):
    """One side of the relay: iterating yields what it says (a line that is not JSON-RPC
    as an Exception) until it closes; `send` raises ``anyio.BrokenResourceError`` (or
    another of anyio's closed-stream errors) once it is gone."""

    def __aiter__(self) -> AsyncIterator[Wire | Exception]: ...

    async def send(self, wire: Wire) -> None: ...


class SessionMessageSender(Protocol):
    """The sending half of the SDK's transport streams."""

    async def send(self, item: SessionMessage, /) -> None: ...


class StreamEnd:
    """A peer behind the SDK's transport streams (``SessionMessage`` both ways). `metadata`
    gives each outgoing message the transport metadata it needs (HTTP headers), `observe`
    sees each incoming one."""

    def __init__(
        self,
        read: AsyncIterable[SessionMessage | Exception],
        write: SessionMessageSender,
        *,
        metadata: Callable[[JSONRPCMessage], MessageMetadata] | None = None,
        observe: Callable[[JSONRPCMessage], None] | None = None,
    ) -> None:
        self._items = aiter(read)
        self._write = write
        self._metadata = metadata
        self._observe = observe

    def __aiter__(self) -> StreamEnd:
        return self

    async def __anext__(self) -> Wire | Exception:
        item = await self._items.__anext__()
        if isinstance(item, Exception):
            return item
        if self._observe is not None:
            self._observe(item.message)
        return Wire(item.message)

    async def send(self, wire: Wire) -> None:
        metadata = self._metadata(wire.message) if self._metadata is not None else None
        await self._write.send(SessionMessage(wire.message, metadata))
