"""DPoP (RFC 9449): proofs that a request comes from the holder of the key a token is bound to.

A guard holds one Ed25519 key pair per running `Guard` (`DpopKey.generate()`); the server
binds a plan's tokens to the key's RFC 7638 thumbprint (`cnf.jkt`) when the declaration
carries a proof, and from then on wants a fresh proof by that key on each request about the
plan. A proof is a compact JWS: header ``typ: dpop+jwt``, ``alg: EdDSA`` (``Ed25519`` is
accepted too), ``jwk`` = the public key; claims ``jti`` (random, used once), ``htm`` (the
method), ``htu`` (the URL without query or fragment), ``iat`` and ``ath`` (base64url
SHA-256 of the access token the request presents in ``Authorization: Bearer``: the API key,
or the plan's token for a decision batch sent with it).

`verify_proof` checks a proof; `check_binding` lets a resource server or the MCP gateway
check offline that a request about a token carries a proof by the key its ``cnf.jkt`` names.
Replay (a `jti` seen before) is the caller's to check: it needs a store (plans.dpop).

Pure: PyJWT (through guard.tokens' one JWS layer) and cryptography, no Django.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from guard.claims import IntentClaims
from guard.errors import TokenInvalid
from guard.jwk import ACCEPTED_ALGORITHMS, b64url_decode, b64url_encode, jwk_thumbprint, public_jwk
from guard.tokens import ed25519_jws

__all__ = [
    "DEFAULT_LEEWAY",
    "DEFAULT_MAX_AGE",
    "DPOP_TYP",
    "DpopInvalid",
    "DpopKey",
    "DpopProof",
    "access_token_hash",
    "check_binding",
    "htu_normalize",
    "verify_proof",
]

DPOP_TYP: Final = "dpop+jwt"
# A proof is good for this long after its iat (the replay store keeps its jti as long) ...
DEFAULT_MAX_AGE: Final = 60
# ... give or take this much clock difference between the guard and the checker.
DEFAULT_LEEWAY: Final = 5
# A proof is a few hundred bytes; the bound only keeps garbage from costing time.
MAX_PROOF_LENGTH: Final = 4096
MAX_JTI_LENGTH: Final = 128
_ED25519_KEY_LENGTH: Final = 32
# Members a public OKP key never has: any of them is (part of) a private key.
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "k", "oth"})


class DpopInvalid(TokenInvalid):
    """A DPoP proof that does not hold; `problem` names what is wrong (``missing``,
    ``malformed``, ``typ``, ``alg``, ``jwk``, ``private_key``, ``signature``, ``claims``,
    ``htm``, ``htu``, ``iat``, ``ath``, ``jkt``, ``replayed``)."""

    def __init__(self, problem: str, reason: str) -> None:
        super().__init__(reason)
        self.problem = problem


@dataclass(frozen=True)
class DpopProof:
    """A verified proof: the key's thumbprint, the proof's id and when it was made."""

    jkt: str
    jti: str
    iat: int


def access_token_hash(access_token: str) -> str:
    """``ath``: base64url SHA-256 of the access token's ASCII text (RFC 9449 section 4.2)."""
    return b64url_encode(hashlib.sha256(access_token.encode("ascii")).digest())


def htu_normalize(url: str) -> str:
    """The URL as proofs name it: scheme and host lower-case, a default port dropped, no
    query or fragment (RFC 9449 section 4.3 compares after RFC 3986 normalization)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = parts.port
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, parts.path or "/", "", ""))


class DpopKey:
    """An Ed25519 key pair that signs DPoP proofs. It never leaves the process."""

    __slots__ = ("_private", "jkt", "jwk")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private = private_key
        self.jwk: dict[str, str] = public_jwk(private_key.public_key())
        self.jkt: str = jwk_thumbprint(self.jwk)

    @classmethod
    def generate(cls) -> DpopKey:
        return cls(Ed25519PrivateKey.generate())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the private key to a new file only its owner may read (PKCS #8 PEM).

        For a process that must keep its key across restarts, or be handed a child plan
        bound to it before it starts (`plangate-mcp --new-dpop-key`): the file is then
        what a copied token and API key would also need. Never overwrites a file."""
        pem = self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DpopKey:
        """The key `save` wrote; ValueError when the file holds no Ed25519 private key."""
        with open(path, "rb") as file:
            private_key = serialization.load_pem_private_key(file.read(), password=None)
        if not isinstance(private_key, Ed25519PrivateKey):
            raise ValueError("the file holds no Ed25519 private key")
        return cls(private_key)

    def __repr__(self) -> str:
        return f"DpopKey(jkt={self.jkt!r})"

    def proof(
        self,
        *,
        htm: str,
        htu: str,
        access_token: str | None = None,
        iat: int | None = None,
        jti: str | None = None,
    ) -> str:
        """A compact JWS proving possession of this key for one request."""
        claims: dict[str, Any] = {
            "jti": jti or secrets.token_urlsafe(16),
            "htm": htm.upper(),
            "htu": htu_normalize(htu),
            "iat": int(time.time()) if iat is None else iat,
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        return ed25519_jws().encode(
            json.dumps(claims, separators=(",", ":")).encode(),
            self._private,
            algorithm="EdDSA",
            headers={"typ": DPOP_TYP, "jwk": self.jwk},
        )


def _public_key(jwk: object) -> tuple[str, Ed25519PublicKey]:
    if not isinstance(jwk, Mapping):
        raise DpopInvalid("jwk", "the proof's header has no jwk object")
    if _PRIVATE_MEMBERS & set(jwk):
        raise DpopInvalid("private_key", "the proof's jwk holds private key material")
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise DpopInvalid("jwk", "the proof's jwk is not an OKP Ed25519 public key")
    x = jwk.get("x")
    if not isinstance(x, str):
        raise DpopInvalid("jwk", "the proof's jwk has no x")
    try:
        raw = b64url_decode(x, "jwk x")
    except TokenInvalid as error:
        raise DpopInvalid("jwk", error.reason) from None
    if len(raw) != _ED25519_KEY_LENGTH:
        raise DpopInvalid("jwk", "the proof's jwk x is not an Ed25519 key")
    try:
        key = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        raise DpopInvalid("jwk", "the proof's jwk x is not an Ed25519 key") from None
    return jwk_thumbprint(jwk), key


def verify_proof(
    proof: str | None,
    *,
    htm: str,
    htu: str | tuple[str, ...],
    access_token: str | None = None,
    expected_jkt: str | None = None,
    now: float | None = None,
    max_age: int = DEFAULT_MAX_AGE,
    leeway: int = DEFAULT_LEEWAY,
) -> DpopProof:
    """Check a DPoP proof for a request by method `htm` to `htu` (or to any of several
    names of the same URL, e.g. the public one and the one the server sees); with
    `access_token`, ``ath`` must be its hash; with `expected_jkt`, the proof must be by
    that key. Raises `DpopInvalid` naming the first thing wrong. The jti is not checked
    against replay here."""
    if not proof:
        raise DpopInvalid("missing", "no DPoP proof")
    if len(proof) > MAX_PROOF_LENGTH or proof.count(".") != 2:
        raise DpopInvalid("malformed", "the DPoP proof is not a compact JWS")
    jws = ed25519_jws()
    try:
        header = jws.get_unverified_header(proof)
    except jwt.PyJWTError:
        raise DpopInvalid("malformed", "the DPoP proof's header is not readable") from None
    if header.get("typ") != DPOP_TYP:
        raise DpopInvalid("typ", f"the proof's typ is {header.get('typ')!r}, not {DPOP_TYP!r}")
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm not in ACCEPTED_ALGORITHMS:
        raise DpopInvalid("alg", f"the proof's alg is {algorithm!r}, not EdDSA or Ed25519")
    jkt, key = _public_key(header.get("jwk"))
    try:
        payload = jws.decode(proof, key, algorithms=sorted(ACCEPTED_ALGORITHMS))
    except jwt.InvalidSignatureError:
        raise DpopInvalid("signature", "the proof's signature does not verify") from None
    except jwt.PyJWTError:
        raise DpopInvalid("malformed", "the DPoP proof is not a readable JWS") from None
    try:
        claims = json.loads(payload)
    except ValueError:
        raise DpopInvalid("claims", "the proof's claims are not JSON") from None
    if not isinstance(claims, dict):
        raise DpopInvalid("claims", "the proof's claims are not a JSON object")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not 0 < len(jti) <= MAX_JTI_LENGTH:
        raise DpopInvalid("claims", "the proof has no jti (a string of 1 to 128 characters)")
    if claims.get("htm") != htm.upper():
        raise DpopInvalid("htm", f"the proof is for method {claims.get('htm')!r}, not {htm}")
    presented = claims.get("htu")
    names = (htu,) if isinstance(htu, str) else htu
    wanted = {htu_normalize(name) for name in names}
    if not isinstance(presented, str) or htu_normalize(presented) not in wanted:
        raise DpopInvalid("htu", f"the proof is for {presented!r}, not {sorted(wanted)[0]}")
    iat = claims.get("iat")
    if isinstance(iat, bool) or not isinstance(iat, int):
        raise DpopInvalid("iat", "the proof has no integer iat")
    moment = time.time() if now is None else now
    if iat > moment + leeway or iat < moment - max_age - leeway:
        raise DpopInvalid("iat", f"the proof's iat {iat} is outside the accepted window")
    if access_token is not None and claims.get("ath") != access_token_hash(access_token):
        raise DpopInvalid("ath", "the proof's ath is not the hash of the presented access token")
    if expected_jkt is not None and jkt != expected_jkt:
        raise DpopInvalid("jkt", "the proof is signed by a key the token is not bound to")
    return DpopProof(jkt=jkt, jti=jti, iat=iat)


def check_binding(
    claims: IntentClaims | Mapping[str, Any],
    proof: str | None,
    *,
    htm: str,
    htu: str | tuple[str, ...],
    access_token: str | None = None,
    now: float | None = None,
    max_age: int = DEFAULT_MAX_AGE,
    leeway: int = DEFAULT_LEEWAY,
) -> DpopProof | None:
    """Offline check that a request presenting a token is made by the token's holder.

    For a token with ``cnf.jkt`` the proof must verify and be by that key (DpopInvalid
    otherwise); an unbound token needs no proof (None; one sent is not checked). The
    caller keeps the replay store if it wants one (the proof's jti and iat are returned).
    `claims` is verified IntentClaims or the verified payload."""
    if isinstance(claims, IntentClaims):
        jkt = claims.cnf
    else:
        cnf = claims.get("cnf")
        jkt = cnf.get("jkt") if isinstance(cnf, Mapping) else None
        if cnf is not None and not isinstance(jkt, str):
            raise DpopInvalid("jkt", "the token's cnf names no jkt")
    if jkt is None:
        return None
    return verify_proof(
        proof,
        htm=htm,
        htu=htu,
        access_token=access_token,
        expected_jkt=jkt,
        now=now,
        max_age=max_age,
        leeway=leeway,
    )
