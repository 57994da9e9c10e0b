"""The server's side of DPoP (RFC 9449, docs/decisions/0069): a plan bound to its guard's
key (``Plan.jkt``, signed as ``cnf.jkt``) is served only to requests that carry a fresh
proof by that key in the ``DPoP`` header.

What a proof must name (guard.dpop.verify_proof checks it):

- ``htm``: the request's method;
- ``htu``: the request's URL without query or fragment, under either of its names: the
  public one, ``PLANGATE_ISSUER`` followed by the request's path within the application
  (``path_info``: what the guard sends, as it names the control plane by its issuer,
  whatever proxies and prefixes are in between), or the one this process sees,
  ``request.build_absolute_uri`` (Host checked against ALLOWED_HOSTS, the scheme https
  only when ``PLANGATE_TRUST_X_FORWARDED_PROTO`` says so), for a client that names the
  server as it reaches it directly;
- ``ath``: the hash of the ``Authorization: Bearer`` credential (the API key, or the plan's
  token for a decision batch sent with it);
- ``iat`` within ``PLANGATE_DPOP_MAX_AGE`` seconds (default 60) give or take
  ``PLANGATE_CLOCK_SKEW``;
- ``jti`` never seen before for that key within that window: the replay store is the
  rate-limit counters every process already shares (kernel.ratelimit: a database row upserted
  by one statement, or Redis ``SET NX`` when the default cache is Redis), keyed by the key's
  thumbprint and the jti, kept until the proof could no longer be accepted, then removed by
  the counters' periodic sweep. A proof counts as used once it was checked, whatever the
  answer to its request.

A refusal is 401 ``invalid_dpop_proof`` with ``WWW-Authenticate: DPoP
error="invalid_dpop_proof"``.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Final

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.http import HttpRequest

from guard.dpop import DpopInvalid, DpopProof, htu_normalize, verify_proof
from guard.errors import FieldError
from kernel.bearer import bearer_credential
from kernel.problems import Code, DomainError
from kernel.sql import counter_hit

from .models import Plan

__all__ = [
    "DPOP_HEADER",
    "dpop_error",
    "dpop_for_declaration",
    "dpop_proof_optional",
    "dpop_require_for_jkt",
    "dpop_require_for_plan",
    "dpop_require_for_plan_id",
    "jti_first_use",
    "request_htu",
]

DPOP_HEADER: Final = "DPoP"
_CHALLENGE: Final = 'DPoP error="invalid_dpop_proof", algs="EdDSA Ed25519"'
# Where a request's verified proof is kept, so that two checks in one request (a bound
# parent and the child's own binding) verify it and count its jti once.
_VERIFIED_ATTRIBUTE: Final = "_plangate_dpop_proof"


def dpop_error(detail: str) -> DomainError:
    return DomainError(
        Code.INVALID_DPOP_PROOF,
        detail,
        errors=[FieldError(DPOP_HEADER, detail)],
        headers={"WWW-Authenticate": _CHALLENGE},
    )


def _max_age() -> int:
    return int(settings.PLANGATE_DPOP_MAX_AGE)


def request_htu(request: HttpRequest) -> tuple[str, ...]:
    """The names a proof's ``htu`` may give this request (the module's docstring says why
    both)."""
    public = htu_normalize(settings.PLANGATE_ISSUER.rstrip("/") + request.path_info)
    seen = htu_normalize(request.build_absolute_uri(request.path))
    return (public,) if seen == public else (public, seen)


def jti_first_use(proof: DpopProof, *, now: float | None = None) -> bool:
    """Record the proof's jti for its key; False when it was recorded before (a replay).
    Atomic across every process of the deployment."""
    moment = time.time() if now is None else now
    # Past this moment the proof's iat is outside the window: it cannot come back.
    window_end = proof.iat + _max_age() + settings.PLANGATE_CLOCK_SKEW + 1
    digest = hashlib.sha256(f"{proof.jkt}:{proof.jti}".encode()).hexdigest()[:40]
    bucket = f"dpop:{digest}"
    cache = caches["default"]
    if isinstance(cache, RedisCache):
        return bool(cache.add(bucket, 1, timeout=max(1, math.ceil(window_end - moment))))
    return counter_hit(bucket, window_end) == 1


def dpop_proof_optional(request: HttpRequest) -> DpopProof | None:
    """The request's DPoP proof, verified and its jti recorded; None when it sends none.
    DomainError ``invalid_dpop_proof`` for a proof that does not hold or was used before."""
    verified = getattr(request, _VERIFIED_ATTRIBUTE, None)
    if verified is not None:
        return verified
    header = request.headers.get(DPOP_HEADER)
    if header is None:
        return None
    credential = bearer_credential(request.headers.get("Authorization", ""))
    try:
        proof = verify_proof(
            header.strip(),
            htm=request.method or "",
            htu=request_htu(request),
            access_token=credential,
            max_age=_max_age(),
            leeway=settings.PLANGATE_CLOCK_SKEW,
        )
    except DpopInvalid as error:
        raise dpop_error(f"The DPoP proof is not valid: {error.reason}.") from None
    if credential is None:
        raise dpop_error("A DPoP proof goes with an `Authorization: Bearer` credential.")
    if not jti_first_use(proof):
        raise dpop_error("The DPoP proof was used before; make a new one for each request.")
    setattr(request, _VERIFIED_ATTRIBUTE, proof)
    return proof


def dpop_require_for_jkt(request: HttpRequest, jkt: str) -> DpopProof | None:
    """For a plan bound to `jkt` (empty: unbound, nothing to check), the request's valid
    proof by that key; DomainError ``invalid_dpop_proof`` otherwise."""
    if not jkt:
        return None
    proof = dpop_proof_optional(request)
    if proof is None:
        raise dpop_error("The plan's tokens are bound to a key: send a DPoP proof by it.")
    if proof.jkt != jkt:
        raise dpop_error("The DPoP proof is by another key than the one the plan is bound to.")
    return proof


def dpop_require_for_plan(request: HttpRequest, plan: Plan) -> DpopProof | None:
    """`dpop_require_for_jkt` for a plan row."""
    return dpop_require_for_jkt(request, plan.jkt)


def dpop_require_for_plan_id(request: HttpRequest, *, agent_id: object, plan_id: str) -> None:
    """The check for a door that reads its plan later (a service): one primary-key read of
    the plan's jkt, scoped to the agent. No plan: nothing here, the service answers 404."""
    jkt = Plan.objects.filter(pk=plan_id, agent_id=agent_id).values_list("jkt", flat=True).first()
    if jkt:
        dpop_require_for_jkt(request, jkt)


def dpop_for_declaration(request: HttpRequest, *, require: bool) -> str:
    """The jkt a declaration binds its plan to ("" unbound); `require` (the team's
    require_token_binding) refuses a declaration without a proof."""
    proof = dpop_proof_optional(request)
    if proof is None:
        if require:
            raise dpop_error("The team binds every plan's tokens to a key: send a DPoP proof.")
        return ""
    return proof.jkt
