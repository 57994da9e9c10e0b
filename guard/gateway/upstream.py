"""Opening the wrapped MCP server: a command over stdio (the gateway's own transport,
`guard.gateway.pipes`, with the SDK's shutdown sequence), or a URL over streamable HTTP
(the SDK's client transport)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from typing import Any, Final

import anyio
from anyio.abc import Process
from mcp.client.streamable_http import streamable_http_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata
from mcp_types import (
    PROTOCOL_VERSION_META_KEY,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from guard.gateway.pipes import Descriptor, PipeEnd
from guard.gateway.wire import MessageEnd, StreamEnd

__all__ = [
    "HIDDEN_ENVIRONMENT",
    "HttpHeaders",
    "open_upstream",
    "server_environment",
    "server_process",
]

# The guard's own secret: the wrapped server has no business with the agent's API key.
HIDDEN_ENVIRONMENT: Final = frozenset({"PLANGATE_API_KEY"})

# The SDK's stdio client's shutdown, step by step (mcp.client.stdio): time to write what a
# cancelled write left, for the server to exit once its stdin is closed, and after SIGTERM
# to the process group before SIGKILL; then for the event loop to see the kill.
_FLUSH_SECONDS: Final = 0.5
_EXIT_SECONDS: Final = 2.0
_TERMINATE_SECONDS: Final = 2.0
_REAP_SECONDS: Final = 2.0
_EXIT_POLL_SECONDS: Final = 0.01


def server_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The wrapped server's environment: the gateway's own, as an MCP client configuration
    sets it for the command it starts (tokens for the server's own APIs...), less
    `HIDDEN_ENVIRONMENT`. The SDK's default would keep only HOME, PATH and a few more."""
    return {name: value for name, value in environment.items() if name not in HIDDEN_ENVIRONMENT}


@asynccontextmanager
async def open_upstream(
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[MessageEnd]:
    """The wrapped server's end: `command` started over stdio (its stderr is the gateway's),
    or the streamable-HTTP endpoint at `url`, each request carrying `headers` (the
    operator's credentials for that server, ``--upstream-header``; nothing of a client's)."""
    if command:
        async with server_process(command, environment=server_environment(os.environ)) as end:
            yield end
    elif url:
        protocol = HttpHeaders()
        async with (
            create_mcp_http_client(headers=dict(headers or {})) as http_client,
            streamable_http_client(url, http_client=http_client) as (read, write),
        ):
            yield StreamEnd(read, write, metadata=protocol.metadata, observe=protocol.observe)
    else:
        raise ValueError("give the wrapped server's command or URL")


@asynccontextmanager
async def server_process(
    command: Sequence[str], *, environment: Mapping[str, str]
) -> AsyncIterator[PipeEnd]:
    """`command` started in a session of its own (so its whole process group can be
    stopped), its stdin and stdout the end's pipes, its stderr the gateway's. Raises
    OSError when it cannot be started.

    On the way out it is stopped as the SDK's stdio client stops a server: stdin closed,
    a grace period (its output read and dropped meanwhile, so a server blocked on a full
    pipe can exit), then SIGTERM and SIGKILL to its process group."""
    server_stdin, to_server = os.pipe()
    from_server, server_stdout = os.pipe()
    try:
        process = await anyio.open_process(
            list(command),
            stdin=server_stdin,
            stdout=server_stdout,
            stderr=sys.stderr,
            env=dict(environment),
            start_new_session=True,
        )
    except BaseException:
        for fd in (to_server, from_server):
            os.close(fd)
        raise
    finally:
        # The server's own ends are the server's: with them closed here, its exit is the
        # end of its output.
        for fd in (server_stdin, server_stdout):
            os.close(fd)
    end = PipeEnd(Descriptor(from_server), Descriptor(to_server))
    try:
        yield end
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, end)


async def _stop(process: Process, end: PipeEnd) -> None:
    with anyio.move_on_after(_FLUSH_SECONDS), suppress(anyio.BrokenResourceError):
        await end.writing.flush()
    os.close(end.writing.fd)
    end.reading.stop_reading()  # its output is read and dropped from here on
    try:
        with anyio.move_on_after(_EXIT_SECONDS):
            await _drain_until_exit(process, end.reading)
        if process.returncode is None:
            await terminate_posix_process_tree(process, _TERMINATE_SECONDS)
            with anyio.move_on_after(_REAP_SECONDS):
                await _drain_until_exit(process, end.reading)
    finally:
        os.close(end.reading.fd)


async def _drain_until_exit(process: Process, output: Descriptor) -> None:
    """Waits for the process to exit, reading and dropping what it still writes. Polls the
    exit status, as the SDK does: a child that inherited the pipe may hold it open."""
    while process.returncode is None:
        with suppress(OSError):
            while os.read(output.fd, 65536):
                pass
        await anyio.sleep(_EXIT_POLL_SECONDS)


class HttpHeaders:
    """The per-message HTTP headers a streamable-HTTP server expects, which the SDK's client
    session would have set (the relay forwards raw messages, not the session's): the
    negotiated ``MCP-Protocol-Version`` after an ``initialize`` handshake; and for a
    2026-07-28 request, which carries its protocol version in ``_meta``, that version with
    ``Mcp-Method`` and ``Mcp-Name``."""

    def __init__(self) -> None:
        self.negotiated_version: str | None = None
        self._initialize_ids: set[RequestId] = set()

    def initialized(self, result: Mapping[str, Any]) -> None:
        """The server answered ``initialize``: its protocol version holds from now on."""
        version = result.get("protocolVersion")
        if isinstance(version, str):
            self.negotiated_version = version

    def observe(self, message: JSONRPCMessage) -> None:
        """A message from the server: the answer to ``initialize`` sets the version."""
        if isinstance(message, JSONRPCResponse) and message.id in self._initialize_ids:
            self._initialize_ids.discard(message.id)
            self.initialized(message.result)

    def metadata(self, message: JSONRPCMessage) -> ClientMessageMetadata | None:
        """The headers of a message to the server (None: the transport's own)."""
        if not isinstance(message, JSONRPCRequest | JSONRPCNotification):
            return None  # an answer to the server: the transport adds the cached version
        params = message.params or {}
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):
            headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: message.method}
            name_key = NAME_BEARING_METHODS.get(message.method)
            name = params.get(name_key) if name_key is not None else None
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
            return ClientMessageMetadata(headers=headers)
        if message.method == "initialize":
            if isinstance(message, JSONRPCRequest):
                self._initialize_ids.add(message.id)
            return None
        if self.negotiated_version is not None:
            return ClientMessageMetadata(
                headers={MCP_PROTOCOL_VERSION_HEADER: self.negotiated_version}
            )
        return None
