"""A verified intent token as the session holds it. I/O-free, like the decider and the
session that read it (the control plane's policy simulator imports them without the HTTP
client)."""

from __future__ import annotations

from guard.claims import IntentClaims
from guard.policy_evaluation import CompiledPolicy

__all__ = ["VerifiedToken"]


class VerifiedToken:
    """A verified token and its typed claims. `withdrawn` says why it can no longer be
    trusted (its signing key left the JWKS); `refresh_at` is then moved to -inf so that the
    one comparison on a call's path notices."""

    __slots__ = (
        "claims",
        "expires_at",
        "kid",
        "policy",
        "policy_version",
        "refresh_at",
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
