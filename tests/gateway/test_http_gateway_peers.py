"""DNS-rebinding protection on the gateway's HTTP side: a page in a browser must not reach
a gateway on the agent's machine through a name that resolves to 127.0.0.1, nor call one
from an origin the operator did not allow (MCP's streamable HTTP transport: a foreign
``Origin`` is refused 403; a foreign ``Host`` 421, as the SDK's own servers answer)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from guard.gateway.http import AllowedPeers

from .conftest import UPSTREAM_COMMAND, http_gateway


def scope(**headers: str) -> dict[str, Any]:
    return {"headers": [(name.encode(), value.encode()) for name, value in headers.items()]}


@pytest.mark.parametrize("listen", ["127.0.0.1", "localhost", "[::1]", "::1"])
def test_a_loopback_listener_answers_only_its_loopback_names(listen):
    allowed = AllowedPeers.for_listener(listen)

    for host in ("127.0.0.1:8765", "localhost:9000", "[::1]:8765", "localhost"):
        assert allowed.refusal(scope(host=host)) is None, host
    for host in ("evil.example.com", "evil.example.com:8765", "127.0.0.1.evil.test:80"):
        assert allowed.refusal(scope(host=host))[0] == 421, host
    assert allowed.refusal(scope())[0] == 421  # HTTP/1.1 without Host


def test_a_browser_origin_is_refused_unless_allowed():
    allowed = AllowedPeers.for_listener("127.0.0.1", origins=["https://console.acme.dev"])

    ok = {"host": "127.0.0.1:8765"}
    assert allowed.refusal(scope(**ok)) is None  # no Origin: no browser
    assert allowed.refusal(scope(**ok, origin="http://localhost:8765")) is None
    assert allowed.refusal(scope(**ok, origin="https://console.acme.dev")) is None
    for origin in ("http://evil.example.com", "null", "https://console.acme.dev.evil.test"):
        assert allowed.refusal(scope(**ok, origin=origin))[0] == 403, origin


def test_a_listener_on_another_address_takes_any_host_but_no_browser_by_default():
    allowed = AllowedPeers.for_listener("10.0.0.7")

    assert allowed.refusal(scope(host="gateway.acme.internal:8765")) is None
    assert allowed.refusal(scope(host="x", origin="http://x"))[0] == 403


def test_named_hosts_are_the_only_ones_answered_with_their_origins():
    allowed = AllowedPeers.for_listener("10.0.0.7", hosts=["mcp.acme.dev", "mcp.acme.dev:*"])

    assert allowed.refusal(scope(host="mcp.acme.dev:443", origin="https://mcp.acme.dev")) is None
    assert allowed.refusal(scope(host="other.acme.dev"))[0] == 421


@pytest.mark.slow  # starts the gateway and the test server as processes
def test_the_running_gateway_refuses_a_rebound_host_and_a_foreign_origin(control_plane):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    base = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {control_plane.agent.api_key}",
    }
    with http_gateway(control_plane, *UPSTREAM_COMMAND) as url:
        rebound = httpx.post(url, json=initialize, headers={**base, "Host": "evil.example.com"})
        foreign = httpx.post(url, json=initialize, headers={**base, "Origin": "http://evil.test"})
        own = httpx.post(url, json=initialize, headers=base, timeout=30)

    assert rebound.status_code == 421
    assert foreign.status_code == 403
    assert foreign.json()["error"]["message"].startswith("the Origin 'http://evil.test'")
    assert own.status_code == 200
