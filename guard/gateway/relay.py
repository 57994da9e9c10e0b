"""The gateway's relay: JSON-RPC messages between the MCP client and the wrapped server,
every ``tools/call`` decided by the guard on its way.

The relay works on the wire's messages (`guard.gateway.wire.Wire`: the SDK's JSON-RPC
types, with the line each came as), not through a server object: whatever the two ends say
to each other (resources, prompts, completion, logging, progress, cancellation, sampling,
elicitation, roots, list-changed notifications, methods of protocol versions to come)
passes as it was sent, byte for byte where both ends speak stdio, ids included. The gateway
answers some of the client's requests itself (see `guard.gateway`), and sends the client one
request of its own, a URL-mode ``elicitation/create`` pointing at a plan's approval page,
under string ids of its own namespace whose answers it consumes (guard.gateway.approvals).

The event loop never waits for the network on the guard's behalf: `check` and `completed`
are in-memory, and a declaration runs in a worker thread.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from mcp_types import (
    CONNECTION_CLOSED,
    PARSE_ERROR,
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from guard.agent.session import CallDecision
from guard.agent.status import GuardStatus
from guard.agent.tools import DECLARE_PLAN_TOOL
from guard.gateway.approvals import (
    ELICIT,
    INPUT_REQUIRED,
    ApprovalPrompts,
    Declaration,
    Prompt,
    approval_url,
    call_denial,
)
from guard.gateway.results import (
    blocked_call_result,
    call_completed,
    call_failed,
    declare_plan_call_result,
    tools_with_declare_plan,
)
from guard.gateway.wire import MessageEnd, Wire
from guard.tracing import decision_tracer, last_decision_span, trace_context_from, traceparent_of

__all__ = ["UPSTREAM_CLOSED", "CallGuard", "Relay"]

UPSTREAM_CLOSED: Final = (
    "the wrapped MCP server closed the connection (it exited, or closed its output)"
)
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class CallGuard(Protocol):
    """What the relay needs of the guard (`guard.agent.Guard`)."""

    def check(self, tool: str, args: Mapping[str, Any], *, wait: bool = ...) -> CallDecision: ...

    def declaring(self) -> AbstractContextManager[None]: ...

    @property
    def declaration_in_flight(self) -> bool: ...

    def wait_for_declaration(self, timeout: float | None = None) -> bool: ...

    def completed(self, decision: CallDecision) -> None: ...

    def failed(self, decision: CallDecision) -> None: ...

    def handle_declare_plan(self, arguments: object) -> dict[str, Any]: ...

    def status(self) -> GuardStatus: ...


@dataclass(slots=True)
class _Forwarded:
    """A client request on its way to the server, kept until the server answers it."""

    method: str
    decision: CallDecision | None = None  # a tools/call the guard allowed
    first_tools_page: bool = False  # a tools/list without a cursor: declare_plan joins it


def _is_modern(params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _request_meta(wire: Wire) -> dict[str, Any] | None:
    params = getattr(wire.message, "params", None) or {}
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else None


def _under_decision_span(wire: Wire, meta: dict[str, Any] | None) -> Wire:
    """The request as the wrapped server gets it: with decisions traced, its ``_meta``
    ``traceparent`` names the decision's span, so the tool's own spans are its children;
    otherwise as it came."""
    span = last_decision_span.get()
    if span is None or decision_tracer() is None:
        return wire
    last_decision_span.set(None)
    params = dict(getattr(wire.message, "params", None) or {})
    params["_meta"] = {**(meta or {}), "traceparent": traceparent_of(span)}
    params["_meta"].pop("tracestate", None)
    return Wire(wire.message.model_copy(update={"params": params}))


def _warn(message: str) -> None:
    print(f"plangate-mcp: {message}", file=sys.stderr, flush=True)


class Relay:
    """One client's connection to one wrapped server, through `guard`.

    `run` returns None when the client closes its side. When the server closes its side or
    sends what is not JSON-RPC, it answers each request the server left unanswered with a
    JSON-RPC error, so no client request waits forever, and returns what went wrong.
    """

    def __init__(
        self,
        guard: CallGuard,
        *,
        client: MessageEnd,
        upstream: MessageEnd,
        warn: Callable[[str], None] = _warn,
    ) -> None:
        self._guard = guard
        self._client = client
        self._upstream = upstream
        self._warn = warn
        self._forwarded: dict[RequestId, _Forwarded] = {}
        self._failure: str | None = None
        self._tasks: TaskGroup | None = None
        self._approvals = ApprovalPrompts()

    async def run(self) -> str | None:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            tasks.start_soon(self._from_upstream)
            await self._from_client(tasks)
            tasks.cancel_scope.cancel()
        return self._failure

    # --- client -> server ---------------------------------------------------------------

    async def _from_client(self, tasks: TaskGroup) -> None:
        """Relays the client's messages until the client closes its side (or the server's
        side fails, which cancels this)."""
        try:
            async for item in self._client:
                if isinstance(item, Exception):
                    # A line that is not JSON-RPC: no id to answer to, so JSON-RPC's null one.
                    error = ErrorData(code=PARSE_ERROR, message=f"not JSON-RPC: {item}")
                    await self._to_client(Wire(JSONRPCError(jsonrpc="2.0", id=None, error=error)))
                    continue
                if isinstance(item.message, JSONRPCRequest):
                    await self._client_request(item, item.message, tasks)
                elif not self._approvals.consumes(item.message):
                    await self._to_upstream(item)
        except _GONE:
            pass  # the client went away: the connection is over

    async def _client_request(self, wire: Wire, request: JSONRPCRequest, tasks: TaskGroup) -> None:
        params = request.params or {}
        if request.method == "initialize":
            self._approvals.initialized(params)
        if request.method != "tools/call":
            self._forwarded[request.id] = _Forwarded(
                request.method,
                first_tools_page=request.method == "tools/list" and params.get("cursor") is None,
            )
            await self._to_upstream(wire)
            return
        name = params.get("name")
        modern = _is_modern(params)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        resumed = self._approvals.resumed(params) if name == DECLARE_PLAN_TOOL else None
        if resumed is not None:
            # A 2026-07-28 retry after the approval page: the declaration's own answer.
            tasks.start_soon(self._declared, request.id, resumed, modern)
        elif name == DECLARE_PLAN_TOOL:
            # In flight from now: the calls read after it wait for it (guard.agent.declaring).
            in_flight = self._guard.declaring()
            in_flight.__enter__()
            prompt = self._approvals.prompt(params, modern=modern)
            tasks.start_soon(self._declare, request.id, arguments, modern, in_flight, prompt)
        elif self._guard.declaration_in_flight:
            # Sent in the same turn as a declaration: decided once that is answered.
            tasks.start_soon(
                self._call_after_declaration, wire, request.id, name, arguments, modern
            )
        else:
            await self._call(wire, request.id, name, arguments, modern)

    async def _call(
        self, wire: Wire, request_id: RequestId, name: object, arguments: object, modern: bool
    ) -> None:
        """Decide a ``tools/call``: forwarded when allowed, answered here when not."""
        # The guard decides types too: a name that is not text, arguments that are not an
        # object, are ``invalid_arguments``.
        meta = _request_meta(wire)
        # The decision's span continues the client's trace (MCP carries W3C trace context
        # in ``_meta``), and the call goes on under it (guard.tracing).
        with trace_context_from(meta):
            decision = self._guard.check(name, arguments, wait=False)  # type: ignore[arg-type]
        if decision.allowed:
            wire = _under_decision_span(wire, meta)
        if not decision.allowed:
            denial = call_denial(self._guard, decision, name, arguments)
            await self._answer(
                request_id, blocked_call_result(decision, modern=modern, denial=denial)
            )
            return
        self._forwarded[request_id] = _Forwarded("tools/call", decision=decision)
        await self._to_upstream(wire)

    async def _call_after_declaration(
        self, wire: Wire, request_id: RequestId, name: object, arguments: object, modern: bool
    ) -> None:
        """A call that came while a declaration was in flight: waits for it in a worker
        thread (up to the guard's ``declare_wait_seconds``), then is decided."""
        await anyio.to_thread.run_sync(self._guard.wait_for_declaration, abandon_on_cancel=True)
        await self._call(wire, request_id, name, arguments, modern)

    async def _declare(
        self,
        request_id: RequestId,
        arguments: object,
        modern: bool,
        in_flight: AbstractContextManager[None],
        prompt: Prompt | None = None,
    ) -> None:
        """Declares the model's plan in a worker thread: the control plane's answer, and a
        person's approval, may take a while, and the relay goes on meanwhile (calls get
        ``approval_pending`` while a plan waits for approval). Cancelled with the
        connection, the thread is abandoned; closing the guard then cuts its wait short.
        A client that can open a page (`prompt`) is pointed at the approval page as soon
        as the plan awaits approval (guard.gateway.approvals)."""
        declaration = Declaration()
        async with anyio.create_task_group() as declaring:
            declaring.start_soon(self._run_declaration, arguments, in_flight, declaration)
            url = await approval_url(self._guard, declaration) if prompt is not None else None
            if url is not None and prompt == INPUT_REQUIRED:
                # The client retries once its user was there (`resumed`); the declaration
                # goes on meanwhile.
                await self._answer(request_id, self._approvals.input_required(url, declaration))
                return
            if url is not None and prompt == ELICIT:
                request, elicitation_id = self._approvals.elicitation(url)
                await self._to_client(Wire(request))
                await declaration.done.wait()
                await self._to_client(Wire(self._approvals.completed(elicitation_id)))
            await self._declared(request_id, declaration, modern)

    async def _run_declaration(
        self, arguments: object, in_flight: AbstractContextManager[None], declaration: Declaration
    ) -> None:
        try:
            declared = await anyio.to_thread.run_sync(
                self._guard.handle_declare_plan, arguments, abandon_on_cancel=True
            )
        finally:
            in_flight.__exit__(None, None, None)
        declaration.finish(declared)

    async def _declared(
        self, request_id: RequestId, declaration: Declaration, modern: bool
    ) -> None:
        """Answers a ``declare_plan`` call with its declaration's answer, once it returned."""
        await declaration.done.wait()
        await self._answer(request_id, declare_plan_call_result(declaration.answer, modern=modern))

    async def _to_upstream(self, wire: Wire) -> None:
        try:
            await self._upstream.send(wire)
        except _GONE:
            # The transport closed its writing side: the server is gone. The reading side
            # ends too, and `_from_upstream` reports it.
            await self._fail(UPSTREAM_CLOSED)

    # --- server -> client ---------------------------------------------------------------

    async def _from_upstream(self) -> None:
        """Relays the server's messages; its end (or garbage) ends the gateway."""
        try:
            async for item in self._upstream:
                if isinstance(item, Exception):
                    await self._fail(
                        f"the wrapped MCP server sent a message that is not JSON-RPC: {item}"
                    )
                    return
                if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                    item = self._server_answer(item, item.message)
                await self._to_client(item)
        except _GONE:
            pass
        await self._fail(UPSTREAM_CLOSED)

    def _server_answer(self, wire: Wire, answer: JSONRPCResponse | JSONRPCError) -> Wire:
        """The server's answer to a relayed request, as the client receives it."""
        forwarded = self._forwarded.pop(answer.id, None) if answer.id is not None else None
        if forwarded is None:
            return wire
        if isinstance(answer, JSONRPCError):
            # The call did not return: its step stays in progress, and the call does not
            # count as the step having run.
            if forwarded.decision is not None:
                self._guard.failed(forwarded.decision)
            return wire
        if forwarded.decision is not None:
            if call_completed(answer.result):
                self._guard.completed(forwarded.decision)
            elif call_failed(answer.result):
                # A tool error (``isError``): the tool ran and failed, which is not the
                # step having run (a required step is still to do).
                self._guard.failed(forwarded.decision)
        elif forwarded.first_tools_page:
            result, hidden = tools_with_declare_plan(answer.result)
            if hidden:
                self._warn(
                    f"the wrapped server lists a tool named {DECLARE_PLAN_TOOL!r}: it is"
                    " hidden behind the guard's own"
                )
            return Wire(JSONRPCResponse(jsonrpc="2.0", id=answer.id, result=result))
        return wire

    async def _answer(self, request_id: RequestId, result: dict[str, Any]) -> None:
        await self._to_client(Wire(JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)))

    async def _to_client(self, wire: Wire) -> None:
        # The client may have gone away: then `_from_client` ends the connection.
        with suppress(*_GONE):
            await self._client.send(wire)

    # --- the end --------------------------------------------------------------------------

    async def _fail(self, reason: str) -> None:
        """The server's side is gone: answer what it left unanswered, then end everything."""
        if self._failure is not None:
            return
        self._failure = reason
        unanswered, self._forwarded = self._forwarded, {}
        for forwarded in unanswered.values():
            if forwarded.decision is not None:
                self._guard.failed(forwarded.decision)  # never answered: it did not return
        with anyio.CancelScope(shield=True), anyio.move_on_after(2):
            for request_id in unanswered:
                error = ErrorData(code=CONNECTION_CLOSED, message=f"plangate-mcp: {reason}")
                await self._to_client(Wire(JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))
        # Ends `run`: cancels the client side's loop, whatever it waits on.
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()
