"""Signing-key services: creation, encryption at rest, the key that signs, and JWKS.

Private keys are stored as Fernet tokens under ``KEY_ENCRYPTION_KEY`` (comma-separated keys,
newest first, through MultiFernet), so a database dump alone reveals none. A key that cannot
be decrypted is never replaced silently: signing then fails with ``no_signing_key``.
"""

from __future__ import annotations

import base64
import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

import jwt
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.problems import DomainError
from guard.tokens import jwk_thumbprint, public_jwk

from .models import SigningKey

logger = logging.getLogger(__name__)


class EncryptionKeyError(Exception):
    """KEY_ENCRYPTION_KEY is missing or malformed."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encryption_keys() -> MultiFernet:
    """The configured encryption keys, newest first. Raises EncryptionKeyError."""
    raw = [part.strip() for part in settings.KEY_ENCRYPTION_KEY.split(",") if part.strip()]
    if not raw:
        raise EncryptionKeyError("KEY_ENCRYPTION_KEY is not set")
    try:
        return MultiFernet([Fernet(part) for part in raw])
    except (ValueError, TypeError) as exc:
        raise EncryptionKeyError(
            "KEY_ENCRYPTION_KEY must be one or more comma-separated Fernet keys "
            "(32 url-safe base64-encoded bytes each)"
        ) from exc


def max_token_lifetime() -> timedelta:
    """How long a retired key must stay published: the longest token plus clock skew."""
    return timedelta(seconds=settings.PLANGATE_TOKEN_MAX_TTL + settings.PLANGATE_CLOCK_SKEW)


def signing_key_create(*, state: str, now: datetime | None = None) -> SigningKey:
    """Generate an Ed25519 key, encrypt its private half, and store it in ``state``."""
    fernet = encryption_keys()
    private_key = Ed25519PrivateKey.generate()
    public_raw = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    kid = jwk_thumbprint(public_jwk(private_key.public_key()))
    now = now or timezone.now()
    return SigningKey.objects.create(
        kid=kid,
        state=state,
        public_key=_b64url(public_raw),
        private_key_encrypted=fernet.encrypt(private_key.private_bytes_raw()).decode("ascii"),
        created_at=now,
        activated_at=now if state == SigningKey.State.ACTIVE else None,
    )


def signing_keys_bootstrap() -> bool:
    """On a database with no key at all, create the active key and the next one.

    Returns True when it created keys. It never creates a key when any key exists: a key that
    cannot be decrypted must stop signing, not be papered over by a fresh one.
    """
    if SigningKey.objects.exists():
        return False
    try:
        with transaction.atomic():
            signing_key_create(state=SigningKey.State.ACTIVE)
            signing_key_create(state=SigningKey.State.NEXT)
    except IntegrityError:
        # Another process bootstrapped at the same moment; its keys stand.
        return False
    logger.info("created the first signing keys")
    return True


_private_key_cache: dict[str, Ed25519PrivateKey] = {}
_cache_lock = threading.Lock()


def _decrypt_private_key(key: SigningKey) -> Ed25519PrivateKey:
    with _cache_lock:
        cached = _private_key_cache.get(key.kid)
    if cached is not None:
        return cached
    try:
        raw = encryption_keys().decrypt(key.private_key_encrypted.encode("ascii"))
    except InvalidToken as exc:
        raise EncryptionKeyError(
            f"signing key {key.kid} cannot be decrypted with KEY_ENCRYPTION_KEY"
        ) from exc
    private_key = Ed25519PrivateKey.from_private_bytes(raw)
    with _cache_lock:
        _private_key_cache[key.kid] = private_key
    return private_key


def clear_private_key_cache() -> None:
    with _cache_lock:
        _private_key_cache.clear()


@dataclass(frozen=True)
class Signer:
    kid: str
    private_key: Ed25519PrivateKey

    def sign(self, claims: dict) -> str:
        return jwt.encode(
            claims, self.private_key, algorithm="EdDSA", headers={"kid": self.kid, "typ": "JWT"}
        )


def active_signer() -> Signer:
    """The key that signs now, or DomainError ``no_signing_key``."""
    key = SigningKey.objects.filter(state=SigningKey.State.ACTIVE).first()
    if key is None and signing_keys_bootstrap():
        key = SigningKey.objects.filter(state=SigningKey.State.ACTIVE).first()
    if key is None:
        logger.error("no active signing key: refusing to sign")
        raise DomainError("no_signing_key", "No signing key is active; try again shortly.")
    try:
        return Signer(kid=key.kid, private_key=_decrypt_private_key(key))
    except EncryptionKeyError as exc:
        logger.error("refusing to sign: %s", exc)
        raise DomainError(
            "no_signing_key", "The signing key cannot be used; the operator has been told."
        ) from exc


def published_keys(now: datetime | None = None):
    """Keys a verifier may need: next, active, and retired ones whose tokens may still live."""
    now = now or timezone.now()
    return SigningKey.objects.filter(
        Q(state__in=[SigningKey.State.NEXT, SigningKey.State.ACTIVE])
        | Q(state=SigningKey.State.RETIRED, retired_at__gt=now - max_token_lifetime())
    ).order_by("created_at")


def signing_key_public(key: SigningKey) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(_b64url_decode(key.public_key))


def jwks_document(now: datetime | None = None) -> dict:
    keys = []
    for key in published_keys(now):
        jwk = public_jwk(signing_key_public(key))
        keys.append({**jwk, "kid": key.kid, "alg": "EdDSA", "use": "sig"})
    return {"keys": keys}
