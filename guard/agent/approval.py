"""Waiting for a person's approval of a plan a policy's ``review`` rule sent to one.

The control plane answers such a declaration ``202`` with the plan id and the steps and
rules that asked for review, and signs nothing yet. The guard then asks
``POST /v1/plans/{id}/token`` until a person decides, politely: never sooner than the
control plane's ``Retry-After`` says (within a floor and a cap, so that a buggy or hostile
answer can neither hammer it nor stall the wait), and never past the bound the application
set. The wait runs on the thread that declared (a call the application makes, not a tool
call); meanwhile every tool call is ``approval_pending`` (see `AwaitingPlan.blocked`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from guard.agent import acp
from guard.agent.errors import (
    APPROVAL_DENIED,
    APPROVAL_EXPIRED,
    APPROVAL_PENDING,
    GUARD_CLOSED,
    ApprovalError,
    GuardError,
)
from guard.agent.http import ControlPlaneError, ControlPlaneUnavailable
from guard.agent.session import CallDecision
from guard.decisions import Decision

__all__ = [
    "DEFAULT_APPROVAL_WAIT",
    "DEFAULT_POLL_DELAY",
    "MAX_POLL_DELAY",
    "MIN_POLL_DELAY",
    "AwaitingPlan",
    "approval_url",
    "poll_delay",
    "review_items",
    "wait_for_approval",
]

# How long `declare` waits for a decision unless the application says otherwise (seconds).
DEFAULT_APPROVAL_WAIT: Final = 300.0
# Between two asks: the control plane's Retry-After, held within these bounds; without one,
# the default, doubled after each ask up to the cap.
MIN_POLL_DELAY: Final = 1.0
MAX_POLL_DELAY: Final = 30.0
DEFAULT_POLL_DELAY: Final = 2.0
# Of the review list the control plane sent: this many items are kept for the model.
_MAX_REVIEW_ITEMS: Final = 50


class AwaitingPlan:
    """A plan the control plane stored and a person must approve before it gets a token.

    Shown over ACP like a declared plan (`id`, `document`, `statuses`), every step
    ``_awaiting_approval``; every call meanwhile gets `blocked`.
    """

    __slots__ = (
        "approval_url",
        "blocked",
        "document",
        "dropped",
        "hash",
        "id",
        "review",
        "statuses",
    )

    def __init__(
        self,
        plan_id: str,
        document: dict[str, Any],
        document_hash: str,
        review: list[dict[str, Any]],
        approval_url: str | None = None,
    ) -> None:
        self.id = plan_id
        self.document = document
        self.hash = document_hash
        self.review = review
        # Where a person approves it (the control plane's approval queue), for the user.
        self.approval_url = approval_url
        self.statuses = [acp.AWAITING_APPROVAL] * len(document["steps"])
        self.dropped = False  # denied, expired, abandoned or closed: it left the session
        self.blocked = CallDecision(
            Decision.APPROVAL_PENDING,
            f"plan {plan_id} waits for a person's approval; no tool runs until it is approved",
        )


def review_items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The steps and rules that asked for review, as the control plane listed them (only
    the objects among them, at most 50): shown to the model and the application as sent."""
    review = body.get("review")
    if not isinstance(review, list):
        return []
    return [item for item in review if isinstance(item, dict)][:_MAX_REVIEW_ITEMS]


def approval_url(body: Mapping[str, Any]) -> str | None:
    """The page where a person decides on the plan (``approvalUrl``), when the control
    plane sent one: an http(s) URL of reasonable length, else None."""
    url = body.get("approvalUrl")
    if isinstance(url, str) and url.startswith(("https://", "http://")) and len(url) <= 2000:
        return url
    return None


def poll_delay(retry_after: float | None, previous: float | None) -> float:
    """The wait before the next ask: the control plane's `retry_after` within the floor and
    the cap; without one, the default at first, then twice the `previous` wait."""
    if retry_after is not None:
        return min(MAX_POLL_DELAY, max(MIN_POLL_DELAY, retry_after))
    if previous is None:
        return DEFAULT_POLL_DELAY
    return min(MAX_POLL_DELAY, max(MIN_POLL_DELAY, previous * 2))


def wait_for_approval(
    awaiting: AwaitingPlan,
    *,
    fetch: Callable[[str], dict[str, Any]],
    wait_seconds: float,
    clock: Callable[[], float],
    sleep: Callable[[float], object],
    closed: Callable[[], bool],
    ask: bool = True,
) -> dict[str, Any]:
    """Ask `fetch` (``POST /v1/plans/{id}/token``) for the plan's token until a person
    decides, for `wait_seconds` at most (0: ask once, at once).

    Returns the control plane's answer (the body of a 201 declaration, to verify). Raises
    ApprovalError ``approval_denied`` (with the approver's reason), ``approval_expired`` or
    ``approval_pending`` (the bound passed, or the next ask allowed by ``Retry-After``
    would be past it), GuardError ``guard_closed`` when the guard closed meanwhile, or the
    control plane's refusal code for anything else (``plan_not_found``...). An unreachable,
    throttled or failing control plane is asked again within the bound. Without `ask`
    (a plan just stored, and no wait allowed) nothing is asked: it is pending.
    """
    if not ask:
        raise _approval_error(
            awaiting,
            APPROVAL_PENDING,
            f"plan {awaiting.id} waits for a person's approval; tell the user, and declare"
            " the same plan again (or poll) to pick up the decision",
        )
    deadline = clock() + max(0.0, wait_seconds)
    delay: float | None = None
    last_trouble = ""
    while True:
        try:
            return fetch(awaiting.id)
        except ControlPlaneError as error:
            if error.code == APPROVAL_DENIED:
                raise _approval_error(
                    awaiting,
                    APPROVAL_DENIED,
                    f"a person denied the plan: {error.detail or 'no reason given'}",
                ) from error
            if error.code == APPROVAL_EXPIRED:
                raise _approval_error(
                    awaiting,
                    APPROVAL_EXPIRED,
                    "nobody decided on the plan within the team's approval window; declare"
                    " it again to ask anew",
                ) from error
            if error.code != APPROVAL_PENDING and not error.transient:
                raise GuardError(error.code, error.detail, errors=error.errors) from error
            delay = poll_delay(error.retry_after, delay)
            last_trouble = "" if error.code == APPROVAL_PENDING else f" (last answer: {error})"
        except ControlPlaneUnavailable as error:
            delay = poll_delay(None, delay)
            last_trouble = f" (the control plane could not be reached: {error})"
        if closed():
            raise GuardError(GUARD_CLOSED, "the guard closed while the plan awaited approval")
        # The next ask honours Retry-After: when it would fall past the bound, the wait
        # ends now rather than asking early or sleeping for nothing.
        if clock() + delay > deadline:
            raise _approval_error(
                awaiting,
                APPROVAL_PENDING,
                f"plan {awaiting.id} still waits for a person's approval{last_trouble}; tell"
                " the user, and declare the same plan again (or poll) to pick up the decision",
            )
        sleep(delay)
        if closed():
            raise GuardError(GUARD_CLOSED, "the guard closed while the plan awaited approval")


def _approval_error(awaiting: AwaitingPlan, code: str, message: str) -> ApprovalError:
    return ApprovalError(
        code,
        message,
        plan_id=awaiting.id,
        review=awaiting.review,
        approval_url=awaiting.approval_url,
    )
