"""Plangate's guard core: what a plan and a policy mean, and how intent tokens verify.

Pure Python (no Django): the control plane and the agent-side guard import the same code,
so there is exactly one definition of a plan, a policy, the canonical hash and a valid
token. The agent side (the `Guard` client, its refresher, reporter and ACP display, and the
control plane's HTTP client) lives in `guard.agent`, which the server never imports.
"""

from typing import Any

from guard.canonical import canonical_json, sha256_hex
from guard.constraints import (
    compile_args,
    compile_constraint,
    validate_args,
    validate_constraint,
)
from guard.errors import DocumentInvalid, FieldError, TokenInvalid
from guard.jwk import KeySet, jwk_thumbprint, public_jwk
from guard.plan import (
    DEFAULT_MAX_CALLS,
    MAX_GOAL_LENGTH,
    MAX_STEPS,
    PLAN_VERSION,
    PLAN_VERSIONS,
    STEP_ID_PATTERN,
    TOOL_NAME_PATTERN,
    CompiledPlan,
    plan_hash,
    plan_json_schema,
    validate_plan,
)
from guard.policy import policy_hash, policy_json_schema, validate_policy
from guard.policy_evaluation import CompiledPolicy, PolicyDecision, StepDenial, evaluate_plan
from guard.tokens import unverified_claims, unverified_header, verify_token

# The agent side (guard.agent) needs httpx; the server only needs the core above, so the
# agent side is imported when first asked for: `from guard import Guard` (or `AsyncGuard`).
_AGENT_NAMES = frozenset(
    {
        "AsyncGuard",
        "Guard",
        "CallBlocked",
        "CallDecision",
        "Delegation",
        "GuardError",
        "GuardStatus",
    }
)


def __getattr__(name: str) -> Any:
    if name in _AGENT_NAMES:
        from guard import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'guard' has no attribute {name!r}")


__all__ = [
    "DEFAULT_MAX_CALLS",
    "MAX_GOAL_LENGTH",
    "MAX_STEPS",
    "PLAN_VERSION",
    "PLAN_VERSIONS",
    "STEP_ID_PATTERN",
    "TOOL_NAME_PATTERN",
    "AsyncGuard",
    "CallBlocked",
    "CallDecision",
    "CompiledPlan",
    "CompiledPolicy",
    "Delegation",
    "DocumentInvalid",
    "FieldError",
    "Guard",
    "GuardError",
    "GuardStatus",
    "KeySet",
    "PolicyDecision",
    "StepDenial",
    "TokenInvalid",
    "canonical_json",
    "compile_args",
    "compile_constraint",
    "evaluate_plan",
    "jwk_thumbprint",
    "plan_hash",
    "plan_json_schema",
    "policy_hash",
    "policy_json_schema",
    "public_jwk",
    "sha256_hex",
    "unverified_claims",
    "unverified_header",
    "validate_args",
    "validate_constraint",
    "validate_plan",
    "validate_policy",
    "verify_token",
]
