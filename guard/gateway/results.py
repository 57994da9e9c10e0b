"""The answers the gateway writes itself, as MCP JSON objects (plain Python, no ``mcp``).

A blocked call and a refused declaration are tool errors (``isError: true``) whose text
starts with the code (``no_plan: ...``), so a model, a person reading a transcript and a
client's code all find it in the same place; ``_meta["plangate/decision"]`` carries the
code, the step (``stepIndex`` from 0, ``stepNumber`` from 1) and the rule for code, and
``_meta["io.modelcontextprotocol/authorization"]`` the SEP-2643 structured denial
(`guard.agent.outcomes.authorization_denial`: its remediation, and the plan step or the
approval page that would admit the call). A
tool error rather than a JSON-RPC error: the model sees tool errors and can correct itself
(declare a plan, change an argument), while a JSON-RPC error is the client's to handle and
the model may never see it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from guard.agent.outcomes import AUTHORIZATION_META_KEY, blocked_text, declare_plan_outcome
from guard.agent.session import CallDecision
from guard.agent.tools import DECLARE_PLAN_TOOL, mcp_tool

__all__ = [
    "DECISION_META_KEY",
    "blocked_call_result",
    "call_completed",
    "call_failed",
    "declare_plan_call_result",
    "tools_with_declare_plan",
]

DECISION_META_KEY: Final = "plangate/decision"

# A 2026-07-28 result names its kind; older protocol versions have no such field, and some
# clients of them reject unknown keys, so it is written only for a request that carried the
# modern protocol version in its ``_meta``.
_COMPLETE: Final = {"resultType": "complete"}


def tools_with_declare_plan(result: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """A ``tools/list`` result with ``declare_plan`` listed first, and whether the server
    listed a tool of that name itself (it is hidden: a call of that name is the guard's)."""
    tools = result.get("tools")
    upstream_tools = tools if isinstance(tools, list) else []
    kept = [
        tool
        for tool in upstream_tools
        if not (isinstance(tool, dict) and tool.get("name") == DECLARE_PLAN_TOOL)
    ]
    return {**result, "tools": [mcp_tool(), *kept]}, len(kept) != len(upstream_tools)


def blocked_call_result(
    decision: CallDecision, *, modern: bool, denial: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The tool error for a call the guard did not allow; `denial` is its SEP-2643 envelope
    (`guard.agent.outcomes.authorization_denial`), put in ``_meta`` beside the decision."""
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": blocked_text(decision)}],
        "isError": True,
        "_meta": {
            DECISION_META_KEY: {
                "code": decision.code.value,
                # The step: `stepIndex` from 0 (in the plan's steps), `stepNumber` from 1
                # (as the text counts); `step` is `stepIndex`'s older name, kept for clients.
                "step": decision.step,
                "stepIndex": decision.step,
                "stepNumber": decision.step_number,
                "rule": decision.rule,
            }
        },
    }
    if denial is not None:
        result["_meta"][AUTHORIZATION_META_KEY] = dict(denial)
    return {**result, **_COMPLETE} if modern else result


def declare_plan_call_result(declared: Mapping[str, Any], *, modern: bool) -> dict[str, Any]:
    """The ``declare_plan`` tool's result from `Guard.handle_declare_plan`'s: the same object
    as structured content and as JSON text; a refusal is a tool error whose text starts with
    its code and detail."""
    text, refused = declare_plan_outcome(declared)
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": dict(declared),
        "isError": refused,
    }
    return {**result, **_COMPLETE} if modern else result


def call_completed(result: object) -> bool:
    """Whether a ``tools/call`` result says the tool ran to its end: not a tool error, and
    not a 2026-07-28 request for more input (the call is retried, and checked, again)."""
    if not isinstance(result, Mapping):
        return False
    return result.get("isError") is not True and result.get("resultType", "complete") == "complete"


def call_failed(result: object) -> bool:
    """Whether a ``tools/call`` result is a tool error (``isError: true``): the tool ran and
    failed. A request for more input is neither completed nor failed."""
    return isinstance(result, Mapping) and result.get("isError") is True
