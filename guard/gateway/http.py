"""``plangate-mcp serve``: the gateway on the network, MCP over streamable HTTP at ``/mcp``.

Many clients at once, each with a guard of its own (docs/decisions/0072):

- Every request carries ``Authorization: Bearer <credential>``: the client's own Plangate
  API key (``pg_...``, checked against the control plane once and remembered a while),
  which its guard then declares with, or a key the operator issued for the gateway
  (``--client-keys``), whose guards declare with the gateway's ``PLANGATE_API_KEY``. A
  request without a credential the gateway accepts is answered 401 and goes nowhere. The
  credential is never sent upstream, nor is any intent token: the upstream server gets
  the operator's ``--upstream-header`` headers and the protocol's own.
- MCP 2025-11-25 (an ``initialize`` handshake, ``Mcp-Session-Id``): a session is the SDK's
  streamable-HTTP server transport, relayed by `guard.gateway.relay.Relay` (the stdio
  gateway's relay, unchanged) to an upstream of its own (the wrapped command started for
  the session, or a connection of its own to ``--upstream-url``); the session's guard
  holds its plan. A session answers only the credential that opened it.
- MCP 2026-07-28 (stateless: no handshake, no session, each request carries its protocol
  version and capabilities in ``_meta``): each POST is one request decided here and
  relayed to one upstream shared by all such requests. A plan is a handle: the
  ``declare_plan`` result carries its id in ``_meta["plangate/plan"]``, and a client sends
  it back in each call's ``_meta`` under the same key; the guard holding that plan is kept
  per (credential, plan id), in a bounded map whose least recently used plan (or one
  idle too long) is ended. The routing headers (``MCP-Protocol-Version``, ``Mcp-Method``,
  ``Mcp-Name``, ``Mcp-Param-*``) are checked against the body before anything is decided
  (the SDK's own checks: a mismatch is a ``HEADER_MISMATCH`` error, HTTP 400), and a
  ``tools/list`` answer, which the gateway changed (declare_plan joins it), is marked
  ``cacheScope: "private"``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.to_thread
import httpx
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PARAM_HEADER_PREFIX,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    InboundLadderRejection,
    classify_inbound_request,
    encode_header_value,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    PROTOCOL_VERSION_META_KEY,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from guard.agent.guard import Guard
from guard.agent.outcomes import authorization_denial
from guard.agent.session import NO_PLAN, CallDecision
from guard.agent.tools import DECLARE_PLAN_TOOL, mcp_tool
from guard.gateway.approvals import ApprovalPrompts, Declaration, approval_url, call_denial
from guard.gateway.relay import Relay
from guard.gateway.results import (
    blocked_call_result,
    call_completed,
    call_failed,
    declare_plan_call_result,
    tools_with_declare_plan,
)
from guard.gateway.upstream import open_upstream
from guard.gateway.wire import MessageEnd, StreamEnd, Wire
from guard.tracing import decision_tracer, last_decision_span, trace_context_from, traceparent_of

__all__ = [
    "ENDPOINT",
    "PLAN_META_KEY",
    "Credentials",
    "HttpGateway",
    "HttpOptions",
    "read_client_keys",
    "serve_http",
]

ENDPOINT: Final = "/mcp"
# Where a 2026-07-28 client finds its plan's id in the declare_plan result, and sends it
# back with each call: the per-request `_meta` every request of that revision carries.
PLAN_META_KEY: Final = "plangate/plan"
PLANGATE_KEY_PREFIX: Final = "pg_"
_MAX_BODY: Final = 4 * 1024 * 1024
_KEY_CHECK_SECONDS: Final = 300.0  # how long an API key the control plane accepted is trusted
_KEY_REFUSED_SECONDS: Final = 10.0  # ...and one it refused is refused without asking
_KEYS_REMEMBERED: Final = 4096
_PAUSED_KEPT: Final = 64  # declarations awaiting a client's retry, as the prompts keep


def _warn(message: str) -> None:
    print(f"plangate-mcp: {message}", file=sys.stderr, flush=True)


def _digest(credential: str) -> str:
    return hashlib.sha256(credential.encode()).hexdigest()


def read_client_keys(text: str) -> frozenset[str]:
    """The gateway keys in a ``--client-keys`` file (or PLANGATE_GATEWAY_CLIENT_KEYS): one
    a line (or comma-separated), blank lines and ``#`` comments skipped."""
    keys: set[str] = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        keys.update(part.strip() for part in line.split(",") if part.strip())
    return frozenset(keys)


@dataclass
class HttpOptions:
    """What ``plangate-mcp serve`` was told."""

    url: str
    issuer: str | None
    api_key: str | None  # the gateway's own, for clients holding a gateway key
    client_keys: frozenset[str] = frozenset()
    command: Sequence[str] | None = None
    upstream_url: str | None = None
    upstream_headers: Mapping[str, str] = field(default_factory=dict)
    guard_options: Mapping[str, Any] = field(default_factory=dict)
    max_sessions: int = 1000
    session_idle_seconds: float = 1800.0
    max_plans: int = 10000
    plan_idle_seconds: float = 3600.0
    allowed: AllowedPeers = field(default_factory=lambda: AllowedPeers(frozenset(), frozenset()))


# The names a loopback listener answers to, any port: what the SDK's own servers allow there.
_LOOPBACK: Final = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class AllowedPeers:
    """DNS-rebinding protection: the ``Host`` values the gateway answers (none: any) and the
    ``Origin`` values it accepts from a browser (a request without ``Origin`` is no
    browser's). A pattern ending ``:*`` allows any port. MCP's transport rule: a request
    whose ``Origin`` is not allowed is refused 403; a foreign ``Host`` is refused 421, as
    the SDK's servers do."""

    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def for_listener(
        cls, host: str, *, hosts: Iterable[str] = (), origins: Iterable[str] = ()
    ) -> AllowedPeers:
        """A loopback listener answers only to its loopback names and their own origins (a
        page elsewhere cannot reach it through a name that resolves to 127.0.0.1); any
        other listener to any ``Host``, unless `hosts` names them, and to no browser origin
        beyond `origins`."""
        allowed_hosts = set(hosts)
        if host.strip("[]") in ("127.0.0.1", "localhost", "::1"):
            allowed_hosts.update(f"{name}:*" for name in _LOOPBACK)
            allowed_hosts.update(_LOOPBACK)
        allowed_origins = set(origins)
        for name in allowed_hosts:
            allowed_origins.update((f"http://{name}", f"https://{name}"))
        return cls(frozenset(allowed_hosts), frozenset(allowed_origins))

    def refusal(self, scope: Mapping[str, Any]) -> tuple[int, str] | None:
        """The status and reason to refuse the request with, or None."""
        host = _header(scope, b"host")
        if self.hosts and not _matches(host, self.hosts):
            return 421, f"the Host header {host!r} is not one this gateway answers to"
        origin = _header(scope, b"origin")
        if origin is not None and not _matches(origin, self.origins):
            return 403, f"the Origin {origin!r} is not allowed to call this gateway"
        return None


def _header(scope: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


def _matches(value: str | None, allowed: frozenset[str]) -> bool:
    if value is None:
        return False
    if value in allowed:
        return True
    base, separator, port = value.rpartition(":")
    return bool(separator) and port.isdigit() and f"{base}:*" in allowed


class Credentials:
    """Which bearer credentials are accepted, and the API key each one's guard declares with."""

    def __init__(
        self,
        control_plane: str,
        *,
        client_keys: Iterable[str] = (),
        gateway_api_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = control_plane.rstrip("/")
        self._gateway_keys = frozenset(_digest(key) for key in client_keys)
        self._gateway_api_key = gateway_api_key
        self._checked: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._clock = clock

    async def api_key_for(self, credential: str) -> str | None:
        """The API key for the guard of a client presenting `credential`; None: refused."""
        digest = _digest(credential)
        for key in self._gateway_keys:
            if hmac.compare_digest(key, digest):
                return self._gateway_api_key
        if not credential.startswith(PLANGATE_KEY_PREFIX):
            return None
        now = self._clock()
        known = self._checked.get(digest)
        if known is None or known[1] <= now:
            accepted = await anyio.to_thread.run_sync(self._accepted_by_control_plane, credential)
            known = (accepted, now + (_KEY_CHECK_SECONDS if accepted else _KEY_REFUSED_SECONDS))
            self._checked[digest] = known
            while len(self._checked) > _KEYS_REMEMBERED:
                self._checked.popitem(last=False)
        self._checked.move_to_end(digest)
        return credential if known[0] else None

    def _accepted_by_control_plane(self, api_key: str) -> bool:
        """Whether the control plane knows `api_key` and its agent is enabled: ``GET
        /v1/agent`` answers 200 with the key's agent, 401 (unknown key) or 403 (disabled)."""
        try:
            response = httpx.get(
                f"{self._url}/v1/agent",
                headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
                timeout=10.0,
            )
        except httpx.HTTPError:
            return False
        return response.status_code == 200


def _bearer(scope: Mapping[str, Any]) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text: str = value.decode("latin-1")
            scheme, _, credential = text.partition(" ")
            if scheme.lower() == "bearer" and credential.strip():
                return credential.strip()
            return None
    return None


async def _respond(
    send: Callable[[dict[str, Any]], Awaitable[None]],
    status: int,
    body: object | None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    content = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
    head = [*headers]
    if body is not None:
        head.append((b"content-type", b"application/json"))
    head.append((b"content-length", str(len(content)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": content})


def _error_body(request_id: object, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def _status_of(
    app: Callable[..., Awaitable[None]], scope: Any, receive: Any, send: Any
) -> int | None:
    status: int | None = None

    async def watch(message: Any) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status


# --- 2025-11-25: sessions -----------------------------------------------------------------


@dataclass
class _Session:
    transport: StreamableHTTPServerTransport
    owner: str  # the digest of the credential that opened it


class _ProgressStreams:
    """Which request a server's progress notification belongs to, so that the SDK's
    transport sends it on that request's response stream (not the session's GET stream):
    the client's requests name their ``progressToken`` in ``_meta``."""

    def __init__(self) -> None:
        self._requests: dict[object, RequestId] = {}

    def observe(self, message: JSONRPCMessage) -> None:
        """A message from the client."""
        if isinstance(message, JSONRPCRequest) and message.params:
            meta = message.params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if isinstance(token, str | int):
                self._requests[token] = message.id

    def metadata(self, message: JSONRPCMessage) -> ServerMessageMetadata | None:
        """A message to the client: a progress notification goes with its request."""
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/progress":
            token = (message.params or {}).get("progressToken")
            request_id = self._requests.get(token) if isinstance(token, str | int) else None
            if request_id is not None:
                return ServerMessageMetadata(related_request_id=request_id)
        elif isinstance(message, JSONRPCResponse | JSONRPCError) and self._requests:
            for token in [t for t, rid in self._requests.items() if rid == message.id]:
                del self._requests[token]
        return None


# --- 2026-07-28: plans by id ------------------------------------------------------------


class _Plans:
    """The guards of stateless clients' plans, by (credential digest, plan id): at most
    `limit`, each ended once idle for `idle_seconds` or pushed out by newer ones."""

    def __init__(self, limit: int, idle_seconds: float, close: Callable[[Guard], None]) -> None:
        self._guards: OrderedDict[tuple[str, str], tuple[Guard, float]] = OrderedDict()
        self._limit = limit
        self._idle = idle_seconds
        self._close = close
        # A declaration in flight, by credential: a call with no plan id waits for it.
        self.declaring: dict[str, Guard] = {}

    def __len__(self) -> int:
        return len(self._guards)

    def get(self, owner: str, plan_id: str) -> Guard | None:
        self._expire()
        entry = self._guards.get((owner, plan_id))
        if entry is None:
            return None
        self._guards[(owner, plan_id)] = (entry[0], time.monotonic())
        self._guards.move_to_end((owner, plan_id))
        return entry[0]

    def put(self, owner: str, plan_id: str, guard: Guard) -> None:
        self._guards[(owner, plan_id)] = (guard, time.monotonic())
        self._guards.move_to_end((owner, plan_id))
        while len(self._guards) > self._limit:
            _, (evicted, _) = self._guards.popitem(last=False)
            self._close(evicted)
        self._expire()

    def _expire(self) -> None:
        deadline = time.monotonic() - self._idle
        while self._guards:
            key, (guard, used) = next(iter(self._guards.items()))
            if used > deadline:
                return
            del self._guards[key]
            self._close(guard)

    def clear(self) -> list[Guard]:
        guards = [guard for guard, _ in self._guards.values()]
        self._guards.clear()
        return guards


class _SharedUpstream:
    """One upstream end shared by every stateless request: each request goes out under an
    id of the gateway's, its answer comes back under the client's."""

    def __init__(self, end: MessageEnd) -> None:
        self._end = end
        self._waiting: dict[int, tuple[anyio.Event, list[JSONRPCResponse | JSONRPCError]]] = {}
        self._next = 0
        self.failure: str | None = None

    async def run(self) -> None:
        try:
            async for item in self._end:
                if isinstance(item, Exception):
                    continue
                message = item.message
                if isinstance(message, JSONRPCResponse | JSONRPCError) and isinstance(
                    message.id, int
                ):
                    waiting = self._waiting.pop(message.id, None)
                    if waiting is not None:
                        waiting[1].append(message)
                        waiting[0].set()
                # Notifications, and requests of the server's, have no one to go to: a
                # 2026-07-28 server asks for input in its results, not by requests.
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        self.failure = "the wrapped MCP server closed the connection"
        unanswered, self._waiting = self._waiting, {}
        for event, _ in unanswered.values():
            event.set()

    async def request(
        self, body: Mapping[str, Any], params: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """`body` sent upstream; the answer as a JSON object, with `body`'s id. (`params`,
        the ``Mcp-Param-*`` headers, have no place on a pipe.)"""
        client_id = body.get("id")
        if self.failure is not None:
            return _error_body(client_id, CONNECTION_CLOSED, f"plangate-mcp: {self.failure}")
        self._next += 1
        own_id = self._next
        event = anyio.Event()
        slot: list[JSONRPCResponse | JSONRPCError] = []
        self._waiting[own_id] = (event, slot)
        message = JSONRPCRequest.model_validate({**body, "id": own_id})
        try:
            await self._end.send(Wire(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._waiting.pop(own_id, None)
            return _error_body(client_id, CONNECTION_CLOSED, "plangate-mcp: the upstream is gone")
        try:
            await event.wait()
        finally:
            self._waiting.pop(own_id, None)
        if not slot:
            return _error_body(client_id, CONNECTION_CLOSED, f"plangate-mcp: {self.failure}")
        answer = slot[0].model_dump(by_alias=True, exclude_unset=True, mode="json")
        answer["id"] = client_id
        return answer


class _HttpUpstream:
    """A streamable-HTTP upstream for stateless requests: each request one POST of its
    own, with the 2026-07-28 routing headers made from the body (and the client's
    ``Mcp-Param-*`` headers, which the gateway checked against it), plus the operator's
    ``--upstream-header`` headers; nothing else of the client's."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        self._url = url
        self._http = httpx.AsyncClient(
            headers={
                **headers,
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
            timeout=httpx.Timeout(30.0, read=300.0),
        )
        self.failure: str | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self, body: Mapping[str, Any], params: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        request_id = body.get("id")
        method = body.get("method")
        headers = dict(params or {})
        raw_params = body.get("params")
        arguments = raw_params if isinstance(raw_params, dict) else {}
        meta = arguments.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):
            headers[MCP_PROTOCOL_VERSION_HEADER] = version
        if isinstance(method, str):
            headers[MCP_METHOD_HEADER] = method
            name_key = NAME_BEARING_METHODS.get(method)
            name = arguments.get(name_key) if name_key is not None else None
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
        try:
            response = await self._http.post(
                self._url, content=json.dumps(body, separators=(",", ":")), headers=headers
            )
        except httpx.HTTPError as error:
            return _error_body(request_id, CONNECTION_CLOSED, f"plangate-mcp: upstream: {error}")
        content_type = response.headers.get("content-type", "")
        try:
            if content_type.startswith("text/event-stream"):
                for line in response.text.splitlines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        if isinstance(message, dict) and message.get("id") == request_id:
                            return message
            else:
                message = response.json()
                if isinstance(message, dict) and ("result" in message or "error" in message):
                    return message
        except ValueError:
            pass
        return _error_body(
            request_id,
            INTERNAL_ERROR,
            f"plangate-mcp: the upstream answered HTTP {response.status_code} without an answer",
        )


class HttpGateway:
    """The ASGI application: ``/mcp``, both protocol revisions, every client authenticated."""

    def __init__(self, options: HttpOptions, *, warn: Callable[[str], None] = _warn) -> None:
        self.options = options
        self.credentials = Credentials(
            options.url, client_keys=options.client_keys, gateway_api_key=options.api_key
        )
        self._warn = warn
        self._sessions: dict[str, _Session] = {}
        self._plans = _Plans(options.max_plans, options.plan_idle_seconds, self._close_later)
        self._tasks: TaskGroup | None = None
        self._shared: _SharedUpstream | _HttpUpstream | None = None
        self._shared_lock = anyio.Lock()
        self._schemas: dict[str, Any] = {}  # upstream tools' input schemas, by name
        self._closing: list[Guard] = []
        # 2026-07-28 declarations a client was pointed at an approval page for: the
        # prompts hold each by the requestState its retry carries, and here whose it is
        # (only its own client may collect it) and its guard.
        self._approvals = ApprovalPrompts()
        self._paused: OrderedDict[str, tuple[str, Guard]] = OrderedDict()

    # --- lifetime -----------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> Any:
        async with AsyncExitStack() as stack, anyio.create_task_group() as tasks:
            self._tasks = tasks
            self._stack = stack
            try:
                yield self
            finally:
                tasks.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    guards = self._plans.clear() + self._closing
                    for guard in guards:
                        await anyio.to_thread.run_sync(guard.close)

    def new_guard(self, api_key: str) -> Guard:
        return Guard(
            self.options.url, api_key, issuer=self.options.issuer, **self.options.guard_options
        )

    def _close_later(self, guard: Guard) -> None:
        if self._tasks is not None:
            self._tasks.start_soon(_close_guard, guard)
        else:
            self._closing.append(guard)

    # --- ASGI ---------------------------------------------------------------------------

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["path"].rstrip("/") != ENDPOINT:
            await _respond(send, 404, {"error": "not found: the MCP endpoint is /mcp"})
            return
        refusal = self.options.allowed.refusal(scope)
        if refusal is not None:
            status, reason = refusal
            await _respond(send, status, _error_body(None, INVALID_REQUEST, reason))
            return
        credential = _bearer(scope)
        api_key = await self.credentials.api_key_for(credential) if credential else None
        if credential is None or api_key is None:
            challenge = 'Bearer realm="plangate-mcp"'
            if credential is not None:
                challenge += ', error="invalid_token"'
            await _respond(
                send,
                401,
                _error_body(None, INVALID_REQUEST, "a valid bearer credential is required"),
                [(b"www-authenticate", challenge.encode())],
            )
            return
        owner = _digest(credential)
        version = next(
            (
                value.decode("latin-1")
                for name, value in scope["headers"]
                if name == MCP_PROTOCOL_VERSION_HEADER.encode()
            ),
            None,
        )
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._stateless(scope, receive, send, owner, api_key)
        else:
            await self._session(scope, receive, send, owner, api_key)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    # --- 2025-11-25 -------------------------------------------------------------------

    async def _session(self, scope: Any, receive: Any, send: Any, owner: str, api_key: str) -> None:
        session_id = next(
            (
                v.decode("latin-1")
                for k, v in scope["headers"]
                if k == MCP_SESSION_ID_HEADER.encode()
            ),
            None,
        )
        if session_id is not None:
            session = self._sessions.get(session_id)
            if session is None or not hmac.compare_digest(session.owner, owner):
                # Another credential's session answers as one that does not exist.
                await _respond(send, 404, _error_body(None, INVALID_REQUEST, "Session not found"))
                return
            await session.transport.handle_request(scope, receive, send)
            if session.transport.is_terminated:
                self._sessions.pop(session_id, None)
            return
        if len(self._sessions) >= self.options.max_sessions:
            await _respond(send, 503, _error_body(None, INTERNAL_ERROR, "too many open sessions"))
            return
        transport = StreamableHTTPServerTransport(
            mcp_session_id=uuid.uuid4().hex, idle_timeout=self.options.session_idle_seconds
        )
        assert transport.mcp_session_id is not None
        session_id = transport.mcp_session_id
        self._sessions[session_id] = _Session(transport, owner)
        assert self._tasks is not None
        established = False
        try:
            await self._tasks.start(self._run_session, session_id, transport, api_key)
            status = await _status_of(transport.handle_request, scope, receive, send)
            established = status is not None and status < 400
        finally:
            if not established:
                self._sessions.pop(session_id, None)
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    async def _run_session(
        self,
        session_id: str,
        transport: StreamableHTTPServerTransport,
        api_key: str,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        guard = self.new_guard(api_key)
        try:
            async with transport.connect() as (read, write):
                task_status.started()
                idle = transport.idle_scope or anyio.CancelScope()
                with idle:
                    async with open_upstream(
                        command=self.options.command,
                        url=self.options.upstream_url,
                        headers=self.options.upstream_headers,
                    ) as upstream:
                        progress = _ProgressStreams()
                        end = StreamEnd(
                            read, write, metadata=progress.metadata, observe=progress.observe
                        )
                        failure = await Relay(
                            guard, client=end, upstream=upstream, warn=self._warn
                        ).run()
                        if failure is not None:
                            self._warn(f"session {session_id[:8]}: {failure}")
        except Exception as error:  # one session's end is not the gateway's
            self._warn(f"session {session_id[:8]} ended: {error}")
        finally:
            self._sessions.pop(session_id, None)
            with anyio.CancelScope(shield=True):
                if not transport.is_terminated:
                    await transport.terminate()
                await anyio.to_thread.run_sync(guard.close)

    # --- 2026-07-28 -------------------------------------------------------------------

    async def _shared_upstream(self) -> _SharedUpstream | _HttpUpstream:
        if self._shared is not None and self._shared.failure is None:
            return self._shared
        async with self._shared_lock:
            if self._shared is None and self.options.upstream_url:
                upstream = _HttpUpstream(self.options.upstream_url, self.options.upstream_headers)
                self._stack.push_async_callback(upstream.aclose)
                self._shared = upstream
            if self._shared is None or self._shared.failure is not None:
                end = await self._stack.enter_async_context(
                    open_upstream(
                        command=self.options.command,
                        url=self.options.upstream_url,
                        headers=self.options.upstream_headers,
                    )
                )
                self._shared = _SharedUpstream(end)
                assert self._tasks is not None
                self._tasks.start_soon(self._shared.run)
            return self._shared

    async def _stateless(
        self, scope: Any, receive: Any, send: Any, owner: str, api_key: str
    ) -> None:
        if scope["method"] != "POST":
            await _respond(
                send,
                405,
                _error_body(None, INVALID_REQUEST, "2026-07-28 requests are POSTs"),
                [(b"allow", b"POST")],
            )
            return
        raw = await _body(receive)
        if raw is None:
            await _respond(
                send, 413, _error_body(None, INVALID_REQUEST, "the request is too large")
            )
            return
        try:
            body = json.loads(raw)
        except ValueError:
            await _respond(send, 400, _error_body(None, PARSE_ERROR, "the body is not JSON"))
            return
        if not isinstance(body, dict) or not isinstance(body.get("method"), str):
            await _respond(send, 400, _error_body(None, INVALID_REQUEST, "not a JSON-RPC request"))
            return
        if "id" not in body:
            await _respond(send, 202, None)  # a notification: nothing to act on
            return
        request_id = body["id"]
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        duplicated = find_duplicated_routing_header(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]
        )
        if duplicated is not None:
            await self._reject(
                send,
                request_id,
                InboundLadderRejection(HEADER_MISMATCH, f"{duplicated} header repeated"),
            )
            return
        route = classify_inbound_request(body, headers=headers)
        if isinstance(route, InboundLadderRejection):
            await self._reject(send, request_id, route)
            return
        answer = await self._answer(body, headers, owner, api_key)
        status = 200
        if "error" in answer:
            status = ERROR_CODE_HTTP_STATUS.get(answer["error"].get("code"), 200)
        await _respond(send, status, answer)

    async def _reject(
        self, send: Any, request_id: object, rejection: InboundLadderRejection
    ) -> None:
        await _respond(
            send,
            ERROR_CODE_HTTP_STATUS.get(rejection.code, 400),
            _error_body(request_id, rejection.code, rejection.message, rejection.data),
        )

    async def _answer(
        self, body: dict[str, Any], headers: Mapping[str, str], owner: str, api_key: str
    ) -> dict[str, Any]:
        method = body["method"]
        params: dict[str, Any] = body["params"] if isinstance(body.get("params"), dict) else {}
        meta: dict[str, Any] = params["_meta"] if isinstance(params.get("_meta"), dict) else {}
        plan_id = meta.get(PLAN_META_KEY)
        if PLAN_META_KEY in meta:
            # Ours: the upstream server has no business with it.
            meta = {key: value for key, value in meta.items() if key != PLAN_META_KEY}
            body = {**body, "params": {**params, "_meta": meta}}
        upstream = await self._shared_upstream()
        if method == "tools/list":
            answer = await upstream.request(body)
            result = answer.get("result")
            if isinstance(result, dict):
                self._remember_schemas(result)
                if params.get("cursor") is None:
                    result, _ = tools_with_declare_plan(result)
                # The list is the gateway's, not the server's: one client's to cache.
                answer["result"] = {**result, "cacheScope": "private"}
            return answer
        if method != "tools/call":
            return await upstream.request(body)
        name = params.get("name")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        schema = (
            mcp_tool()["inputSchema"]
            if name == DECLARE_PLAN_TOOL
            else await self._input_schema(upstream, name, body)
        )
        if isinstance(arguments, dict) and schema is not None:
            rejection = validate_mcp_param_headers(schema, arguments, headers)
            if rejection is not None:
                return _error_body(body["id"], rejection.code, rejection.message, rejection.data)
        if name == DECLARE_PLAN_TOOL:
            return {
                "jsonrpc": "2.0",
                "id": body["id"],
                "result": await self._declare(owner, api_key, arguments, params),
            }
        guard: Guard | None = None
        if isinstance(plan_id, str):
            guard = self._plans.get(owner, plan_id)
        elif owner in self._plans.declaring:
            # Sent beside this client's declare_plan: decided under the plan it declares.
            guard = self._plans.declaring[owner]
        if guard is not None and guard.declaration_in_flight:
            await anyio.to_thread.run_sync(guard.wait_for_declaration, abandon_on_cancel=True)
        # The decision's span continues the client's trace context (guard.tracing).
        with trace_context_from(meta):
            decision: CallDecision = (
                guard.check(name, arguments, wait=False) if guard is not None else NO_PLAN  # type: ignore[arg-type]
            )
        if not decision.allowed or guard is None:
            # The same SEP-2643 envelope as the relay's (guard.gateway.approvals).
            denial = (
                call_denial(guard, decision, name, arguments)
                if guard is not None
                else authorization_denial(decision, tool=name, arguments=arguments)
            )
            return {
                "jsonrpc": "2.0",
                "id": body["id"],
                "result": blocked_call_result(decision, modern=True, denial=denial),
            }
        # The client's Mcp-Param-* headers, checked against the body above, go with it.
        prefix = MCP_PARAM_HEADER_PREFIX.lower()
        params_headers = {name: value for name, value in headers.items() if name.startswith(prefix)}
        span = last_decision_span.get()
        if span is not None and decision_tracer() is not None:
            # The tool's own spans become children of the decision's.
            last_decision_span.set(None)
            traced = {**meta, "traceparent": traceparent_of(span)}
            traced.pop("tracestate", None)
            body = {**body, "params": {**params, "_meta": traced}}
        answer = await upstream.request(body, params_headers)
        result = answer.get("result")
        if "error" in answer or call_failed(result):
            guard.failed(decision)
        elif call_completed(result):
            guard.completed(decision)
        return answer

    async def _declare(
        self, owner: str, api_key: str, arguments: object, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A stateless ``declare_plan``: its guard is kept under the plan id it declares. A
        client that lists URL elicitation is pointed at the approval page of a plan sent
        to a person (``InputRequiredResult``) while the declaration goes on; its retry,
        carrying the ``requestState``, gets the declaration's answer (as the relay does)."""
        state = params.get("requestState")
        held = self._paused.get(state) if isinstance(state, str) else None
        if isinstance(state, str) and held is not None and held[0] == owner:
            del self._paused[state]
            declaration = self._approvals.resumed(params)
            if declaration is not None:
                await declaration.done.wait()
                return self._declared(owner, held[1], declaration.answer)
        guard = self.new_guard(api_key)
        in_flight = guard.declaring()
        in_flight.__enter__()
        self._plans.declaring[owner] = guard
        declaration = Declaration()
        prompt = self._approvals.prompt(params, modern=True)

        async def declare() -> None:
            try:
                answer = await anyio.to_thread.run_sync(
                    guard.handle_declare_plan, arguments, abandon_on_cancel=True
                )
            finally:
                in_flight.__exit__(None, None, None)
                if self._plans.declaring.get(owner) is guard:
                    del self._plans.declaring[owner]
            declaration.finish(answer)

        if prompt is None or self._tasks is None:
            await declare()
            return self._declared(owner, guard, declaration.answer)
        # The declaration outlives this request when the client is sent to the page.
        self._tasks.start_soon(declare)
        url = await approval_url(guard, declaration)
        if url is None:
            await declaration.done.wait()
            return self._declared(owner, guard, declaration.answer)
        result = self._approvals.input_required(url, declaration)
        self._paused[result["requestState"]] = (owner, guard)
        while len(self._paused) > _PAUSED_KEPT:
            self._paused.popitem(last=False)
        return result

    def _declared(self, owner: str, guard: Guard, declared: dict[str, Any]) -> dict[str, Any]:
        """The ``declare_plan`` result; a declared plan's guard kept under its id."""
        result = declare_plan_call_result(declared, modern=True)
        plan_id = declared.get("planId")
        if isinstance(plan_id, str):
            self._plans.put(owner, plan_id, guard)
            result["_meta"] = {**result.get("_meta", {}), PLAN_META_KEY: plan_id}
        else:
            self._close_later(guard)
        return result

    def _remember_schemas(self, result: Mapping[str, Any]) -> None:
        tools = result.get("tools")
        for tool in tools if isinstance(tools, list) else ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                self._schemas[tool["name"]] = tool.get("inputSchema")

    async def _input_schema(
        self, upstream: _SharedUpstream | _HttpUpstream, name: object, body: Mapping[str, Any]
    ) -> Any:
        """The upstream tool's input schema (for its ``Mcp-Param-*`` headers): from the
        tool lists seen, else listed now."""
        if not isinstance(name, str):
            return None
        if name not in self._schemas:
            params = body.get("params") or {}
            meta = params.get("_meta") if isinstance(params, dict) else None
            cursor: object = None
            for _ in range(100):
                listing: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": "tools/list"}
                listing["params"] = {"_meta": meta or {}, **({"cursor": cursor} if cursor else {})}
                answer = await upstream.request(listing)
                result = answer.get("result")
                if not isinstance(result, dict):
                    break
                self._remember_schemas(result)
                cursor = result.get("nextCursor")
                if name in self._schemas or not cursor:
                    break
        return self._schemas.get(name)


async def _close_guard(guard: Guard) -> None:
    await anyio.to_thread.run_sync(guard.close)


async def _body(receive: Any) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def serve_http(options: HttpOptions, host: str, port: int) -> None:
    """Serves until interrupted (SIGINT, SIGTERM)."""
    import uvicorn

    gateway = HttpGateway(options)
    async with gateway.running():
        config = uvicorn.Config(
            gateway, host=host, port=port, log_level="warning", lifespan="off", access_log=False
        )
        await uvicorn.Server(config).serve()
