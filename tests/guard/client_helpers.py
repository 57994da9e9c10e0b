"""Helpers for the guard client tests: a hand-moved clock, a transport a test can break or
tamper with, a token signer the test controls, polling without timing assertions, and a
real HTTP proxy in front of the live control plane that a test stops and restarts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from guard.jwk import jwk_thumbprint, public_jwk
from guard.tokens import unverified_claims


class FakeClock:
    """Seconds since the epoch, moved by hand. Starts at the real time so that tokens the
    server signs now are valid on it."""

    def __init__(self) -> None:
        self.now = time.time()
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@dataclass
class Switchboard(httpx.BaseTransport):
    """Forwards to the real transport, and lets a test observe or break the link.

    `down` makes every request fail as an unreachable host would; `fail_paths` does so for
    paths containing one of its strings; `rewrite(request, response)` may replace a
    response (a tampering proxy). Every request path is logged in `paths`.
    """

    inner: httpx.BaseTransport
    down: bool = False
    fail_paths: tuple[str, ...] = ()
    rewrite: Callable[[httpx.Request, httpx.Response], httpx.Response] | None = None
    paths: list[str] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(f"{request.method} {request.url.path}")
        if self.down or any(part in request.url.path for part in self.fail_paths):
            raise httpx.ConnectError("control plane unreachable", request=request)
        response = self.inner.handle_request(request)
        if self.rewrite is not None:
            response.read()
            response = self.rewrite(request, response)
        return response

    def count(self, fragment: str) -> int:
        return sum(fragment in path for path in self.paths)


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll until `predicate()` holds; a generous bound, never a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


class TestSigner:
    """An Ed25519 key the test controls, signing tokens the way the control plane does."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.private_key = Ed25519PrivateKey.generate()
        public = public_jwk(self.private_key.public_key())
        self.kid = jwk_thumbprint(public)
        self.jwk = {**public, "kid": self.kid, "alg": "EdDSA", "use": "sig"}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(
            claims, self.private_key, algorithm="EdDSA", headers={"kid": self.kid, **header}
        )


def json_response(status: int, body: object, headers: dict[str, str] | None = None):
    return httpx.Response(status, json=body, headers=headers or {})


def reissuing(
    signer: TestSigner,
    edit: Callable[[dict[str, Any], dict[str, Any]], None],
    *,
    publish_key: bool = True,
    sign: Callable[[dict[str, Any]], str] | None = None,
    only_refresh: bool = False,
) -> Callable[[httpx.Request, httpx.Response], httpx.Response]:
    """A tampering proxy: every token the control plane returns is re-signed by `signer`
    after `edit(claims, body)` changed what it liked; with `publish_key` the JWKS the guard
    fetches also carries the signer's key, as if the attacker controlled the key set. With
    `only_refresh`, declared tokens pass untouched and only refreshed ones are re-signed."""

    def rewrite(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        path = request.url.path
        if publish_key and path == "/v1/keys/jwks" and response.status_code == 200:
            document = response.json()
            document["keys"].append(signer.jwk)
            return json_response(200, document)
        issuing = path.endswith("/refresh") or (path == "/v1/plans" and not only_refresh)
        if request.method == "POST" and issuing and response.status_code in (200, 201):
            body = response.json()
            claims = unverified_claims(body["token"])
            edit(claims, body)
            body["token"] = sign(claims) if sign is not None else signer.sign(claims)
            return json_response(response.status_code, body)
        return response

    return rewrite


class ShiftedClock:
    """The real time plus an offset a test moves: time passes as usual (background threads
    wait real seconds), and a jump forward expires a token at once."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class ThreadRecorder(httpx.BaseTransport):
    """A real HTTP transport that notes which thread sent each request, and its path."""

    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    requests: list[tuple[int, str]] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((threading.get_ident(), f"{request.method} {request.url.path}"))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

    def from_thread(self, ident: int) -> list[str]:
        return [path for thread, path in list(self.requests) if thread == ident]


class StoppableProxy:
    """A real HTTP server on 127.0.0.1 forwarding every request to `upstream`, which a test
    stops (connections are then refused, as for a control plane that is down) and starts
    again on the same port."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        upstream = self.upstream

        class Forward(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    name: value
                    for name, value in self.headers.items()
                    if name.lower() not in ("host", "content-length", "connection")
                }
                response = httpx.request(
                    self.command, upstream + self.path, headers=headers, content=body
                )
                self.send_response(response.status_code)
                for name, value in response.headers.items():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(response.content)))
                self.end_headers()
                self.wfile.write(response.content)

            do_GET = do_POST = _forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Forward

    def start(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
