"""The guard in the OpenAI Agents SDK (``pip install "plangate-guard[openai-agents]"``).

    from agents import Agent, Runner, function_tool
    from guard import AsyncGuard
    from guard.adapters.openai_agents import plan_approval, plangate_tools

    async with AsyncGuard(url, api_key) as guard:
        agent = Agent(name="triage", tools=plangate_tools(guard, [list_issues, get_issue]))
        result = await Runner.run(agent, "Summarise the open issues of acme/app")

`plangate_tools(guard, tools)` gives the agent's tools back as the SDK's own
``FunctionTool`` objects: ``declare_plan`` first (`declare_plan_tool`), then each tool
guarded (`guard_tool`). It takes a `Guard` or an `AsyncGuard`; a `Guard`'s network calls
and waits run in a worker thread, so the run's event loop never stops for the control
plane (``Runner.run``, ``Runner.run_streamed`` and ``Runner.run_sync`` alike).

**A guarded tool** is a copy of the tool whose ``on_invoke_tool`` decides the call before
the tool runs. Allowed: the tool runs, and its step is completed once it returned, or
recorded as failed when it raised; what the model sees then is what the SDK would have
shown it without the guard (the tool's ``failure_error_function``, by default "An error
occurred while running the tool..."; a hand-built ``FunctionTool`` that raises still ends
the run, as it would). Not allowed: the tool does not run, and the model gets the call's
output text ``"{code}: {reason}"`` (`guard.agent.outcomes.blocked_text`); the run goes on.

Why ``on_invoke_tool`` rather than the SDK's tool guardrails: wrapping works on every
``FunctionTool``, whoever built it (``@function_tool``, a hand-built one, a library's,
``Agent.as_tool``), and leaves the application's own guardrails and approvals as they
were. A tool output guardrail sees a raised tool's formatted error as an ordinary output,
so it cannot tell a failed call from a completed one; the wrapper sees the exception,
because the copy it runs has the SDK's failure handling turned off and applies the
original tool's own afterwards (``agents.tool.maybe_invoke_function_tool_failure_error_
function``, a module function of the SDK, hence the extra's ``<0.25`` range). MCP servers
an agent lists in ``mcp_servers`` are not its ``tools``: put ``plangate-mcp`` in front of
them instead.

**Same-turn declare and call.** The SDK runs one response's function calls concurrently.
The ``declare_plan`` tool declares from its ``needs_approval`` callable, which the SDK
evaluates first thing in the call's task, before any call of the turn reaches its tool:
it marks the declaration in flight (`Guard.declaring`) there, and a guarded call waits for
it (up to ``declare_wait_seconds``) before it is decided, under the new plan. (With
``RunConfig.tool_execution.max_function_tool_concurrency`` set below the turn's calls, a
call started before the declaration's slot opens is decided without it.)

**A plan a person must approve.** When a policy's ``review`` rule sends the plan to a
person, the run pauses the SDK's way: ``RunResult.interruptions`` holds the
``declare_plan`` call as a ``ToolApprovalItem``, and `plan_approval(item)` gives its
plan id and approval URL (``approvalUrl``) to show the person; `wait_for_plan_decision`
waits for their decision. Then ``state.approve(item)`` and ``Runner.run(agent, state)``
resume the run: the ``declare_plan`` call collects the decision, and the model gets the
declared plan (or the approver's reason, as a refusal). The run pauses at once: the
declaration asks the guard for no wait of its own. Resume in the same process,
with the same guard: the interruption is the SDK's, the plan awaiting approval is the
guard's. A call the model sent in the same turn as such a declaration gets
``approval_pending``. ``pause_for_approval=False`` keeps the plain tool result instead
(``approval_pending`` and the URL, as a refusal, after the guard's wait).

A refused declaration reaches the model as ``"{code}: {detail}"`` and the answer as JSON
(`guard.agent.outcomes.declare_plan_outcome`); the Responses API's tool output has no
error flag, so that text is the error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool, RunContextWrapper, Tool, ToolApprovalItem
from agents.tool import (
    maybe_invoke_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext

from guard.adapters.calls import AnyGuard, collect_decision, decide, declare
from guard.agent.errors import APPROVAL_PENDING
from guard.agent.outcomes import blocked_text, declare_plan_outcome
from guard.agent.tools import (
    DECLARE_PLAN_DESCRIPTION,
    DECLARE_PLAN_TOOL,
    declare_plan_parameters,
)

__all__ = [
    "DeclarePlanTool",
    "PlanApproval",
    "declare_plan_tool",
    "guard_tool",
    "plan_approval",
    "plangate_tools",
    "wait_for_plan_decision",
]


# The text of a call whose arguments are no JSON object: nothing to decide on, so it
# does not run (the model sees why and can send them again).
_NOT_AN_OBJECT = "invalid_arguments: the tool's arguments must be a JSON object"


@dataclass(frozen=True)
class PlanApproval:
    """The plan a paused run waits on: what to show the person who must approve it."""

    plan_id: str
    approval_url: str | None
    detail: str
    review: tuple[dict[str, Any], ...]


# --- the guard's calls, off the event loop -------------------------------------------------


# --- declare_plan -------------------------------------------------------------------------


class DeclarePlanTool(FunctionTool):
    """The ``declare_plan`` tool (`declare_plan_tool`): a ``FunctionTool`` that also keeps
    the answers of declarations the run paused on, for `plan_approval`."""

    _plangate_answers: dict[str, dict[str, Any]]
    _plangate_paused: set[str]
    _plangate_guard: AnyGuard


def declare_plan_tool(guard: AnyGuard, *, pause_for_approval: bool = True) -> DeclarePlanTool:
    """The ``declare_plan`` tool for `guard`, in the SDK's types (the plan schema as its
    parameters, ``strict_json_schema=False``: the schema is not in OpenAI's strict subset).

    The declaration runs in the tool's ``needs_approval`` check, marked in flight before
    any call of the same turn is decided; with `pause_for_approval`, a plan that awaits a
    person's approval pauses the run (see the module's docstring)."""
    answers: dict[str, dict[str, Any]] = {}
    paused: set[str] = set()

    async def needs_approval(
        context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
    ) -> bool:
        # Entered in the task's first step, before the turn's other calls reach their tools.
        # Pausing: no wait for the person here, the run pauses instead.
        wait = 0.0 if pause_for_approval else None
        with guard.declaring():
            answer = await declare(guard, arguments, wait)
        answers[call_id] = answer
        paused.discard(call_id)  # a call id an abandoned run paused on, sent again
        if pause_for_approval and answer.get("code") == APPROVAL_PENDING:
            paused.add(call_id)
            return True
        return False

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        call_id = context.tool_call_id
        answer = answers.get(call_id)
        if answer is None:  # the check did not run (the application approved it beforehand)
            with guard.declaring():
                answer = await declare(guard, arguments)
        elif call_id in paused:  # resumed: the person has decided, or not yet
            paused.discard(call_id)
            with guard.declaring():
                answer = await collect_decision(guard, answer)
        answers.pop(call_id, None)
        text, _refused = declare_plan_outcome(answer)
        return text

    tool = DeclarePlanTool(
        name=DECLARE_PLAN_TOOL,
        description=DECLARE_PLAN_DESCRIPTION,
        params_json_schema=declare_plan_parameters(),
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=needs_approval,
    )
    tool._plangate_answers = answers
    tool._plangate_paused = paused
    tool._plangate_guard = guard
    return tool


def _declare_plan_tool_of(item: ToolApprovalItem) -> tuple[DeclarePlanTool, str] | None:
    """The ``declare_plan`` tool an interruption belongs to, and its call id."""
    raw = item.raw_item
    call_id = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    if item.tool_name != DECLARE_PLAN_TOOL or not isinstance(call_id, str):
        return None
    for tool in getattr(item.agent, "tools", ()):
        if isinstance(tool, DeclarePlanTool) and call_id in tool._plangate_answers:
            return tool, call_id
    return None


def plan_approval(item: ToolApprovalItem) -> PlanApproval | None:
    """For an interruption of a paused run (``RunResult.interruptions``): the plan that
    awaits a person's approval, with its approval URL; None when the item is not a
    ``declare_plan`` call of `plangate_tools` waiting for one (another tool's approval,
    the application's own)."""
    found = _declare_plan_tool_of(item)
    if found is None:
        return None
    tool, call_id = found
    answer = tool._plangate_answers[call_id]
    if answer.get("code") != APPROVAL_PENDING:
        return None
    return PlanApproval(
        plan_id=str(answer.get("planId")),
        approval_url=answer.get("approvalUrl"),
        detail=str(answer.get("detail", "")),
        review=tuple(answer.get("review") or ()),
    )


async def wait_for_plan_decision(item: ToolApprovalItem, wait_seconds: float = 300.0) -> bool:
    """Wait, up to `wait_seconds`, for the person to decide on the plan an interruption
    waits on (`plan_approval`); True once decided (approved, denied or expired: the resumed
    ``declare_plan`` call then shows the model the plan, or the approver's reason), False
    when it still waits. Then ``state.approve(item)`` and resume the run. Without it, the
    resumed call asks the control plane once itself."""
    found = _declare_plan_tool_of(item)
    if found is None:
        raise ValueError("the item is not a declare_plan call awaiting a person's approval")
    tool, call_id = found
    answer = tool._plangate_answers[call_id]
    if call_id in tool._plangate_paused:
        answer = await collect_decision(tool._plangate_guard, answer, wait_seconds)
        if answer.get("code") != APPROVAL_PENDING:
            tool._plangate_paused.discard(call_id)  # the resumed call shows this answer
        tool._plangate_answers[call_id] = answer
    return answer.get("code") != APPROVAL_PENDING


# --- the application's tools -------------------------------------------------------------


def _arguments(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def guard_tool(guard: AnyGuard, tool: Tool) -> FunctionTool:
    """A copy of `tool` whose every call `guard` decides before it runs (see the module's
    docstring); `tool` itself is left as it was."""
    if not isinstance(tool, FunctionTool):
        raise TypeError(
            f"guard_tool guards a FunctionTool, not {type(tool).__name__}: hosted tools run"
            " at the model provider, MCP servers behind plangate-mcp"
        )
    name = tool.name
    # The copy the wrapper runs raises instead of formatting a failure, so that a failed
    # call is told apart; the SDK's own handling of the original is applied afterwards.
    catches = callable(getattr(tool.on_invoke_tool, "__agents_bind_function_tool__", None))
    inner = copy.copy(tool)
    if catches:
        set_function_tool_failure_error_function(inner, None)

    async def invoke(context: ToolContext[Any], arguments: str) -> Any:
        args = _arguments(arguments)
        if args is None:
            return _NOT_AN_OBJECT
        decision = await decide(guard, name, args)
        if not decision.allowed:
            return blocked_text(decision)
        try:
            result = await inner.on_invoke_tool(context, arguments)
        except Exception as error:
            guard.failed(decision)
            message = (
                await maybe_invoke_function_tool_failure_error_function(
                    function_tool=tool, context=context, error=error
                )
                if catches
                else None
            )
            if message is None:
                raise
            return message
        except BaseException:  # cancelled (a timeout, the run ending): it did not return
            guard.failed(decision)
            raise
        guard.completed(decision)
        return result

    guarded = copy.copy(tool)
    guarded.on_invoke_tool = invoke
    return guarded


def plangate_tools(
    guard: AnyGuard, tools: Iterable[Tool] = (), *, pause_for_approval: bool = True
) -> list[Tool]:
    """An agent's tools for `guard`: ``declare_plan`` first, then each ``FunctionTool``
    guarded (`guard_tool`). Any other tool (hosted, computer, shell) raises TypeError: the
    guard cannot see its calls."""
    return [
        declare_plan_tool(guard, pause_for_approval=pause_for_approval),
        *(guard_tool(guard, tool) for tool in tools if not isinstance(tool, DeclarePlanTool)),
    ]
