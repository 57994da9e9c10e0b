"""Verifying the control plane's answer to a declaration or a refresh: a validly signed
intent token for exactly the plan the guard sent, acting for the plan's person."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, cast

from guard.agent.errors import CONTROL_PLANE_UNAVAILABLE, PLAN_SWAPPED, TOKEN_INVALID, GuardError
from guard.agent.http import ControlPlaneError, ControlPlaneUnavailable, JwksCache
from guard.agent.shadow import ShadowDecider, ShadowPolicyInvalid
from guard.agent.verified import VerifiedToken
from guard.canonical import canonical_json
from guard.errors import DocumentInvalid, TokenInvalid, WrongIssuer
from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy
from guard.tokens import unverified_header, verify_intent_token

__all__ = ["MAX_REFRESH_MARGIN", "AnswerVerifier", "VerifiedToken"]

MAX_REFRESH_MARGIN: Final = 120.0


class AnswerVerifier:
    """Checks declare/refresh answers against the session's issuer, clock and key set."""

    def __init__(
        self,
        *,
        jwks: JwksCache,
        issuer: str,
        clock: Callable[[], float],
        clock_skew: int,
        refresh_margin: float | None,
        jkt: str | None = None,
    ) -> None:
        self._jwks = jwks
        # The thumbprint of the session's DPoP key (None: the session binds nothing): a
        # token bound to any other key (cnf.jkt) is refused, as it could not be refreshed
        # or polled for by this guard. An unbound token is taken: a control plane that
        # predates binding, or a child plan delegated to this session.
        self._jkt = jkt
        self._issuer = issuer
        self._clock = clock
        self._clock_skew = clock_skew
        # Refresh this long before expiry; None: a fifth of the lifetime, at most 120 s.
        self._refresh_margin = refresh_margin

    def __call__(
        self,
        body: Mapping[str, Any],
        document: dict[str, Any],
        document_hash: str,
        expected_id: str | None = None,
        *,
        approved: bool = False,
        bound_to: str | None = None,
    ) -> tuple[str, VerifiedToken]:
        """Verify a declare/refresh answer: a valid token for exactly the plan we sent.

        With `approved` (the token of a plan a person was asked to approve) the token must
        also carry ``apr``, which `IntentClaims` has already bound to the token's ``ph``
        (and so to the plan sent): an ``apr`` for another hash is ``token_invalid``.

        Returns the plan id and the token. Raises GuardError ``token_invalid``,
        ``plan_swapped``, or ``control_plane_unavailable`` when the signing keys cannot be
        fetched.
        """
        token = body.get("token")
        plan_id = body.get("id")
        if not isinstance(token, str) or not isinstance(plan_id, str):
            raise GuardError(TOKEN_INVALID, "the answer carries no token and plan id")
        try:
            kid = unverified_header(token).get("kid")
            keys = self._jwks.keys_for(kid)
            # Every claim is present and of its type from here on (IntentClaims.from_payload).
            claims = verify_intent_token(
                token, keys, issuer=self._issuer, now=self._clock(), leeway=self._clock_skew
            )
        except WrongIssuer as error:
            # The same control plane under another name (localhost, 127.0.0.1, a port):
            # say which issuer to configure.
            hint = (
                f"; if that is your control plane, give the guard issuer={error.presented!r}"
                " (plangate-mcp: --issuer; the examples: PLANGATE_ISSUER)"
                if error.presented is not None
                else ""
            )
            raise GuardError(
                TOKEN_INVALID, f"the intent token is not valid: {error}{hint}"
            ) from error
        except TokenInvalid as error:
            raise GuardError(TOKEN_INVALID, f"the intent token is not valid: {error}") from error
        except (ControlPlaneError, ControlPlaneUnavailable) as error:
            raise GuardError(
                CONTROL_PLANE_UNAVAILABLE, f"the signing keys could not be fetched: {error}"
            ) from error
        if claims.ph != document_hash or body.get("planHash") != document_hash:
            raise GuardError(PLAN_SWAPPED, "the token's plan hash is not the hash of the plan sent")
        try:
            same_plan = canonical_json(claims.plan) == canonical_json(document)
        except Exception:
            same_plan = False
        if not same_plan:
            raise GuardError(PLAN_SWAPPED, "the token carries another plan than the one sent")
        if claims.jti != plan_id or (expected_id is not None and plan_id != expected_id):
            raise GuardError(PLAN_SWAPPED, "the token is for another plan")
        if bound_to is not None:
            # A child plan bound to its sub-agent's key (Guard.delegate(jkt=)): exactly it.
            if claims.cnf != bound_to:
                raise GuardError(
                    TOKEN_INVALID, "the child token is not bound to the key named for it (cnf)"
                )
        elif claims.cnf is not None and claims.cnf != self._jkt:
            raise GuardError(
                TOKEN_INVALID, "the intent token is bound to a key this guard does not hold (cnf)"
            )
        if approved and claims.apr is None:
            raise GuardError(
                TOKEN_INVALID, "the token of a plan awaiting approval carries no approval (apr)"
            )
        user = document["user"].strip().casefold()
        if claims.sub.casefold() != user:
            raise GuardError(PLAN_SWAPPED, "the token acts for another person than the plan")
        try:
            policy = CompiledPolicy(
                validate_policy(claims.pol), role=claims.role, groups=claims.groups
            )
        except DocumentInvalid as error:
            raise GuardError(
                TOKEN_INVALID, f"the token's policy snapshot is invalid: {error}"
            ) from error
        expires_at = float(claims.exp)  # the session's clock and deadlines are floats
        lifetime = max(0.0, expires_at - claims.iat)
        margin = (
            self._refresh_margin
            if self._refresh_margin is not None
            else min(MAX_REFRESH_MARGIN, lifetime / 5)
        )
        # verify_intent_token has required the header's kid to be a non-empty string.
        verified_kid = cast(str, kid)
        verified = VerifiedToken(
            token, claims, policy, expires_at, expires_at - margin, verified_kid
        )
        if claims.shadow is not None:
            try:
                verified.shadow = ShadowDecider(
                    claims.shadow, role=claims.role, groups=claims.groups
                )
            except ShadowPolicyInvalid as error:
                raise GuardError(TOKEN_INVALID, str(error)) from error
        return plan_id, verified
