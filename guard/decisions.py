"""The stable codes of a guard decision, shared by the guard and the control plane."""

from __future__ import annotations

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
