"""A verified intent token as the session holds it. I/O-free, like the decider and the
session that read it (the control plane's policy simulator imports them without the HTTP
client)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from guard.claims import IntentClaims
from guard.policy_evaluation import CompiledPolicy

if TYPE_CHECKING:
    from guard.agent.shadow import ShadowDecider
    from guard.agent.tool_calls import ToolCalls

__all__ = ["VerifiedToken"]


class VerifiedToken:
    """A verified token and its typed claims. `withdrawn` says why it can no longer be
    trusted (its signing key left the JWKS); `refresh_at` is then moved to -inf so that the
    one comparison on a call's path notices. `calls` is what deciding a call of each of the
    plan's tools needs under this token's policy (guard.agent.tool_calls), set when the
    token is installed in its plan's state."""

    __slots__ = (
        "calls",
        "claims",
        "expires_at",
        "kid",
        "policy",
        "policy_version",
        "refresh_at",
        "shadow",
        "token",
        "withdrawn",
    )

    def __init__(
        self,
        token: str,
        claims: IntentClaims,
        policy: CompiledPolicy,
        expires_at: float,
        refresh_at: float,
        kid: str,
    ) -> None:
        self.token = token
        self.claims = claims
        self.policy = policy
        self.policy_version = claims.polv
        self.expires_at = expires_at
        self.refresh_at = refresh_at
        self.kid = kid
        self.withdrawn: str | None = None
        self.calls: dict[str, ToolCalls] | None = None
        #: the policy version tried in shadow when the token was signed (its ``shadow``
        #: claim), decided under beside ``policy`` and never enforced
        self.shadow: ShadowDecider | None = None
