"""The stable codes of a guard decision, shared by the guard and the control plane."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum


class Decision(StrEnum):
    ALLOWED = "allowed"
    NOT_IN_PLAN = "not_in_plan"
    POLICY_DENIED = "policy_denied"
    MAX_CALLS_EXCEEDED = "max_calls_exceeded"
    NO_PLAN = "no_plan"
    PLAN_REVOKED = "plan_revoked"
    PLAN_EXPIRED = "plan_expired"
    TOKEN_EXPIRED = "token_expired"  # noqa: S105 (a decision code, not a secret)
    TOKEN_INVALID = "token_invalid"  # noqa: S105 (its signing key left the JWKS)
    USER_DISABLED = "user_disabled"
    AGENT_DISABLED = "agent_disabled"
    INVALID_ARGUMENTS = "invalid_arguments"
    APPROVAL_PENDING = "approval_pending"  # the plan awaits a person's approval
    # Version-2 plans (docs/decisions/0066): a step waiting for the steps of its `after`, a
    # budget the call would pass, an argument a closed step (`additionalArgs: false`) lacks.
    OUT_OF_ORDER = "out_of_order"
    BUDGET_EXCEEDED = "budget_exceeded"
    UNEXPECTED_ARGUMENT = "unexpected_argument"


DECISION_CODES: frozenset[str] = frozenset(code.value for code in Decision)

# Limits of one batch posted to POST /v1/plans/{id}/events: the server refuses more, the
# guard's reporter never sends more. The batch's shape is guard.events; the OpenAPI schema
# of the endpoint reads these same names.
MAX_EVENTS_PER_BATCH = 500
MAX_DISPLAY_UPDATES_PER_BATCH = 50
MAX_EVENT_TOOL_LENGTH = 200
MAX_EVENT_REASON_LENGTH = 500
# An ACP message shown to the user, as compact JSON in UTF-8.
MAX_DISPLAY_UPDATE_BYTES = 64 * 1024
# The policy rule an event names: its description is cut to this length by the guard.
MAX_EVENT_RULE_DESCRIPTION_LENGTH = 200
# A reporter's stream id (a uuid4 in hex, say): letters, digits, ``-`` and ``_``.
MIN_STREAM_ID_LENGTH = 8
MAX_STREAM_ID_LENGTH = 64
# Sequence numbers and lost counts fit the control plane's 64-bit columns with room.
MAX_BATCH_SEQUENCE = 2**62
MAX_LOST_PER_BATCH = 1_000_000_000
MAX_END_REASON_LENGTH = 500


class PlanOutcome(StrEnum):
    """How the agent's guard ended a plan, reported in the last batch (``end.outcome``)."""

    COMPLETED = "completed"  # every required step ran
    ENDED = "ended"  # ended before that
    TOKEN_REFUSED = "token_refused"  # noqa: S105 (the guard refused the token it was given)


PLAN_OUTCOMES: frozenset[str] = frozenset(outcome.value for outcome in PlanOutcome)

# An ``ended`` plan's reason naming the required steps that did not complete: written by the
# guard (`not_completed_reason`), read by the control plane's plan page
# (`steps_not_completed`). Tool names hold no space or parenthesis, so it reads back whole.
NOT_COMPLETED_PREFIX = "required step(s) did not complete: "
_NOT_COMPLETED_STEP = re.compile(r"(?:: |; )step (\d+) \(")


def not_completed_reason(steps: Iterable[tuple[int, str, bool]]) -> str:
    """The end reason for required steps (index, tool, whether a call of it failed) that
    did not complete, counting steps from 1 as people do; empty for none."""
    parts = [
        f"step {index + 1} ({tool}): {'its call failed' if failed else 'it was not called'}"
        for index, tool, failed in steps
    ]
    return NOT_COMPLETED_PREFIX + "; ".join(parts) if parts else ""


def steps_not_completed(reason: str) -> frozenset[int]:
    """The indexes (from 0) of the steps a `not_completed_reason` names; none for any other
    reason."""
    if not reason.startswith(NOT_COMPLETED_PREFIX):
        return frozenset()
    return frozenset(int(number) - 1 for number in _NOT_COMPLETED_STEP.findall(reason))
