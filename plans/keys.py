"""Signing-key services: the key lifecycle, encryption at rest, the key that signs, and JWKS.

A key is ``next`` (published, not yet signing), then ``active`` (the one key that signs),
then ``retired`` (published while tokens it signed may live), then deleted. ``revoked`` is
the emergency exit from any state: the key leaves JWKS at once.

Private keys are stored as Fernet tokens under ``KEY_ENCRYPTION_KEY`` (comma-separated keys,
newest first, through MultiFernet), so a database dump alone reveals none. A key that cannot
be decrypted is never replaced silently: signing then fails with ``no_signing_key``, and no
rotation creates a key until the configured encryption key decrypts the keys that sign.

Every service that changes key states first locks every key row, in kid order (see
``_lock_all_keys``), so two rotations, or a rotation and a revocation, run one after the
other and the second sees what the first did. See docs/keys.md.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import jwt
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connections, router, transaction
from django.db.models import Q
from django.utils import timezone

from controlplane.problems import DomainError
from guard.tokens import jwk_thumbprint, public_jwk

from .models import SigningKey

logger = logging.getLogger(__name__)

State = SigningKey.State


class EncryptionKeyError(Exception):
    """KEY_ENCRYPTION_KEY is missing or malformed, or cannot decrypt a stored key."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- Encryption at rest -----------------------------------------------------------------


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


def _decrypt_raw(key: SigningKey, fernet: MultiFernet | None = None) -> bytes:
    """The raw private seed of ``key``, or EncryptionKeyError naming the kid."""
    if not key.private_key_encrypted:
        raise EncryptionKeyError(f"signing key {key.kid} ({key.state}) has no private key")
    try:
        return (fernet or encryption_keys()).decrypt(key.private_key_encrypted.encode("ascii"))
    except InvalidToken as exc:
        raise EncryptionKeyError(
            f"signing key {key.kid} ({key.state}) cannot be decrypted with KEY_ENCRYPTION_KEY"
        ) from exc


def _require_decryptable(key: SigningKey) -> None:
    """Prove the configured encryption key is the one ``key`` was stored under.

    Called before a key is promoted and before a new key is created next to a key that
    signs: with a wrong encryption key, rotations would otherwise end up signing with keys
    created under it, silently abandoning the real ones.
    """
    _decrypt_raw(key)


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
            _decrypt_raw(SigningKey(kid=kid, state=state, private_key_encrypted=encrypted), fernet)
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


# --- Creating keys ------------------------------------------------------------------------


def max_token_lifetime() -> timedelta:
    """How long a retired key must stay published: the longest token plus clock skew."""
    return timedelta(seconds=settings.PLANGATE_TOKEN_MAX_TTL + settings.PLANGATE_CLOCK_SKEW)


def rotation_period() -> timedelta:
    """A scheduled rotation is due once the active key has signed for this long.

    Beat does not tick once a period but checks every ``KEY_ROTATION_CHECK_SECONDS`` whether
    a rotation is due, so a tick lost to a broker or worker outage costs one check interval,
    not a period, and a rotation is at most one check interval late. The same rule makes
    every other check before the period has passed (duplicate ticks, a second beat, a retried
    task, ``rotate_keys --if-due``) a no-op.
    """
    return timedelta(seconds=settings.KEY_ROTATION_SECONDS)


def publication_delay() -> timedelta:
    """How long a next key must have been in JWKS before it may sign.

    One JWKS cache lifetime: by then every verifier's cached copy of the JWKS lists it.
    """
    return timedelta(seconds=settings.PLANGATE_JWKS_MAX_AGE)


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
        activated_at=now if state == State.ACTIVE else None,
    )


def signing_keys_bootstrap() -> bool:
    """On a database with no key at all, create the active key and the next one.

    Returns True when it created keys. It never creates a key when any key exists: a key that
    cannot be decrypted must stop signing, not be papered over by a fresh one. Raises
    EncryptionKeyError when KEY_ENCRYPTION_KEY is missing or malformed.
    """
    if SigningKey.objects.exists():
        return False
    encryption_keys()
    try:
        with transaction.atomic():
            signing_key_create(state=State.ACTIVE)
            signing_key_create(state=State.NEXT)
    except IntegrityError:
        # Another process bootstrapped at the same moment; its keys stand.
        return False
    logger.info("created the first signing keys")
    return True


# --- Lifecycle ------------------------------------------------------------------------------


def _lock_all_keys() -> None:
    """Lock every key row, in kid order, for the rest of the transaction.

    Every writer of key states takes these locks first and in the same order, so writers
    never deadlock and run one after the other; each then re-reads the states it changes.
    On SQLite, where ``select_for_update`` is a no-op, the settings' IMMEDIATE transactions
    serialise writers the same way. The table holds a handful of rows.
    """
    list(SigningKey.objects.select_for_update().order_by("kid").values_list("kid", flat=True))


def _signing_slots() -> tuple[SigningKey | None, SigningKey | None]:
    keys = {
        key.state: key for key in SigningKey.objects.filter(state__in=[State.ACTIVE, State.NEXT])
    }
    return keys.get(State.ACTIVE), keys.get(State.NEXT)


def _fill_signing_slots(*, now: datetime) -> tuple[str | None, str | None]:
    """Make sure a key is active and a key is next. Returns (activated kid, created next kid).

    With no active key, the next key is promoted whatever its age: nothing signs otherwise.
    New keys are only created when the configured encryption key decrypts the key that signs
    (or when no key is active or next at all, which only an explicit revocation leads to).
    """
    active, next_key = _signing_slots()
    activated: str | None = None
    if active is None:
        if next_key is not None:
            _require_decryptable(next_key)
            # The old active key left its state first, so the constraint never sees two.
            SigningKey.objects.filter(pk=next_key.pk).update(state=State.ACTIVE, activated_at=now)
            activated = next_key.kid
            next_key = None
        else:
            activated = signing_key_create(state=State.ACTIVE, now=now).kid
    elif next_key is None:
        _require_decryptable(active)
    created: str | None = None
    if next_key is None:
        created = signing_key_create(state=State.NEXT, now=now).kid
    return activated, created


def _retired_keys_to_remove(now: datetime) -> list[str]:
    """Retired keys whose every token has expired: retired before now - (max TTL + skew)."""
    return list(
        SigningKey.objects.filter(
            state=State.RETIRED, retired_at__lte=now - max_token_lifetime()
        ).values_list("kid", flat=True)
    )


@dataclass(frozen=True)
class RotationResult:
    """What a call to ``signing_key_rotate`` did.

    ``outcome`` is one of the ``RotationResult.*`` constants; ``rotated`` is True when a new
    key signs now.
    """

    ROTATED = "rotated"
    BOOTSTRAPPED = "bootstrapped"
    NEXT_KEY_CREATED = "next_key_created"
    RECENTLY_ROTATED = "recently_rotated"
    NEXT_KEY_TOO_YOUNG = "next_key_too_young"
    NOTHING_TO_DO = "nothing_to_do"

    outcome: str
    retired: str | None = None
    activated: str | None = None
    created: str | None = None
    removed: tuple[str, ...] = field(default_factory=tuple)
    detail: str = ""

    @property
    def rotated(self) -> bool:
        return self.activated is not None

    def describe(self) -> str:
        parts = [self.detail] if self.detail else []
        if self.retired:
            parts.append(f"retired {self.retired}")
        if self.activated:
            parts.append(f"activated {self.activated}")
        if self.created:
            parts.append(f"published next key {self.created}")
        if self.removed:
            parts.append(f"removed {len(self.removed)} expired key(s): {', '.join(self.removed)}")
        return f"{self.outcome}: " + ("; ".join(parts) if parts else "no change")


def signing_key_rotate(*, now: datetime | None = None, force: bool = False) -> RotationResult:
    """Retire the active key, activate the next one, publish a new next key, and delete
    retired keys whose every token has expired. One transaction.

    Safe to run from several workers or commands at once: the key rows are locked first, so
    concurrent rotations run one after the other and the later ones find the work done.
    Two rules make a repeated rotation a no-op:

    * unless ``force`` (a person asked), the rotation is skipped until the active key was
      activated a whole rotation period ago (``rotation_period``);
    * always, the next key must have been published for one JWKS cache lifetime
      (``PLANGATE_JWKS_MAX_AGE``) before it signs, so no verifier holds a cached JWKS
      without it. A younger next key is not promoted; the emergency door is revocation.

    Raises EncryptionKeyError (naming the kid) before writing anything when the configured
    encryption key cannot decrypt the key it would promote.
    """
    encryption_keys()
    if not SigningKey.objects.exists():
        if signing_keys_bootstrap():
            active, next_key = _signing_slots()
            return RotationResult(
                RotationResult.BOOTSTRAPPED,
                activated=active.kid if active else None,
                created=next_key.kid if next_key else None,
                detail="created the first keys",
            )
        return RotationResult(RotationResult.NOTHING_TO_DO, detail="another process created keys")

    with transaction.atomic():
        _lock_all_keys()
        now = now or timezone.now()
        removed = tuple(_retired_keys_to_remove(now))
        SigningKey.objects.filter(kid__in=removed).delete()
        result = _rotate_locked(now=now, force=force, removed=removed)
    if result.retired:
        _forget_private_key(result.retired)
    logger.info("signing keys: %s", result.describe())
    return result


def _rotate_locked(*, now: datetime, force: bool, removed: tuple[str, ...]) -> RotationResult:
    """The rotation proper, with every key row locked (see ``signing_key_rotate``)."""
    active, next_key = _signing_slots()
    retired: str | None = None
    if active is not None and next_key is not None:
        activated_at = active.activated_at or active.created_at
        if not force and activated_at > now - rotation_period():
            return RotationResult(
                RotationResult.RECENTLY_ROTATED,
                removed=removed,
                detail=f"active key {active.kid} was activated at {_iso(activated_at)}",
            )
        if next_key.created_at > now - publication_delay():
            ready_at = next_key.created_at + publication_delay()
            return RotationResult(
                RotationResult.NEXT_KEY_TOO_YOUNG,
                removed=removed,
                detail=f"next key {next_key.kid} may sign from {_iso(ready_at)}, "
                "one JWKS cache lifetime after it was published",
            )
        _require_decryptable(next_key)
        # Order matters: the active key leaves ``active`` before the next key enters it,
        # and the next key leaves ``next`` before a new one is created.
        SigningKey.objects.filter(pk=active.pk).update(
            state=State.RETIRED, retired_at=now, private_key_encrypted=""
        )
        retired = active.kid

    activated, created = _fill_signing_slots(now=now)
    if activated:
        outcome = RotationResult.ROTATED
    elif created:
        outcome = RotationResult.NEXT_KEY_CREATED
    else:
        outcome = RotationResult.NOTHING_TO_DO
    return RotationResult(
        outcome, retired=retired, activated=activated, created=created, removed=removed
    )


def signing_key_revoke(*, kid: str, now: datetime | None = None) -> SigningKey:
    """Withdraw a key at once: it leaves JWKS, and tokens it signed no longer verify or refresh.

    When it was the active key, the next key signs at once (or a fresh key when there is no
    next key), and a new next key is published. The private half is erased. The revocation
    stands even when no replacement can be made (an unusable KEY_ENCRYPTION_KEY): that is
    logged, and signing answers ``no_signing_key`` until the operator fixes it.
    Raises DomainError ``not_found`` for an unknown kid.
    """
    with transaction.atomic():
        _lock_all_keys()
        key = SigningKey.objects.filter(kid=kid).first()
        if key is None:
            raise DomainError("not_found", f"No signing key {kid}.")
        if key.state == State.REVOKED:
            return key
        now = now or timezone.now()
        previous_state = key.state
        key.state = State.REVOKED
        key.revoked_at = now
        key.private_key_encrypted = ""
        key.save(update_fields=["state", "revoked_at", "private_key_encrypted"])
        activated = created = None
        try:
            with transaction.atomic():
                activated, created = _fill_signing_slots(now=now)
        except EncryptionKeyError as exc:
            logger.error(
                "revoked signing key %s but cannot put a replacement in its place: %s",
                kid,
                exc,
            )
    _forget_private_key(kid)
    logger.warning(
        "revoked signing key %s (was %s)%s%s",
        kid,
        previous_state,
        f"; {activated} signs now" if activated else "",
        f"; published next key {created}" if created else "",
    )
    return key


def signing_keys_reencrypt() -> int:
    """Re-encrypt every stored private key under the newest KEY_ENCRYPTION_KEY.

    Returns how many keys were rewritten; keys already under the newest key are left as
    they are, so a second run returns 0. Writes nothing when any key cannot be decrypted.
    """
    keys = _encryption_key_list()
    newest, every = keys[0], MultiFernet(keys)
    rewritten: list[tuple[str, str]] = []
    with transaction.atomic():
        _lock_all_keys()
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
    logger.info(
        "re-encrypted %d signing key(s) under the newest KEY_ENCRYPTION_KEY", len(rewritten)
    )
    return len(rewritten)


# --- Signing ------------------------------------------------------------------------------

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


def _decrypt_private_key(key: SigningKey) -> Ed25519PrivateKey:
    fingerprint = _cache_fingerprint(key)
    with _cache_lock:
        cached = _private_key_cache.get(key.kid)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    private_key = Ed25519PrivateKey.from_private_bytes(_decrypt_raw(key))
    with _cache_lock:
        _private_key_cache[key.kid] = (fingerprint, private_key)
    return private_key


def _forget_private_key(kid: str) -> None:
    with _cache_lock:
        _private_key_cache.pop(kid, None)


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
    """The key that signs now, or DomainError ``no_signing_key``.

    Reads the active key from the database on every call: a rotation or revocation by any
    process takes effect at the next signature.
    """
    key = SigningKey.objects.filter(state=State.ACTIVE).first()
    if key is None:
        try:
            if signing_keys_bootstrap():
                key = SigningKey.objects.filter(state=State.ACTIVE).first()
        except EncryptionKeyError as exc:
            logger.error("refusing to sign: no signing key exists and %s", exc)
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


# --- Publishing -----------------------------------------------------------------------------


def published_keys(now: datetime | None = None):
    """Keys a verifier may need: next, active, and retired ones whose tokens may still live."""
    now = now or timezone.now()
    return SigningKey.objects.filter(
        Q(state__in=[State.NEXT, State.ACTIVE])
        | Q(state=State.RETIRED, retired_at__gt=now - max_token_lifetime())
    ).order_by("created_at")


def signing_key_public(key: SigningKey) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(_b64url_decode(key.public_key))


def jwks_document(now: datetime | None = None) -> dict:
    """The JWK Set. On a database with no key yet it creates the first keys, so a verifier
    that fetches the JWKS before the first token is signed already caches both."""
    if not SigningKey.objects.exists():
        try:
            signing_keys_bootstrap()
        except EncryptionKeyError as exc:
            logger.error("no signing key to publish: %s", exc)
    keys = []
    for key in published_keys(now):
        jwk = public_jwk(signing_key_public(key))
        keys.append({**jwk, "kid": key.kid, "alg": "EdDSA", "use": "sig"})
    return {"keys": keys}
