"""The exceptions of the agent-side guard and their stable codes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from guard.agent.session import CallDecision

__all__ = [
    "APPROVAL_DENIED",
    "APPROVAL_EXPIRED",
    "APPROVAL_PENDING",
    "CONTROL_PLANE_UNAVAILABLE",
    "DECLARE_AFTER_OUTPUT",
    "GUARD_CLOSED",
    "INVALID_PLAN",
    "PLAN_SWAPPED",
    "TOKEN_INVALID",
    "ApprovalError",
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
# A plan a policy's review rule sent to a person: still waiting when the wait's bound
# passed, refused by the approver, or nobody decided within the team's approval window.
# The same codes as the control plane's problems for POST /v1/plans/{id}/token.
APPROVAL_PENDING: Final = "approval_pending"
APPROVAL_DENIED: Final = "approval_denied"
APPROVAL_EXPIRED: Final = "approval_expired"


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


class ApprovalError(GuardError):
    """Declaring a plan that needs a person's approval did not end with a token: `code` is
    ``approval_pending`` (the plan stays pending: `Guard.declare` of the same plan or
    `Guard.poll_approval` picks it up), ``approval_denied`` (`message` carries the
    approver's reason) or ``approval_expired``. `plan_id` is the plan the control plane
    stored; `review` lists the steps and rules that asked for approval, as the control
    plane sent them; `approval_url` is where a person decides (None when the control plane
    did not say)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        plan_id: str,
        review: list[dict[str, Any]],
        approval_url: str | None = None,
    ) -> None:
        super().__init__(code, message)
        self.plan_id = plan_id
        self.review = review
        self.approval_url = approval_url
