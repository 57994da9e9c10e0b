"""The built-in ``declare_plan`` tool, defined for the common tool-calling formats.

Every definition embeds `guard.plan.plan_json_schema(version=2)`, the plan schema of the
version a model should write, as the tool's parameters (tool-calling APIs want one object
at the root, not `oneOf` the versions): the model's call arguments *are* the plan document.
Hand the call to `Guard.handle_declare_plan(arguments)`, which declares it and returns the
tool result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

from guard.agent.acp import describe_step
from guard.agent.errors import INVALID_PLAN, ApprovalError, GuardError
from guard.plan import MAX_STEPS, plan_json_schema
from guard.utc import isoformat_z

if TYPE_CHECKING:
    from guard.agent.status import DeclaredPlan

__all__ = [
    "DECLARE_PLAN_DESCRIPTION",
    "DECLARE_PLAN_TOOL",
    "anthropic_tool",
    "declare_plan_parameters",
    "declare_plan_result",
    "declare_plan_tool",
    "mcp_tool",
    "openai_tool",
]

DECLARE_PLAN_TOOL: Final = "declare_plan"

DECLARE_PLAN_DESCRIPTION: Final = (
    "Declare your plan before you call any other tool, and before you read any tool output."
    " Give the goal, the e-mail of the person you act for, and every tool call you intend to"
    f" make as steps (at most {MAX_STEPS}): the exact tool name, the arguments you will pin"
    " with one constraint each, how many calls it needs (maxCalls, default 20) and whether"
    " it must run (required). A constraint is one of eq, in, glob, regex, lte, gte, type,"
    " maxLength, subpath (a path under a directory), url (schemes, hosts, pathPrefix,"
    " ports), cidr (IP networks) or argv (a command's programs and arguments), and"
    " additionalArgs false on a step blocks any argument it does not pin. Give a step an"
    " id so that others can run after it (after: the ids of steps that must complete"
    " first) and budgets can cap an argument's total over its calls (id, arg, the step"
    " ids, max). A call that no step allows is blocked. Once any tool has returned a"
    " result, no new plan can be declared in this session, so plan everything first."
)


def declare_plan_parameters() -> dict[str, Any]:
    """The tool's JSON Schema: version 2's plan schema without the ``$schema`` marker,
    which some tool-calling APIs refuse in a parameters object."""
    schema = plan_json_schema(version=2)
    schema.pop("$schema", None)
    return schema


def openai_tool(*, api: Literal["chat", "responses"] = "chat") -> dict[str, Any]:
    """OpenAI-style function tool: Chat Completions (``{"type": "function", "function":
    {...}}``) or, with ``api="responses"``, the flat Responses API form."""
    function = {
        "name": DECLARE_PLAN_TOOL,
        "description": DECLARE_PLAN_DESCRIPTION,
        "parameters": declare_plan_parameters(),
    }
    if api == "responses":
        return {"type": "function", **function}
    return {"type": "function", "function": function}


def anthropic_tool() -> dict[str, Any]:
    """Anthropic Messages API tool: ``{"name", "description", "input_schema"}``."""
    return {
        "name": DECLARE_PLAN_TOOL,
        "description": DECLARE_PLAN_DESCRIPTION,
        "input_schema": declare_plan_parameters(),
    }


def mcp_tool() -> dict[str, Any]:
    """Model Context Protocol tool (as listed by ``tools/list``); MCP schemas are JSON
    Schema 2020-12, so the ``$schema`` marker is kept."""
    return {
        "name": DECLARE_PLAN_TOOL,
        "title": "Declare plan",
        "description": DECLARE_PLAN_DESCRIPTION,
        "inputSchema": plan_json_schema(version=2),
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
    }


def declare_plan_tool(style: Literal["openai", "anthropic", "mcp"]) -> dict[str, Any]:
    """The ``declare_plan`` tool definition in the given style."""
    if style == "openai":
        return openai_tool()
    if style == "anthropic":
        return anthropic_tool()
    if style == "mcp":
        return mcp_tool()
    raise ValueError(f"unknown tool style {style!r}: use openai, anthropic or mcp")


def declare_plan_result(
    declare: Callable[[object], DeclaredPlan], arguments: object
) -> dict[str, Any]:
    """Run a ``declare_plan`` tool call with `declare` (`Guard.declare`): the tool result to
    give back to the model, which explains a refusal rather than raising it. A plan that
    awaits a person's approval (``approval_pending``), was denied (the reason in
    ``detail``) or expired also carries ``planId`` and ``review`` (the steps and rules
    that asked for approval), so the model can tell the user.

    `arguments` is the call's arguments: the plan object, or its JSON text as OpenAI-style
    APIs deliver it.

    What the model is shown is `guard.agent.outcomes.declare_plan_outcome` of this answer,
    through every door alike (the MCP gateway's ``declare_plan_call_result``, each
    framework adapter): the answer as JSON, and for a plan not declared, a tool *error*
    whose text starts with ``"{code}: {detail}"``.
    """
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {
                "ok": False,
                "code": INVALID_PLAN,
                "detail": "the arguments are not valid JSON",
                "errors": [],
            }
    try:
        declared = declare(arguments)
    except ApprovalError as error:
        # The model tells the user: who must act (a person), on which plan, and why.
        return {
            "ok": False,
            "code": error.code,
            "detail": error.message,
            "errors": error.errors,
            "planId": error.plan_id,
            "review": error.review,
            **({"approvalUrl": error.approval_url} if error.approval_url else {}),
        }
    except GuardError as error:
        return {
            "ok": False,
            "code": error.code,
            "detail": error.message,
            "errors": error.errors,
        }
    budgets = declared.plan.get("budgets", ())
    descriptions = [describe_step(step, budgets) for step in declared.plan["steps"]]
    result: dict[str, Any] = {
        "ok": True,
        "planId": declared.plan_id,
        "expiresAt": isoformat_z(declared.expires_at),
        "steps": descriptions,
        "detail": "The plan is declared. Only calls that match one of its steps will run.",
    }
    if declared.approved_by is not None:
        result["approvedBy"] = declared.approved_by
    return result
