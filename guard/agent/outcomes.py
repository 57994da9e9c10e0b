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

import json
from collections.abc import Mapping
from typing import Any

from guard.agent.session import CallDecision

__all__ = ["blocked_text", "declare_plan_outcome"]


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
