"""The guard in LangGraph and LangChain (``pip install "plangate-guard[langgraph]"``).

    from langgraph.prebuilt import create_react_agent
    from guard import Guard
    from guard.adapters.langgraph import plangate_tool_node

    with Guard(url, api_key) as guard:
        app = create_react_agent(model, tools=plangate_tool_node(guard, [list_issues, get_issue]))
        state = app.invoke({"messages": [("user", "Summarise the open issues of acme/app")]})

`plangate_tool_node(guard, tools)` is LangGraph's own ``ToolNode`` with the ``declare_plan``
tool (`declare_plan_tool`) added and the guard in its ``wrap_tool_call`` /
``awrap_tool_call`` hooks (`PlangateToolWrapper`): a `Guard` with ``invoke``, an
`AsyncGuard` (or a `Guard`, whose waits then run in a worker thread) with ``ainvoke``.

**A call.** Allowed: the tool runs; its step is completed once it returned, recorded as
failed when it raised or answered an error ``ToolMessage``: with ``ToolNode``'s default a
raised exception ends the run, as without the guard; build the node with
``handle_tool_errors=True`` and the model gets it as a tool error. Not allowed:
the tool does not run, and the model gets ``ToolMessage(status="error")`` with
``"{code}: {reason}"`` (`guard.agent.outcomes.blocked_text`); the run goes on.

**A ``declare_plan`` call.** The model gets the answer (``ok``, ``planId``, the steps);
a refused plan is an error ``ToolMessage`` with ``"{code}: {detail}"`` and the answer as
JSON (`guard.agent.outcomes.declare_plan_outcome`).

**Same-turn declare and call.** ``ToolNode`` runs a turn's calls concurrently. Every call
looks at its own ``AIMessage`` in the node's state: when the turn holds a ``declare_plan``
call, the call waits for that declaration (up to `turn_wait_seconds`) and is decided
under the new plan, whatever the order of the calls; the declaration also marks itself in
flight on the guard (`Guard.declaring`) for calls from elsewhere.

**A plan a person must approve.** The ``declare_plan`` call pauses the graph with
LangGraph's ``interrupt(...)``, whose value carries ``planId``, ``approvalUrl``,
``detail`` and ``review`` (`plan_approval` reads it; the graph needs a checkpointer). Resume it with
``Command(resume=...)`` (any value) once the person decided: the call collects the
decision and the model gets the approved plan, or the approver's reason as an error;
resumed before the decision, the graph pauses again. Calls of the same turn are decided
again on the resume (the node runs again), under the approved plan. Resume in the same
process, with the same guard. ``pause_for_approval=False`` keeps the guard's own wait.

With LangChain's ``create_agent`` (the ``langchain`` package), `plangate_middleware(guard)`
is the same wrapper as agent middleware, ``declare_plan`` included:
``create_agent(model, tools, middleware=[plangate_middleware(guard)])``.

MCP tools from ``langchain-mcp-adapters`` are ordinary LangChain tools: load them from one
explicit session (``load_mcp_tools(session)``) and pass them to `plangate_tool_node`.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Interrupt, interrupt

from guard.adapters.calls import AnyGuard, decide, decision_answer
from guard.agent.async_guard import AsyncGuard
from guard.agent.declaring import DEFAULT_DECLARE_WAIT
from guard.agent.errors import APPROVAL_PENDING
from guard.agent.guard import Guard
from guard.agent.outcomes import blocked_text, declare_plan_outcome
from guard.agent.session import CallDecision
from guard.agent.tools import (
    DECLARE_PLAN_DESCRIPTION,
    DECLARE_PLAN_TOOL,
    declare_plan_parameters,
)

__all__ = [
    "APPROVAL_INTERRUPT",
    "PlangateToolWrapper",
    "declare_plan_tool",
    "plan_approval",
    "plangate_middleware",
    "plangate_tool_node",
]

ToolResult = ToolMessage | Command[Any]

# How many declarations a wrapper remembers, for the calls of their turn.
_REMEMBERED = 256

# The ``type`` of the value of the interrupt that pauses a graph for a plan's approval.
APPROVAL_INTERRUPT = "plangate_plan_approval"


def declare_plan_tool(guard: AnyGuard) -> StructuredTool:
    """The ``declare_plan`` tool for the model (a ``StructuredTool``: sync for a `Guard`,
    a coroutine for an `AsyncGuard`). On its own it declares and raises ``ToolException``
    for a refused plan (an error ``ToolMessage`` in a ``ToolNode``); in `plangate_tool_node`
    the wrapper answers it, with the same-turn wait and the approval pause."""

    def answer(declared: dict[str, Any]) -> str:
        text, refused = declare_plan_outcome(declared)
        if refused:
            raise ToolException(text)
        return text

    if isinstance(guard, AsyncGuard):
        async_guard = guard

        async def adeclare_plan(**plan: Any) -> str:
            return answer(await async_guard.handle_declare_plan(plan))

        return StructuredTool.from_function(
            coroutine=adeclare_plan,
            name=DECLARE_PLAN_TOOL,
            description=DECLARE_PLAN_DESCRIPTION,
            args_schema=declare_plan_parameters(),
            handle_tool_error=True,
        )
    sync_guard = guard

    def declare_plan(**plan: Any) -> str:
        return answer(sync_guard.handle_declare_plan(plan))

    return StructuredTool.from_function(
        func=declare_plan,
        name=DECLARE_PLAN_TOOL,
        description=DECLARE_PLAN_DESCRIPTION,
        args_schema=declare_plan_parameters(),
        handle_tool_error=True,
    )


def _message(call: ToolCall, text: str, *, error: bool) -> ToolMessage:
    return ToolMessage(
        content=text,
        tool_call_id=call["id"],
        name=call["name"],
        status="error" if error else "success",
    )


def _turn_declarations(state: Any, call_id: str) -> list[str]:
    """The ids of the ``declare_plan`` calls in the ``AIMessage`` that holds `call_id`."""
    messages = state.get("messages", ()) if isinstance(state, dict) else state
    if not isinstance(messages, list):
        messages = getattr(state, "messages", ())
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == call_id for c in message.tool_calls):
            return [
                c["id"] for c in message.tool_calls if c["name"] == DECLARE_PLAN_TOOL and c["id"]
            ]
    return []


def _approval(pending: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "type": APPROVAL_INTERRUPT,
        "toolCallId": call_id,
        "planId": pending.get("planId"),
        "approvalUrl": pending.get("approvalUrl"),
        "detail": pending.get("detail", ""),
        "review": pending.get("review", []),
    }


def plan_approval(pause: Interrupt) -> dict[str, Any] | None:
    """The plan a paused graph waits on, from one of its interrupts (``state["__interrupt__"]``
    of ``invoke``): ``{"type", "toolCallId", "planId", "approvalUrl", "detail", "review"}``,
    or None for an interrupt of the application's own."""
    value = pause.value
    if isinstance(value, dict) and value.get("type") == APPROVAL_INTERRUPT:
        return value
    return None


class PlangateToolWrapper:
    """The guard as ``ToolNode``'s ``wrap_tool_call`` (`wrap`) and ``awrap_tool_call``
    (`awrap`). `plangate_tool_node` builds a node with one; build your own ``ToolNode``
    with ``wrap_tool_call=wrapper.wrap, awrap_tool_call=wrapper.awrap`` and
    `declare_plan_tool` among its tools to keep other settings."""

    def __init__(
        self,
        guard: AnyGuard,
        *,
        pause_for_approval: bool = True,
        turn_wait_seconds: float = DEFAULT_DECLARE_WAIT,
    ) -> None:
        self.guard = guard
        self.pause_for_approval = pause_for_approval
        self.turn_wait_seconds = turn_wait_seconds
        self._lock = threading.Lock()
        self._turns: OrderedDict[str, threading.Event] = OrderedDict()
        self._pending: dict[str, dict[str, Any]] = {}

    @property
    def _sync_guard(self) -> Guard:
        if isinstance(self.guard, AsyncGuard):
            return self.guard.guard
        return self.guard

    # --- the turn's declarations --------------------------------------------------------

    def _event(self, call_id: str) -> threading.Event:
        with self._lock:
            event = self._turns.get(call_id)
            if event is None:
                event = self._turns[call_id] = threading.Event()
                while len(self._turns) > _REMEMBERED:
                    self._turns.popitem(last=False)
            return event

    def _finished(self, call_id: str, *, again: bool) -> None:
        """The declaration of `call_id` finished (`again`: it paused, and runs again when
        the graph resumes: its calls then wait for it anew)."""
        with self._lock:
            event = self._turns.pop(call_id, None) if again else self._turns.get(call_id)
        if event is not None:
            event.set()

    def _turn_events(self, request: ToolCallRequest) -> list[threading.Event]:
        call_id = request.tool_call["id"]
        if not call_id:
            return []
        ids = _turn_declarations(request.state, call_id)
        return [self._event(call_id) for call_id in ids]

    # --- declare_plan ---------------------------------------------------------------------

    def _declare(self, call: ToolCall) -> ToolMessage:
        guard = self._sync_guard
        call_id = call["id"] or ""
        paused = False
        try:
            with guard.declaring():
                pending = self._pending.get(call_id)
                if pending is None:
                    answer = guard.handle_declare_plan(
                        call["args"],
                        approval_wait_seconds=0.0 if self.pause_for_approval else None,
                    )
                    if not (self.pause_for_approval and answer.get("code") == APPROVAL_PENDING):
                        return self._answer(call, answer)
                    pending = self._pending[call_id] = answer
                else:
                    answer = decision_answer(guard, pending)
                    if answer.get("code") != APPROVAL_PENDING:
                        return self._answer(call, answer)
            paused = True
            return self._pause(call, pending)
        finally:
            self._finished(call_id, again=paused)

    def _pause(self, call: ToolCall, pending: dict[str, Any]) -> ToolMessage:
        """Pause the graph until the person decided; on each resume, ask again."""
        guard = self._sync_guard
        while True:
            interrupt(_approval(pending, call["id"] or ""))  # returns once the graph resumes
            answer = decision_answer(guard, pending)
            if answer.get("code") != APPROVAL_PENDING:
                return self._answer(call, answer)

    def _answer(self, call: ToolCall, answer: dict[str, Any]) -> ToolMessage:
        self._pending.pop(call["id"] or "", None)
        text, refused = declare_plan_outcome(answer)
        return _message(call, text, error=refused)

    # --- the hooks ------------------------------------------------------------------------

    def wrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        """``wrap_tool_call``: decide the call (after its turn's declaration), run it."""
        if isinstance(self.guard, AsyncGuard):
            raise TypeError("an AsyncGuard guards a graph run with ainvoke; use a Guard")
        call = request.tool_call
        if call["name"] == DECLARE_PLAN_TOOL:
            return self._declare(call)
        for event in self._turn_events(request):
            event.wait(self.turn_wait_seconds)
        decision = self.guard.check(call["name"], call["args"])
        if not decision.allowed:
            return _message(call, blocked_text(decision), error=True)
        try:
            result = execute(request)
        except Exception:
            self.guard.failed(decision)
            raise
        self._ran(decision, result)
        return result

    async def awrap(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        """``awrap_tool_call``: as `wrap`, without blocking the event loop."""
        call = request.tool_call
        if call["name"] == DECLARE_PLAN_TOOL:
            # interrupt() needs the run's context: copied into the worker thread.
            return await asyncio.to_thread(functools.partial(self._declare, call))
        for event in self._turn_events(request):
            if not event.is_set():
                await asyncio.to_thread(event.wait, self.turn_wait_seconds)
        decision = await decide(self.guard, call["name"], call["args"])
        if not decision.allowed:
            return _message(call, blocked_text(decision), error=True)
        try:
            result = await execute(request)
        except Exception:
            self.guard.failed(decision)
            raise
        self._ran(decision, result)
        return result

    def _ran(self, decision: CallDecision, result: ToolResult) -> None:
        if isinstance(result, ToolMessage) and result.status == "error":
            self.guard.failed(decision)
        else:
            self.guard.completed(decision)


def plangate_tool_node(
    guard: AnyGuard,
    tools: Sequence[BaseTool | Callable[..., Any]],
    *,
    pause_for_approval: bool = True,
    turn_wait_seconds: float = DEFAULT_DECLARE_WAIT,
    **node_options: Any,
) -> ToolNode:
    """A ``ToolNode`` over `tools` and ``declare_plan``, every call decided by `guard`
    (pass it as ``create_react_agent(model, tools=...)`` or add it to your own graph).
    `node_options` go to ``ToolNode``: ``handle_tool_errors=True`` makes a tool that
    raises a tool error for the model (a failed step either way)."""
    wrapper = PlangateToolWrapper(
        guard, pause_for_approval=pause_for_approval, turn_wait_seconds=turn_wait_seconds
    )
    return ToolNode(
        [declare_plan_tool(guard), *tools],
        wrap_tool_call=wrapper.wrap,
        awrap_tool_call=wrapper.awrap,
        **node_options,
    )


def plangate_middleware(
    guard: AnyGuard,
    *,
    pause_for_approval: bool = True,
    turn_wait_seconds: float = DEFAULT_DECLARE_WAIT,
) -> Any:
    """The guard as ``langchain.agents`` middleware (``create_agent(..., middleware=[...])``):
    it adds ``declare_plan`` to the agent's tools and decides every call as
    `plangate_tool_node` does. Needs the ``langchain`` package."""
    # The langchain package is optional: imported only when the middleware is asked for.
    from langchain.agents.middleware import AgentMiddleware  # type: ignore[import-not-found]

    wrapper = PlangateToolWrapper(
        guard, pause_for_approval=pause_for_approval, turn_wait_seconds=turn_wait_seconds
    )

    class PlangateMiddleware(AgentMiddleware):  # type: ignore[misc]
        tools = [declare_plan_tool(guard)]

        def wrap_tool_call(
            self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
        ) -> ToolResult:
            return wrapper.wrap(request, handler)

        async def awrap_tool_call(
            self,
            request: ToolCallRequest,
            handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
        ) -> ToolResult:
            return await wrapper.awrap(request, handler)

    return PlangateMiddleware()
