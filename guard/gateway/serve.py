"""One gateway session: the client on this process's stdio, the wrapped server, the relay."""

from __future__ import annotations

from collections.abc import Sequence

from guard.gateway.client_stdio import client_stdio
from guard.gateway.relay import CallGuard, Relay
from guard.gateway.upstream import open_upstream

__all__ = ["serve"]


async def serve(
    guard: CallGuard, command: Sequence[str] | None, upstream_url: str | None
) -> str | None:
    """Relays until the client closes the connection (None) or the wrapped server fails
    (what went wrong). The wrapped server is stopped (its stdin closed, then terminated)
    before this returns."""
    async with (
        client_stdio() as client,
        open_upstream(command=command, url=upstream_url) as upstream,
    ):
        return await Relay(guard, client=client, upstream=upstream).run()
