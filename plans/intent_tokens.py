"""The intent tokens the plan services sign and the refresh tokens they verify.

Signing writes nothing: the services sign before their transaction, so it holds the
database's write lock only for the inserts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from guard.claims import Approval, IntentClaims, ParentReference, ShadowPolicy, StatusReference
from guard.errors import TokenInvalid
from guard.jwk import KeySet, public_jwk
from guard.tokens import unverified_header, verify_intent_token
from kernel.problems import Code, DomainError
from members.models import Member
from policies.models import PolicyVersion

from .keys import active_signer, signing_key_public
from .models import Plan, SigningKey
from .status_list import status_list_uri


@dataclass(frozen=True)
class Signature:
    """A token signed for a plan, and what the plan's token row keeps of it."""

    token: str
    kid: str
    issued_at: datetime
    expires_at: datetime


def intent_token_sign(
    *,
    plan: Plan,
    member: Member,
    role: str | None,
    groups: list[str],
    version: PolicyVersion,
    ttl: int,
    now: datetime,
    approval: Approval | None = None,
    active_key: SigningKey | None = None,
    shadow: PolicyVersion | None = None,
) -> Signature:
    """Sign a token for ``plan``, with ``approval`` as its ``apr`` when a person approved
    it, with the active key (``active_key`` when the caller read it in this request). Writes
    nothing: callers sign before their transaction, so it holds the database's write lock
    only for the inserts."""
    signer = active_signer(active_key)
    issued_at = int(now.timestamp())
    # A token never outlives the plan it carries.
    expires_at = min(issued_at + ttl, math.floor(plan.expires_at.timestamp()))
    claims = IntentClaims(
        iss=settings.PLANGATE_ISSUER,
        sub=member.email,
        jti=plan.id,
        iat=issued_at,
        exp=expires_at,
        ph=plan.hash,
        plan=plan.document,
        agent=plan.agent_id,
        pol=version.document,
        polv=version.number,
        polh=version.hash,
        role=role,
        groups=tuple(groups),
        apr=approval,
        # What the plan's row says of its token: its place in the team's status list, the
        # key it is bound to, the plan it was delegated from and who delegated it.
        status=(
            None
            if plan.status_idx is None
            else StatusReference(idx=plan.status_idx, uri=status_list_uri(plan.team_id))
        ),
        cnf=plan.jkt or None,
        parent=(
            None
            if plan.parent is None
            else ParentReference(jti=plan.parent.pk, ph=plan.parent.hash)
        ),
        act=plan.act,
        # The version tried in shadow beside ``version`` (docs/decisions/0076): the guard
        # decides under it too and reports where it would have answered otherwise.
        shadow=(
            None
            if shadow is None
            else ShadowPolicy(pol=shadow.document, polv=shadow.number, polh=shadow.hash)
        ),
    )
    return Signature(
        token=signer.sign(claims.to_payload()),
        kid=signer.kid,
        issued_at=datetime.fromtimestamp(issued_at, tz=UTC),
        expires_at=datetime.fromtimestamp(expires_at, tz=UTC),
    )


_KID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def refresh_token_kid(token: str) -> str | None:
    """The key id ``token``'s header names, when it is one a key of ours could have (a
    base64url JWK thumbprint); else None, and verifying it answers ``invalid_token``."""
    try:
        kid = unverified_header(token).get("kid")
    except TokenInvalid:
        return None
    # Anything else (a number, an object, text with NUL, which PostgreSQL cannot even
    # compare) names no key of ours.
    return kid if isinstance(kid, str) and _KID.fullmatch(kid) else None


def signing_key_unrevoked(kid: str) -> SigningKey | None:
    """The key ``kid`` unless it was revoked: the keys a refresh token may be signed by."""
    return SigningKey.objects.filter(kid=kid).exclude(state=SigningKey.State.REVOKED).first()


def refresh_token_verify(
    token: str, *, unrevoked_key: Callable[[str], SigningKey | None] = signing_key_unrevoked
) -> IntentClaims:
    """Verify a token we signed, expired or not. Any failure is ``invalid_token``.

    ``unrevoked_key`` finds the key the token names unless it was revoked: by default a
    read of its own; refresh passes the one it read with the rest of the request
    (plans.selectors.signing_context_read)."""
    try:
        kid = refresh_token_kid(token)
        if kid is None:
            unverified_header(token)  # a malformed token says why
            raise TokenInvalid("unknown key id")
        key = unrevoked_key(kid)
        if key is None:
            raise TokenInvalid("unknown key id")
        keys = KeySet({"keys": [{**public_jwk(signing_key_public(key)), "kid": key.kid}]})
        return verify_intent_token(
            token,
            keys,
            issuer=settings.PLANGATE_ISSUER,
            leeway=settings.PLANGATE_CLOCK_SKEW,
            require_unexpired=False,
        )
    except TokenInvalid as exc:
        raise DomainError(Code.INVALID_TOKEN, f"The token is not valid: {exc.reason}.") from exc
