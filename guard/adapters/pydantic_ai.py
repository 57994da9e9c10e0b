"""The guard in pydantic-ai (``pip install "plangate-guard[pydantic-ai]"``).

    from pydantic_ai import Agent, DeferredToolRequests
    from guard import AsyncGuard
    from guard.adapters.pydantic_ai import plangate_toolset

    async with AsyncGuard(url, api_key) as guard:
        agent = Agent(model, toolsets=[plangate_toolset(guard, [list_issues, get_issue])],
                      output_type=[str, DeferredToolRequests])
        result = await agent.run("Summarise the open issues of acme/app")

`PlangateToolset(wrapped, guard)` is a ``WrapperToolset`` around any toolset (a
``FunctionToolset``, an ``MCPToolset``, a combined one): it adds the ``declare_plan`` tool
and decides every call of the wrapped toolset before it runs. `plangate_toolset(guard,
tools)` builds one around a ``FunctionToolset`` of plain functions or ``Tool`` objects.
It takes a `Guard` or an `AsyncGuard`; a `Guard`'s network calls and waits run in a
worker thread, so the run's event loop never stops for the control plane (``run``,
``iter`` and ``run_sync`` alike).

**A call of the wrapped toolset.** Allowed: the tool runs, and its step is completed once
it returned, or recorded as failed when it raised (``ModelRetry`` and ``ToolFailed``
included); the exception goes on to pydantic-ai as it would without the guard. Not
allowed: the tool does not run, and the model gets pydantic-ai's failed tool result
(``ToolFailed``) with the text ``"{code}: {reason}"`` (`guard.agent.outcomes.blocked_text`).
The run goes on, and the tool's retry budget is not used: a model that insists meets
``UsageLimits``, not an error. A tool that defers (``CallDeferred``) or asks for the
application's own approval (``ApprovalRequired``) from inside the wrapped toolset is
neither completed nor failed; put an ``ApprovalRequiredToolset`` *around* the
`PlangateToolset` instead, so a call is decided once it is approved.

**A ``declare_plan`` call.** The plan declared: the model gets the answer (``ok``,
``planId``, the steps). Refused (policy, invalid plan, denied approval): a failed tool
result with ``"{code}: {detail}"`` and the answer as JSON after it
(`guard.agent.outcomes.declare_plan_outcome`).

**Same-turn declare and call.** ``declare_plan`` is a ``sequential=True`` tool: the calls
the model sent after it in the same response start once it has finished, under the new
plan. Whatever the order, and with ``sequential=False`` too, a call whose response also
holds a ``declare_plan`` call waits for that declaration (up to `turn_wait_seconds`)
before it is decided; the declaration marks itself in flight on the guard
(`Guard.declaring`) for calls from elsewhere. With ``sequential=True``, a call the model
put *before* ``declare_plan`` runs first (pydantic-ai's barrier) and is decided without
it.

**A plan a person must approve.** When a policy's ``review`` rule sends the plan to a
person, the run pauses pydantic-ai's way: the ``declare_plan`` call raises
``ApprovalRequired`` and the run ends with ``DeferredToolRequests`` as its output (the
agent's ``output_type`` must admit it), the call in ``approvals`` and its plan id and
approval URL in ``metadata`` (`plan_approvals` reads them). Once the person decided (or
`PlangateToolset.wait_for_plan_decision`), run the agent again with
``message_history=result.all_messages()`` and
``deferred_tool_results=DeferredToolResults(approvals={call_id: True})``: the
``declare_plan`` call collects the decision, and the model gets the declared plan, or the
approver's reason as a failed tool result; a run resumed before the person decided
pauses again. The run pauses at once: the declaration asks the guard for no wait of its
own. Resume in the same process, with the same toolset and
guard: the plan awaiting approval is the guard's. ``pause_for_approval=False`` keeps the
guard's wait and a plain refusal (``approval_pending`` and the URL) after it.

MCP servers: wrap the ``MCPToolset`` in a `PlangateToolset` to guard it in-process, or put
``plangate-mcp`` in front of the server and give the agent
``MCPToolset(..., tool_error_behavior="failed")``, so a blocked call is a failed tool
result rather than a retry that ends the run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ToolFailed, UserError
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import DeferredToolRequests, Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from guard.adapters.calls import AnyGuard, collect_decision, decide, declare
from guard.agent.declaring import DEFAULT_DECLARE_WAIT
from guard.agent.errors import APPROVAL_PENDING
from guard.agent.outcomes import blocked_text, declare_plan_outcome
from guard.agent.tools import (
    DECLARE_PLAN_DESCRIPTION,
    DECLARE_PLAN_TOOL,
    declare_plan_parameters,
)

__all__ = [
    "PlanApproval",
    "PlangateToolset",
    "plan_approvals",
    "plangate_toolset",
]


# How many finished declarations a toolset remembers, for the late calls of their turn.
_REMEMBERED = 256


@dataclass(frozen=True)
class PlanApproval:
    """A plan a paused run waits on: what to show the person who must approve it, and the
    ``declare_plan`` call to approve in ``DeferredToolResults``."""

    call_id: str
    plan_id: str
    approval_url: str | None
    detail: str
    review: tuple[dict[str, Any], ...]


def plan_approvals(requests: DeferredToolRequests) -> list[PlanApproval]:
    """The plans a paused run (its ``DeferredToolRequests`` output) waits on, one for each
    ``declare_plan`` call in ``approvals``; the application's own approvals are left out."""
    found = []
    for call in requests.approvals:
        metadata = requests.metadata.get(call.tool_call_id) or {}
        if call.tool_name != DECLARE_PLAN_TOOL or "planId" not in metadata:
            continue
        found.append(
            PlanApproval(
                call_id=call.tool_call_id,
                plan_id=str(metadata["planId"]),
                approval_url=metadata.get("approvalUrl"),
                detail=str(metadata.get("detail", "")),
                review=tuple(metadata.get("review") or ()),
            )
        )
    return found


# --- the guard's calls, off the event loop -------------------------------------------------


# --- the toolset ----------------------------------------------------------------------------


async def _never_called(**_: Any) -> None:  # pragma: no cover - PlangateToolset answers it
    raise AssertionError("declare_plan is answered by PlangateToolset.call_tool")


@dataclass
class _Declarations:
    """The ``declare_plan`` calls a toolset has seen, shared by its per-run copies."""

    finished: OrderedDict[str, None] = field(default_factory=OrderedDict)
    waiting: dict[str, asyncio.Event] = field(default_factory=dict)
    # Answers of declarations a run paused on (approval pending), by call id.
    paused: dict[str, dict[str, Any]] = field(default_factory=dict)

    def started(self, call_id: str) -> None:
        self.finished.pop(call_id, None)  # a call id sent again by a new run

    def finish(self, call_id: str) -> None:
        self.finished[call_id] = None
        while len(self.finished) > _REMEMBERED:
            self.finished.popitem(last=False)
        event = self.waiting.pop(call_id, None)
        if event is not None:
            event.set()

    def event(self, call_id: str) -> asyncio.Event | None:
        if call_id in self.finished:
            return None
        return self.waiting.setdefault(call_id, asyncio.Event())


@dataclass
class PlangateToolset(WrapperToolset[Any]):
    """`wrapped`'s tools with ``declare_plan`` added, every call decided by `guard` before
    it runs (see the module's docstring).

    `sequential`: ``declare_plan`` as a barrier (the calls after it in a response start
    once it finished). `pause_for_approval`: a plan awaiting a person pauses the run
    (deferred tools). `turn_wait_seconds`: how long a call waits for a ``declare_plan`` of
    its own response."""

    guard: AnyGuard = field(kw_only=True)
    sequential: bool = field(default=True, kw_only=True)
    pause_for_approval: bool = field(default=True, kw_only=True)
    turn_wait_seconds: float = field(default=DEFAULT_DECLARE_WAIT, kw_only=True)
    _declarations: _Declarations = field(default_factory=_Declarations, kw_only=True, repr=False)
    _declare_toolset: FunctionToolset[Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tool = Tool[Any].from_schema(
            _never_called,
            DECLARE_PLAN_TOOL,
            DECLARE_PLAN_DESCRIPTION,
            declare_plan_parameters(),
            sequential=self.sequential,
        )
        self._declare_toolset = FunctionToolset([tool])

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await self.wrapped.get_tools(ctx)
        if DECLARE_PLAN_TOOL in tools:
            raise UserError(
                f"{self.wrapped.label} has a tool named {DECLARE_PLAN_TOOL!r} already: an MCP"
                " server behind plangate-mcp is guarded there, not by a PlangateToolset"
            )
        return {**await self._declare_toolset.get_tools(ctx), **tools}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if name == DECLARE_PLAN_TOOL:  # the wrapped toolset has none (get_tools)
            return await self._declare_plan(tool_args, ctx)
        await self._wait_for_turn(ctx)
        decision = await decide(self.guard, name, tool_args)
        if not decision.allowed:
            raise ToolFailed(blocked_text(decision))
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except (ApprovalRequired, CallDeferred):
            raise  # not run here: deferred or awaiting the application's own approval
        except BaseException:  # raised, retried, failed, or cancelled: it did not return
            self.guard.failed(decision)
            raise
        self.guard.completed(decision)
        return result

    # --- declare_plan -----------------------------------------------------------------------

    async def _declare_plan(self, arguments: dict[str, Any], ctx: RunContext[Any]) -> Any:
        call_id = ctx.tool_call_id or ""
        declarations = self._declarations
        declarations.started(call_id)
        try:
            with self.guard.declaring():
                paused = declarations.paused.pop(call_id, None)
                if paused is not None and ctx.tool_call_approved:
                    answer = paused  # collected already (wait_for_plan_decision)
                    if paused.get("code") == APPROVAL_PENDING:
                        answer = await collect_decision(self.guard, paused)
                else:
                    wait = 0.0 if self.pause_for_approval else None
                    answer = await declare(self.guard, arguments, wait)
        finally:
            declarations.finish(call_id)
        if self.pause_for_approval and answer.get("code") == APPROVAL_PENDING:
            declarations.paused[call_id] = answer
            raise ApprovalRequired(
                metadata={
                    key: answer[key]
                    for key in ("code", "planId", "approvalUrl", "detail", "review")
                    if key in answer
                }
            )
        text, refused = declare_plan_outcome(answer)
        if refused:
            raise ToolFailed(text)
        return answer

    async def _wait_for_turn(self, ctx: RunContext[Any]) -> None:
        """Wait for the ``declare_plan`` calls of this call's own model response."""
        response = next(
            (message for message in reversed(ctx.messages) if isinstance(message, ModelResponse)),
            None,
        )
        if response is None:
            return
        calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
        ids = [part.tool_call_id for part in calls]
        if ctx.tool_call_id not in ids:
            return  # not a call of the last response (a resumed deferred call)
        position = ids.index(ctx.tool_call_id)
        for index, part in enumerate(calls):
            if part.tool_name != DECLARE_PLAN_TOOL:
                continue
            if self.sequential and index > position:
                continue  # a barrier after this call: it starts once this call finished
            event = self._declarations.event(part.tool_call_id)
            if event is not None:
                # On the bound: the declaration never ran (its arguments were no JSON).
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), self.turn_wait_seconds)

    async def wait_for_plan_decision(
        self, approval: PlanApproval | str, wait_seconds: float = 300.0
    ) -> bool:
        """Wait, up to `wait_seconds`, for the person to decide on the plan a paused run
        waits on (`plan_approvals`, or its call id); True once decided (approved, denied
        or expired: the resumed ``declare_plan`` call then shows the model the plan, or the
        approver's reason), False when it still waits."""
        call_id = approval.call_id if isinstance(approval, PlanApproval) else approval
        paused = self._declarations.paused.get(call_id)
        if paused is None:
            raise ValueError("no declare_plan call of this toolset awaits a person's approval")
        if paused.get("code") != APPROVAL_PENDING:
            return True
        answer = await collect_decision(self.guard, paused, wait_seconds)
        # The resumed call shows this answer (it asks the guard again only while pending).
        self._declarations.paused[call_id] = answer
        return answer.get("code") != APPROVAL_PENDING


def plangate_toolset(
    guard: AnyGuard,
    tools: AbstractToolset[Any] | Iterable[Any] = (),  # Tool objects or functions
    *,
    sequential: bool = True,
    pause_for_approval: bool = True,
    turn_wait_seconds: float = DEFAULT_DECLARE_WAIT,
) -> PlangateToolset:
    """A `PlangateToolset` for `guard` around `tools`: plain functions or ``Tool`` objects
    (in a ``FunctionToolset``; a function whose first parameter is a ``RunContext`` gets
    it), or a toolset as it is."""
    wrapped = tools if isinstance(tools, AbstractToolset) else FunctionToolset(list(tools))
    return PlangateToolset(
        wrapped,
        guard=guard,
        sequential=sequential,
        pause_for_approval=pause_for_approval,
        turn_wait_seconds=turn_wait_seconds,
    )
