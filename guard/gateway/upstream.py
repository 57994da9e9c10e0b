"""Opening the wrapped MCP server: a command over stdio, or a URL over streamable HTTP,
through the SDK's own client transports."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata
from mcp_types import JSONRPCMessage, JSONRPCNotification, JSONRPCRequest
from mcp_types._types import PROTOCOL_VERSION_META_KEY

__all__ = ["HIDDEN_ENVIRONMENT", "HttpHeaders", "open_upstream", "server_environment"]

# The guard's own secret: the wrapped server has no business with the agent's API key.
HIDDEN_ENVIRONMENT: Final = frozenset({"PLANGATE_API_KEY"})


def server_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """The wrapped server's environment: the gateway's own, as an MCP client configuration
    sets it for the command it starts (tokens for the server's own APIs...), less
    `HIDDEN_ENVIRONMENT`. The SDK's default would keep only HOME, PATH and a few more."""
    return {name: value for name, value in environment.items() if name not in HIDDEN_ENVIRONMENT}


@asynccontextmanager
async def open_upstream(
    *, command: Sequence[str] | None = None, url: str | None = None
) -> AsyncIterator[TransportStreams]:
    """The wrapped server's message streams: `command` started over stdio (its stderr is
    the gateway's), or the streamable-HTTP endpoint at `url`."""
    if command:
        parameters = StdioServerParameters(
            command=command[0], args=list(command[1:]), env=server_environment(os.environ)
        )
        async with stdio_client(parameters, errlog=sys.stderr) as streams:
            yield streams
    elif url:
        async with streamable_http_client(url) as streams:
            yield streams
    else:
        raise ValueError("give the wrapped server's command or URL")


class HttpHeaders:
    """The per-message HTTP headers a streamable-HTTP server expects, which the SDK's client
    session would have set (the relay forwards raw messages, not the session's): the
    negotiated ``MCP-Protocol-Version`` after an ``initialize`` handshake; and for a
    2026-07-28 request, which carries its protocol version in ``_meta``, that version with
    ``Mcp-Method`` and ``Mcp-Name``."""

    def __init__(self) -> None:
        self.negotiated_version: str | None = None

    def initialized(self, result: Mapping[str, Any]) -> None:
        """The server answered ``initialize``: its protocol version holds from now on."""
        version = result.get("protocolVersion")
        if isinstance(version, str):
            self.negotiated_version = version

    def metadata(self, message: JSONRPCMessage) -> ClientMessageMetadata | None:
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
        if self.negotiated_version is not None and message.method != "initialize":
            return ClientMessageMetadata(
                headers={MCP_PROTOCOL_VERSION_HEADER: self.negotiated_version}
            )
        return None
