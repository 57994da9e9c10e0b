"""JOSE keys: base64url as JOSE spells it (strict, no padding), Ed25519 public JWKs
(RFC 8037), RFC 7638 thumbprints, and the `KeySet` a token is verified against.

The control plane publishes its keys with `public_jwk` and names them by `jwk_thumbprint`;
the guard reads the published JWKS into a `KeySet` (guard.tokens verifies against it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from guard.canonical import canonical_json
from guard.errors import TokenInvalid

__all__ = [
    "ACCEPTED_ALGORITHMS",
    "KeySet",
    "b64url_decode",
    "b64url_encode",
    "jwk_thumbprint",
    "public_jwk",
]

# The two names of the one signature a key or a token may use: `EdDSA` (RFC 8037) and the
# fully specified `Ed25519` (RFC 9864).
ACCEPTED_ALGORITHMS: Final = frozenset({"EdDSA", "Ed25519"})

_BASE64URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_BASE64URL_VALUES: Final = {character: value for value, character in enumerate(_BASE64URL_ALPHABET)}
_URLSAFE_TO_STANDARD: Final = bytes.maketrans(b"-_", b"+/")
_ED25519_KEY_LENGTH: Final = 32

# RFC 7638 required members per key type, already in lexicographic order.
_THUMBPRINT_MEMBERS: Final = {
    "OKP": ("crv", "kty", "x"),
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "oct": ("k", "kty"),
}


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(segment: str, what: str) -> bytes:
    """Strict base64url without padding; rejects any other spelling of the same bytes."""
    remainder = len(segment) % 4
    # `+`, `/` and `=` belong to other spellings; a2b_base64's strict mode rejects every
    # other character outside the alphabet after `-` and `_` are mapped to `+` and `/`.
    if remainder == 1 or "+" in segment or "/" in segment or "=" in segment:
        raise TokenInvalid(f"{what} is not base64url without padding")
    try:
        # bytes.translate is far faster than str.translate on a large payload.
        standard = segment.encode("ascii").translate(_URLSAFE_TO_STANDARD)
        data = binascii.a2b_base64(standard + b"=" * (-remainder % 4), strict_mode=True)
    except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError
        raise TokenInvalid(f"{what} is not base64url without padding") from None
    # The unused low bits of the last character must be zero, so that a token has exactly
    # one spelling (2 characters carry 1 byte + 4 spare bits, 3 carry 2 bytes + 2).
    if remainder and _BASE64URL_VALUES[segment[-1]] & (0x0F if remainder == 2 else 0x03):
        raise TokenInvalid(f"{what} is not canonical base64url")
    return data


def public_jwk(public_key: Ed25519PublicKey) -> dict[str, str]:
    """The public JWK of an Ed25519 key (RFC 8037): ``{"kty": "OKP", "crv": "Ed25519", "x"}``."""
    raw = public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": b64url_encode(raw)}


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """RFC 7638 thumbprint: base64url (no padding) SHA-256 of the required members.

    Raises ValueError for an unknown key type or a missing or non-string member.
    """
    key_type = jwk.get("kty")
    members = _THUMBPRINT_MEMBERS.get(key_type) if isinstance(key_type, str) else None
    if members is None:
        raise ValueError(f"cannot compute a thumbprint for key type {jwk.get('kty')!r}")
    required = {}
    for name in members:
        value = jwk.get(name)
        if not isinstance(value, str):
            raise ValueError(f"JWK member {name!r} is missing or not a string")
        required[name] = value
    # RFC 7638's form (sorted members, no whitespace) is what RFC 8785 produces here.
    return b64url_encode(hashlib.sha256(canonical_json(required)).digest())


def _parse_jwk(jwk: object) -> tuple[str, Ed25519PublicKey] | None:
    """(kid, key) for a usable Ed25519 verification JWK, None for anything else."""
    if not isinstance(jwk, Mapping):
        return None
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        return None
    if jwk.get("use", "sig") != "sig":
        return None
    algorithm = jwk.get("alg")
    if algorithm is not None and (
        not isinstance(algorithm, str) or algorithm not in ACCEPTED_ALGORITHMS
    ):
        return None
    key_operations = jwk.get("key_ops")
    if key_operations is not None and (
        not isinstance(key_operations, list) or "verify" not in key_operations
    ):
        return None
    x = jwk.get("x")
    if not isinstance(x, str):
        return None
    try:
        raw = b64url_decode(x, "x")
    except TokenInvalid:
        return None
    if len(raw) != _ED25519_KEY_LENGTH:
        return None
    try:
        key = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        return None
    kid = jwk.get("kid")
    if kid is None:
        kid = jwk_thumbprint(jwk)
    elif not isinstance(kid, str) or not kid:
        return None
    return kid, key


class KeySet:
    """Ed25519 verification keys by key id, built from a JWKS (``{"keys": [...]}``).

    Keys that are not usable Ed25519 signature keys (other key types, malformed members,
    ``use`` other than ``sig``) are skipped, never fatal: a JWKS may legitimately publish
    keys this guard does not use. A JWK without ``kid`` is filed under its thumbprint.
    When two keys share a kid, the first wins.
    """

    __slots__ = ("_keys",)

    def __init__(self, jwks: Mapping[str, Any] | None = None) -> None:
        self._keys: dict[str, Ed25519PublicKey] = {}
        entries = jwks.get("keys") if isinstance(jwks, Mapping) else None
        if isinstance(entries, list):
            for entry in entries:
                parsed = _parse_jwk(entry)
                if parsed is not None:
                    self._keys.setdefault(*parsed)

    @classmethod
    def from_public_keys(cls, keys: Iterable[Ed25519PublicKey]) -> KeySet:
        """A key set holding `keys`, each under its RFC 7638 thumbprint."""
        return cls({"keys": [public_jwk(key) for key in keys]})

    def get(self, kid: object) -> Ed25519PublicKey | None:
        return self._keys.get(kid) if isinstance(kid, str) else None

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def __contains__(self, kid: object) -> bool:
        return self.get(kid) is not None

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeySet(kids={list(self._keys)!r})"
