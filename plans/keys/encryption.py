"""Encryption at rest: private signing keys are stored as Fernet tokens.

The tokens are made under ``KEY_ENCRYPTION_KEY`` (comma-separated keys, newest first,
through MultiFernet), so a database dump alone reveals no private key. This module also
keeps the decrypted private keys a process has used, keyed by a fingerprint of the
ciphertext and of the encryption key, so that the key lifecycle can drop a key's decrypted
copy at the moment it erases the stored one.
"""

from __future__ import annotations

import hashlib
import logging
import threading

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router, transaction

from kernel.problems import Code, DomainError

from ..models import SigningKey
from .activity import signing_keys_change_record
from .locking import lock_all_keys

logger = logging.getLogger(__name__)

State = SigningKey.State


class EncryptionKeyError(DomainError):
    """KEY_ENCRYPTION_KEY is missing or malformed, or cannot decrypt a stored key.

    A DomainError (``no_signing_key``: nothing can sign), so every door catches the one
    error type. Its detail is for operators (it names the setting and the kid); the signer
    answers clients with a detail of its own.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(Code.NO_SIGNING_KEY, detail)

    def __str__(self) -> str:
        # Log lines and admin messages read as the operator's sentence, without the code.
        return self.detail


def _encryption_key_list() -> list[Fernet]:
    raw = [part.strip() for part in settings.KEY_ENCRYPTION_KEY.split(",") if part.strip()]
    if not raw:
        raise EncryptionKeyError("KEY_ENCRYPTION_KEY is not set")
    try:
        return [Fernet(part) for part in raw]
    except (ValueError, TypeError) as exc:
        raise EncryptionKeyError(
            "KEY_ENCRYPTION_KEY must be one or more comma-separated Fernet keys "
            "(32 url-safe base64-encoded bytes each)"
        ) from exc


def encryption_keys() -> MultiFernet:
    """The configured encryption keys, newest first. Raises EncryptionKeyError."""
    return MultiFernet(_encryption_key_list())


def decrypt_seed(key: SigningKey, fernet: MultiFernet | None = None) -> bytes:
    """The raw private seed of ``key``, or EncryptionKeyError naming the kid."""
    if not key.private_key_encrypted:
        raise EncryptionKeyError(f"signing key {key.kid} ({key.state}) has no private key")
    try:
        return (fernet or encryption_keys()).decrypt(key.private_key_encrypted.encode("ascii"))
    except InvalidToken as exc:
        raise EncryptionKeyError(
            f"signing key {key.kid} ({key.state}) cannot be decrypted with KEY_ENCRYPTION_KEY"
        ) from exc


def require_decryptable(key: SigningKey) -> None:
    """Prove the configured encryption key is the one ``key`` was stored under.

    Called before a key is promoted and before a new key is created next to a key that
    signs: with a wrong encryption key, rotations would otherwise end up signing with keys
    created under it, silently abandoning the real ones.
    """
    decrypt_seed(key)


def require_authentic(key: SigningKey) -> None:
    """Prove ``key``'s stored private half was made under the configured encryption key,
    without decrypting it: only the Fernet token's HMAC is checked. For read-only probes.

    Raises EncryptionKeyError naming the kid, as ``decrypt_seed`` would.
    """
    if not key.private_key_encrypted:
        raise EncryptionKeyError(f"signing key {key.kid} ({key.state}) has no private key")
    try:
        encryption_keys().extract_timestamp(key.private_key_encrypted.encode("ascii"))
    except InvalidToken as exc:
        raise EncryptionKeyError(
            f"signing key {key.kid} ({key.state}) cannot be decrypted with KEY_ENCRYPTION_KEY"
        ) from exc


def encryption_key_problem() -> str | None:
    """Why KEY_ENCRYPTION_KEY is not usable, or None when it is (or when we cannot tell).

    Checks the setting itself, then, when the database answers and is migrated, that it
    decrypts the active and next keys. A database that is down, not migrated or not
    reachable from here (tests) is not this function's business: it answers None.
    """
    try:
        fernet = encryption_keys()
    except EncryptionKeyError as exc:
        return str(exc)
    try:
        connection = connections[router.db_for_read(SigningKey)]
        if SigningKey._meta.db_table not in connection.introspection.table_names():
            return None
        # Only the two oldest columns: a pending migration must not break this probe.
        rows = list(
            SigningKey.objects.filter(state__in=[State.ACTIVE, State.NEXT])
            .order_by("state")
            .values_list("kid", "state", "private_key_encrypted")
        )
    except Exception as exc:  # a probe: the database's own trouble is reported elsewhere
        logger.warning("could not read the signing keys to check KEY_ENCRYPTION_KEY: %s", exc)
        return None
    for kid, state, encrypted in rows:
        try:
            decrypt_seed(SigningKey(kid=kid, state=state, private_key_encrypted=encrypted), fernet)
        except EncryptionKeyError as exc:
            return str(exc)
    return None


def require_usable_encryption_key() -> None:
    """Raise ImproperlyConfigured unless KEY_ENCRYPTION_KEY can sign. For process start-up.

    Leaves no database connection open behind it (outside a transaction): web and worker
    processes may fork after this and must not share a connection.
    """
    try:
        problem = encryption_key_problem()
    finally:
        for connection in connections.all(initialized_only=True):
            if not connection.in_atomic_block:
                connection.close()
    if problem is not None:
        logger.critical("refusing to start: %s", problem)
        raise ImproperlyConfigured(
            f"{problem}. Plangate will not start without the Fernet key(s) its signing keys "
            "are stored under: set KEY_ENCRYPTION_KEY (see docs/keys.md). `make run` "
            "writes a local one to var/local.env."
        )


def signing_keys_reencrypt() -> int:
    """Re-encrypt every stored private key under the newest KEY_ENCRYPTION_KEY.

    Returns how many keys were rewritten; keys already under the newest key are left as
    they are, so a second run returns 0. Writes nothing when any key cannot be decrypted.
    """
    keys = _encryption_key_list()
    newest, every = keys[0], MultiFernet(keys)
    rewritten: list[tuple[str, str]] = []
    with transaction.atomic():
        lock_all_keys()
        failures = []
        for kid, state, encrypted in SigningKey.objects.exclude(
            private_key_encrypted=""
        ).values_list("kid", "state", "private_key_encrypted"):
            token = encrypted.encode("ascii")
            try:
                newest.decrypt(token)
                continue
            except InvalidToken:
                pass
            try:
                rewritten.append((kid, every.rotate(token).decode("ascii")))
            except InvalidToken:
                failures.append(f"{kid} ({state})")
        if failures:
            raise EncryptionKeyError(
                "KEY_ENCRYPTION_KEY cannot decrypt signing key(s) " + ", ".join(failures)
            )
        for kid, encrypted in rewritten:
            SigningKey.objects.filter(pk=kid).update(private_key_encrypted=encrypted)
        if rewritten:
            signing_keys_change_record(
                action="reencrypted",
                changes={},
                extra={"reencrypted": sorted(kid for kid, _ in rewritten)},
            )
    logger.info(
        "re-encrypted %d signing key(s) under the newest KEY_ENCRYPTION_KEY", len(rewritten)
    )
    return len(rewritten)


# --- Decrypted private keys, per process ------------------------------------------------------

# kid -> (fingerprint of the ciphertext and encryption key it was decrypted with, key).
# The fingerprint makes a changed KEY_ENCRYPTION_KEY or ciphertext decrypt again rather
# than reuse the old result. Only the active key is ever decrypted, and ``active_signer``
# reads which key is active from the database on every call, so a revoked or retired key
# never signs from this cache, in this process or any other.
_private_key_cache: dict[str, tuple[str, Ed25519PrivateKey]] = {}
_cache_lock = threading.Lock()


def _cache_fingerprint(key: SigningKey) -> str:
    material = f"{key.private_key_encrypted}\n{settings.KEY_ENCRYPTION_KEY}".encode()
    return hashlib.sha256(material).hexdigest()


def private_key_decrypt(key: SigningKey) -> Ed25519PrivateKey:
    """``key``'s private key, decrypted once per process (and again if either the stored
    ciphertext or KEY_ENCRYPTION_KEY changed). Raises EncryptionKeyError naming the kid."""
    fingerprint = _cache_fingerprint(key)
    with _cache_lock:
        cached = _private_key_cache.get(key.kid)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    private_key = Ed25519PrivateKey.from_private_bytes(decrypt_seed(key))
    with _cache_lock:
        _private_key_cache[key.kid] = (fingerprint, private_key)
    return private_key


def private_key_forget(kid: str) -> None:
    """Drop this process's decrypted copy of ``kid`` (its stored private half was erased)."""
    with _cache_lock:
        _private_key_cache.pop(kid, None)


def clear_private_key_cache() -> None:
    with _cache_lock:
        _private_key_cache.clear()
