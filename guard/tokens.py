"""Verifying an intent token: a compact JWS signed with Ed25519 (RFC 8037). Its claims are
typed in guard.claims, the keys it is verified against (`KeySet`) are read in guard.jwk.

The control plane signs `IntentClaims.to_payload()` and verifies a refresh token with
`verify_intent_token`, as the agent-side guard verifies every token it receives. One JOSE
library serves both directions: PyJWT signs (`plans.keys.Signer`) and, here, checks the JWS
(the algorithm allow-list, the segments' base64url, the Ed25519 signature). Around it this
module keeps what PyJWT leaves to its caller and what the token's format promises: one
accepted key type, two spellings of one algorithm (`EdDSA`, and the fully specified
`Ed25519` of RFC 9864), a required `kid`, no key material taken from the token itself, no
padding and no duplicate header member (PyJWT accepts both), strict JSON (no NaN), the
signature checked before any claim is trusted, then typed claims.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import jwt

from guard.claims import IntentClaims, integer_claim, numeric_claim
from guard.errors import TokenInvalid, WrongIssuer
from guard.jwk import ACCEPTED_ALGORITHMS, KeySet, b64url_decode

__all__ = [
    "ed25519_jws",
    "unverified_claims",
    "unverified_header",
    "verify_intent_token",
    "verify_token",
]

# Header parameters that name or embed a key: honouring any of them would let the token
# choose the key that verifies it.
FORBIDDEN_HEADER_PARAMETERS: Final = ("jku", "x5u", "jwk", "x5c")
# A 50-step plan plus a 500-rule policy snapshot stays far below this; the bound only keeps
# garbage from costing time.
MAX_TOKEN_LENGTH: Final = 4_000_000


def _ed25519_jws() -> jwt.PyJWS:
    """PyJWT's JWS layer knowing Ed25519 only, under both of its names.

    PyJWT 2.15 names Ed25519 `EdDSA` only; RFC 9864's fully specified `Ed25519` is the same
    signature, so it is registered with the same algorithm object (unless a later PyJWT
    already knows it). Every other algorithm (none, HMAC, RSA, ECDSA) is unknown here.
    """
    jws = jwt.PyJWS(algorithms=["EdDSA"])
    try:
        jws.get_algorithm_by_name("Ed25519")
    except NotImplementedError:
        jws.register_algorithm("Ed25519", jws.get_algorithm_by_name("EdDSA"))
    return jws


_JWS: Final = _ed25519_jws()


def ed25519_jws() -> jwt.PyJWS:
    """The one PyJWT JWS layer that knows Ed25519 under both names (`EdDSA`, `Ed25519`):
    verifying here, and signing on the server under the name its setting chooses."""
    return _JWS


# --- parsing and keys ----------------------------------------------------------------------


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate member name")
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_object(data: bytes, what: str, *, reject_duplicates: bool) -> dict[str, Any]:
    try:
        value = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_reject_duplicate_keys if reject_duplicates else None,
            parse_constant=_reject_constant,
        )
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError included
        raise TokenInvalid(f"{what} is not valid JSON") from None
    if not isinstance(value, dict):
        raise TokenInvalid(f"{what} is not a JSON object")
    return value


def _split(token: object) -> tuple[str, str, str]:
    if not isinstance(token, str):
        raise TokenInvalid("token is not a string")
    if len(token) > MAX_TOKEN_LENGTH:
        raise TokenInvalid("token is too long")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenInvalid("token is not a compact JWS (three dot-separated parts)")
    header, payload, signature = parts
    if not header or not payload or not signature:
        raise TokenInvalid("token has an empty part")
    return header, payload, signature


def _parse_header(segment: str) -> dict[str, Any]:
    # The header is read before the signature is checked and decides which algorithm and
    # key apply, so `{"alg": "none", "alg": "EdDSA"}` must not mean different things to
    # different parsers.
    return _json_object(b64url_decode(segment, "header"), "header", reject_duplicates=True)


def _payload_object(data: bytes) -> dict[str, Any]:
    # No duplicate-member check here: the payload is only trusted after its signature
    # verifies, and the control plane's serialiser never repeats a member. The check would
    # run a Python hook per object, more than doubling the cost for a token with a policy.
    return _json_object(data, "payload", reject_duplicates=False)


def _parse_payload(segment: str) -> dict[str, Any]:
    return _payload_object(b64url_decode(segment, "payload"))


def unverified_header(token: str) -> dict[str, Any]:
    """The token's JOSE header, parsed strictly but NOT verified (e.g. to read `kid`)."""
    header, _, _ = _split(token)
    return _parse_header(header)


def unverified_claims(token: str) -> dict[str, Any]:
    """The token's claims, parsed strictly but NOT verified (e.g. to read `jti`)."""
    _, payload, _ = _split(token)
    return _parse_payload(payload)


def _shown(value: object) -> str:
    """A header value, safe and short enough for an error message."""
    text = value if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 40 else text[:40] + "..."


def _verified_payload(token: str, keys: KeySet) -> dict[str, Any]:
    """The payload of a token whose header is acceptable and whose signature verifies."""
    header_segment, payload_segment, signature_segment = _split(token)
    header = _parse_header(header_segment)

    if "alg" not in header:
        raise TokenInvalid("header has no algorithm")
    algorithm = header["alg"]
    if not isinstance(algorithm, str) or algorithm not in ACCEPTED_ALGORITHMS:
        raise TokenInvalid(f"algorithm {_shown(algorithm)} is not accepted")
    for parameter in FORBIDDEN_HEADER_PARAMETERS:
        if parameter in header:
            raise TokenInvalid(f"header parameter {parameter} is not accepted")
    if "crit" in header:
        raise TokenInvalid("critical header extensions are not supported")
    if header.get("b64") is False:  # RFC 7797; PyJWT would then want a detached payload
        raise TokenInvalid("unencoded payloads (b64) are not accepted")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise TokenInvalid("header has no key id")
    public_key = keys.get(kid)
    if public_key is None:
        raise TokenInvalid("unknown key id")

    # PyJWT accepts `=` padding, which would give a token a second spelling; it refuses any
    # other character outside the alphabet and non-canonical trailing bits. ASCII is checked
    # first so that a payload holding "é" is a malformed token, not an encoding error.
    if not payload_segment.isascii() or "=" in payload_segment:
        raise TokenInvalid("payload is not base64url without padding")
    b64url_decode(signature_segment, "signature")
    try:
        decoded = _JWS.decode_complete(token, public_key, algorithms=[algorithm])
    except jwt.InvalidSignatureError:
        raise TokenInvalid("bad signature") from None
    except jwt.DecodeError:
        # The header and signature passed the stricter checks above: the payload is left.
        raise TokenInvalid("payload is not base64url without padding") from None
    except jwt.PyJWTError as error:
        raise TokenInvalid(f"token is not a valid JWS: {error}") from None
    return _payload_object(decoded["payload"])


def _verify(
    token: str,
    keys: KeySet,
    *,
    issuer: str,
    now: float | None,
    leeway: int,
    require_unexpired: bool,
) -> tuple[dict[str, Any], IntentClaims]:
    payload = _verified_payload(token, keys)
    if payload.get("iss") != issuer:
        raise WrongIssuer(expected=issuer, presented=payload.get("iss"))
    current = time.time() if now is None else now
    expires_at = integer_claim(payload, "exp")
    issued_at = integer_claim(payload, "iat")
    if require_unexpired and current - leeway >= expires_at:
        raise TokenInvalid("token expired")
    if issued_at > current + leeway:
        raise TokenInvalid("token issued in the future")
    if "nbf" in payload and numeric_claim(payload, "nbf") > current + leeway:
        raise TokenInvalid("token not yet valid")
    return payload, IntentClaims.from_payload(payload)


def verify_intent_token(
    token: str,
    keys: KeySet,
    *,
    issuer: str,
    now: float | None = None,
    leeway: int = 30,
    require_unexpired: bool = True,
) -> IntentClaims:
    """Verify an intent token and return its typed claims (see `verify_token`)."""
    return _verify(
        token, keys, issuer=issuer, now=now, leeway=leeway, require_unexpired=require_unexpired
    )[1]


# The clock skew a guard allows by default when it verifies its own token (Guard's
# `clock_skew`, and `plangate token verify --leeway`): the control plane's and the agent's
# clocks may disagree by this much.
GUARD_CLOCK_SKEW_SECONDS: Final = 60


def verify_token(
    token: str,
    keys: KeySet,
    *,
    issuer: str,
    now: float | None = None,
    leeway: int = 30,
    require_unexpired: bool = True,
) -> dict[str, Any]:
    """Verify an intent token and return its claims as the JSON object it carries.

    Checks, in order: compact JWS structure, strict base64url and JSON; header `alg`
    exactly EdDSA or Ed25519; no `jku`/`x5u`/`jwk`/`x5c`; no `crit` (no extension is
    understood) and no unencoded payload; `kid` present in `keys`; the Ed25519 signature
    (PyJWT); then the claims: `iss` equals `issuer`, integer `exp` and `iat`, `exp` not past
    by more than `leeway` seconds (skipped when `require_unexpired` is false, e.g. for
    refresh), `iat` and any `nbf` not in the future by more than `leeway`, and every claim
    of `IntentClaims` present and of its type. Raises TokenInvalid, and only TokenInvalid,
    with a specific reason.
    """
    return _verify(
        token, keys, issuer=issuer, now=now, leeway=leeway, require_unexpired=require_unexpired
    )[0]
