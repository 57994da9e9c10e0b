"""What the model is shown for a blocked call and for a ``declare_plan`` call: one text for
every door (the MCP gateway, the framework adapters, an application's own tools).

A blocked call's text starts with its code (``not_in_plan: no step of the plan calls
github_delete_repo``), so a model, a person reading a transcript and a client's code find
it in the same place. A refused declaration is a tool *error* everywhere, with the code and
detail first and the whole answer as JSON after it: the model sees why, and a framework
that tells errors apart (MCP's ``isError``, a LangChain ``ToolMessage`` with status error,
pydantic-ai's failed tool result) shows it as the failure it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from guard.agent.session import CallDecision
from guard.canonical import canonical_json
from guard.decisions import Decision
from guard.errors import DocumentInvalid
from guard.plan import validate_plan

__all__ = [
    "AUTHORIZATION_META_KEY",
    "INSUFFICIENT_AUTHORIZATION",
    "PLAN_STEP_HINT",
    "URL_HINT",
    "admitting_step",
    "authorization_context_id",
    "authorization_denial",
    "blocked_text",
    "declare_plan_outcome",
]

# SEP-2643 (structured authorization denials): the envelope's key in a result's `_meta`,
# its one classification, and the hint types written here. `url` is the SEP's own (a page
# where a person acts, here with its `url`); a plan step is Plangate's, which a client that
# does not know it ignores, as the SEP says of every unknown hint.
AUTHORIZATION_META_KEY: Final = "io.modelcontextprotocol/authorization"
INSUFFICIENT_AUTHORIZATION: Final = "insufficient_authorization"
URL_HINT: Final = "url"
PLAN_STEP_HINT: Final = "plangate/plan_step"

# The calls a plan change would admit: no step calls the tool so (or none with calls left,
# or none that takes the argument), or there is no plan at all. A step pinning each of the
# call's arguments with `eq`, once, admits exactly that call.
_PLAN_CHANGE_ADMITS: Final = frozenset(
    {
        Decision.NO_PLAN,
        Decision.NOT_IN_PLAN,
        Decision.MAX_CALLS_EXCEEDED,
        Decision.UNEXPECTED_ARGUMENT,
    }
)
# Something can still be done within the plan: a person approves it (approval_pending),
# its earlier steps run first (out_of_order, whose reason names them), the guard's refresher
# brings a fresh token (token_expired). Every other code is final for the call: the team's
# policy, a spent budget, a revoked or expired plan, a disabled member or agent.
_AVAILABLE_WITHOUT_HINT: Final = frozenset(
    {Decision.APPROVAL_PENDING, Decision.OUT_OF_ORDER, Decision.TOKEN_EXPIRED}
)
# A step's placeholder plan, to validate a step as a plan validates it.
_CHECK_GOAL: Final = "check a step"
_CHECK_USER: Final = "check@plangate.invalid"


def blocked_text(decision: CallDecision) -> str:
    """The text of a call the guard did not allow: ``"{code}: {reason}"``."""
    return f"{decision.code.value}: {decision.reason}"


def declare_plan_outcome(declared: Mapping[str, Any]) -> tuple[str, bool]:
    """The text of a ``declare_plan`` call's result (`Guard.handle_declare_plan`'s answer),
    and whether it is a refusal: the answer as JSON, after ``"{code}: {detail}"`` when the
    plan was not declared (refused, invalid, awaiting or denied approval)."""
    document = json.dumps(declared, ensure_ascii=False)
    if declared.get("ok") is True:
        return document, False
    return f"{declared.get('code')}: {declared.get('detail')}\n{document}", True


def admitting_step(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The plan step that admits exactly this call, once: the tool, each argument pinned
    with ``eq``, ``maxCalls`` 1; valid plan-step JSON for either plan version. None when no
    plan could hold it (a tool name or an argument value the plan schema refuses)."""
    step = {
        "tool": tool,
        "args": {name: {"eq": value} for name, value in arguments.items()},
        "maxCalls": 1,
    }
    try:
        validate_plan({"version": 1, "goal": _CHECK_GOAL, "user": _CHECK_USER, "steps": [step]})
    except DocumentInvalid:
        return None
    return step


def authorization_context_id(
    decision: CallDecision, *, tool: object, arguments: object, plan_id: str | None
) -> str:
    """SEP-2643's ``authorizationContextId`` for a denied call: derived, not stored. The
    same call denied the same way under the same plan (or with none) gets the same id, so a
    retry that echoes it names the denial it answers, and the decision log can be matched
    to it without the guard keeping anything; it reveals nothing a hash does not."""
    basis = [plan_id, decision.code.value, decision.step, tool, arguments]
    try:
        text = canonical_json(basis)
    except (TypeError, ValueError):  # not JSON (a non-finite number): its repr stands in
        text = repr(basis).encode("utf-8", "backslashreplace")
    return "authzctx_" + hashlib.sha256(text).hexdigest()[:32]


def authorization_denial(
    decision: CallDecision,
    *,
    tool: object,
    arguments: object,
    plan_id: str | None = None,
    approval_url: str | None = None,
) -> dict[str, Any] | None:
    """The SEP-2643 structured-denial envelope of a call the guard did not allow (for
    ``_meta["io.modelcontextprotocol/authorization"]``), or None for a call that is no
    authorization denial (allowed, or ``invalid_arguments``: the call itself is malformed).

    ``reason`` is the SEP's classification (``insufficient_authorization``); the guard's
    ``code`` and ``detail`` (`blocked_text`) say which. ``remediation`` is ``available``
    where something can admit the call, with a hint where the guard can name it: for a
    call outside the plan (or with no plan), the plan step that admits it
    (``plangate/plan_step``, `admitting_step`); for a plan awaiting a person's approval,
    the approval page (``url``, when `approval_url` is known). Every other code is
    ``unavailable``. `plan_id` is the plan the call was decided under (or the plan awaiting
    approval), for the ``authorizationContextId``.
    """
    code = decision.code
    if decision.allowed or code is Decision.INVALID_ARGUMENTS:
        return None
    hints: list[dict[str, Any]] = []
    if code in _PLAN_CHANGE_ADMITS and isinstance(tool, str) and isinstance(arguments, Mapping):
        step = admitting_step(tool, arguments)
        if step is not None:
            hints.append({"type": PLAN_STEP_HINT, "step": step})
    elif code is Decision.APPROVAL_PENDING and approval_url:
        hints.append({"type": URL_HINT, "url": approval_url})
    available = bool(hints) or code in _PLAN_CHANGE_ADMITS or code in _AVAILABLE_WITHOUT_HINT
    envelope: dict[str, Any] = {
        "reason": INSUFFICIENT_AUTHORIZATION,
        "remediation": "available" if available else "unavailable",
        "authorizationContextId": authorization_context_id(
            decision, tool=tool, arguments=arguments, plan_id=plan_id
        ),
        "code": code.value,
        "detail": blocked_text(decision),
    }
    if hints:
        envelope["remediationHints"] = hints
    return envelope
