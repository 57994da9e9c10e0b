"""The agent side of the guard: a `Guard` holds one session's plan and intent token, decides
every tool call locally, keeps the token fresh, shows the plan over ACP and reports its
decisions to the control plane.

The control plane imports only its I/O-free modules (the policy simulator decides a call
with `decider`, `session`, `answer`), never the Guard or its HTTP client: those need httpx,
the core (`guard.plan`, `guard.policy`, `guard.tokens`...) does not.

    guard.py      Guard: declare, check, call, tool, status, close
    async_guard.py  AsyncGuard: the Guard for asyncio code, network calls off the loop
    decider.py    deciding a call (the hot path), step budgets, stopping a plan
    session.py    one plan's state, CallDecision and the fixed decisions
    answer.py     verifying a declare/refresh answer (the token for exactly the plan sent)
    delegation.py  Delegation: a child plan for a sub-agent, its token's checks
    approval.py   waiting politely for a person's approval; the plan awaiting it
    refresher.py  refreshing the token: retries, back-off, JWKS refetch, background thread
    display.py    the ACP display of the plan's progress, newest state first
    status.py     DeclaredPlan, GuardStatus, StepStatus
    reporter.py   the decision log, posted in batches from a background thread
    http.py       the control plane's REST API over httpx, and the JWKS cache
    acp.py        ACP plan updates: writing them, and a tolerant reader
    tools.py      the ``declare_plan`` tool for the common tool-calling formats
    errors.py     GuardError, ApprovalError, CallBlocked and their codes
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guard.agent.async_guard import AsyncGuard
    from guard.agent.delegation import Delegation
    from guard.agent.errors import ApprovalError, CallBlocked, GuardError
    from guard.agent.guard import Guard
    from guard.agent.session import CallDecision
    from guard.agent.status import DeclaredPlan, GuardStatus, StepStatus

# Loaded when first asked for, so that importing one of the I/O-free modules (decider,
# session, answer, acp: the control plane's policy simulator decides a call with them)
# does not load the Guard and its HTTP client.
_EXPORTS = {
    "ApprovalError": "guard.agent.errors",
    "AsyncGuard": "guard.agent.async_guard",
    "CallBlocked": "guard.agent.errors",
    "GuardError": "guard.agent.errors",
    "Guard": "guard.agent.guard",
    "CallDecision": "guard.agent.session",
    "Delegation": "guard.agent.delegation",
    "DeclaredPlan": "guard.agent.status",
    "GuardStatus": "guard.agent.status",
    "StepStatus": "guard.agent.status",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'guard.agent' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "ApprovalError",
    "AsyncGuard",
    "CallBlocked",
    "CallDecision",
    "DeclaredPlan",
    "Delegation",
    "Guard",
    "GuardError",
    "GuardStatus",
    "StepStatus",
]
