"""The exceptions of the agent-side guard and their stable codes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from guard.agent.session import CallDecision

__all__ = [
    "CONTROL_PLANE_UNAVAILABLE",
    "DECLARE_AFTER_OUTPUT",
    "GUARD_CLOSED",
    "INVALID_PLAN",
    "PLAN_SWAPPED",
    "TOKEN_INVALID",
    "CallBlocked",
    "GuardError",
]

# Codes of GuardError (exceptions of declare and refresh), next to the call decision codes
# of guard.decisions.Decision. A refusal by the control plane carries its own problem code.
DECLARE_AFTER_OUTPUT: Final = "declare_after_output"
INVALID_PLAN: Final = "invalid_plan"
TOKEN_INVALID: Final = "token_invalid"  # noqa: S105 - an error code
PLAN_SWAPPED: Final = "plan_swapped"
CONTROL_PLANE_UNAVAILABLE: Final = "control_plane_unavailable"
GUARD_CLOSED: Final = "guard_closed"


class GuardError(Exception):
    """Declaring or refreshing failed. `code` is stable (see the module constants, or the
    control plane's problem code); `errors` lists ``{"path", "detail"}`` when fields are at
    fault."""

    def __init__(
        self, code: str, message: str, *, errors: list[dict[str, Any]] | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.errors = errors or []
        super().__init__(f"{code}: {message}")


class CallBlocked(GuardError):
    """Raised by `Guard.call` and guarded functions when the decision is not ``allowed``."""

    def __init__(self, decision: CallDecision) -> None:
        self.decision = decision
        super().__init__(decision.code.value, decision.reason)
