"""The key lifecycle: creating the first keys, rotating, revoking, and deleting old keys.

A key is ``next`` (published, not yet signing), then ``active`` (the one key that signs),
then ``retired`` (published while tokens it signed may live), then deleted. ``revoked`` is
the emergency exit from any state: the key leaves JWKS at once.

Every service here that changes key states first locks every key row, in kid order (see
``lock_all_keys``), so two rotations, or a rotation and a revocation, run one after the
other and the second sees what the first did. Each returns what it changed, so the doors
(the admin, the commands, the task) report it without reading the keys again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.db import IntegrityError, transaction
from django.dispatch import Signal
from django.utils import timezone

from guard.jwk import b64url_encode, jwk_thumbprint, public_jwk
from guard.utc import isoformat_z
from kernel.problems import Code, DomainError

from ..models import SigningKey
from .activity import key_changes, signing_keys_change_record
from .encryption import (
    EncryptionKeyError,
    encryption_keys,
    private_key_forget,
    require_decryptable,
)
from .locking import lock_all_keys
from .results import KeyChange, RevocationResult, RotationResult

logger = logging.getLogger(__name__)

State = SigningKey.State


#: sent by the scheduled rotation's task (plans.tasks) when a run fails, with ``detail``
#: (the error): notify's alerts listen. A failed run writes no row to read it from.
signing_key_rotation_failed = Signal()


def _seconds(moment: datetime) -> str:
    return isoformat_z(moment, timespec="seconds")


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


def rotation_due_at(active: SigningKey) -> datetime:
    """When a scheduled rotation of the ``active`` key is due: a rotation period after it
    began signing."""
    return (active.activated_at or active.created_at) + rotation_period()


def next_key_signs_from(next_key: SigningKey) -> datetime:
    """The earliest a ``next`` key may sign: one JWKS cache lifetime after it was published.
    Before then it is too young, and "Rotate now" can only wait; revocation is the
    emergency door."""
    return next_key.created_at + publication_delay()


@dataclass(frozen=True)
class RotationSchedule:
    """When the keys that sign next may and will change, for the pages that show it."""

    active_kid: str | None
    rotation_due_at: datetime | None
    next_kid: str | None
    next_key_signs_from: datetime | None

    def rotate_now_possible(self, now: datetime) -> bool:
        """Whether a forced rotation would promote the next key at ``now``."""
        return self.next_key_signs_from is None or self.next_key_signs_from <= now


def rotation_schedule() -> RotationSchedule:
    """The active and next keys' schedule, read in one query."""
    active, next_key = _signing_slots()
    return RotationSchedule(
        active_kid=active.kid if active else None,
        rotation_due_at=rotation_due_at(active) if active else None,
        next_kid=next_key.kid if next_key else None,
        next_key_signs_from=next_key_signs_from(next_key) if next_key else None,
    )


# --- Creating keys ------------------------------------------------------------------------


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
        public_key=b64url_encode(public_raw),
        private_key_encrypted=fernet.encrypt(private_key.private_bytes_raw()).decode("ascii"),
        created_at=now,
        activated_at=now if state == State.ACTIVE else None,
    )


def _create_first_keys() -> tuple[str, str] | None:
    """(active kid, next kid) when this call created the first keys, else None."""
    if SigningKey.objects.exists():
        return None
    encryption_keys()
    try:
        with transaction.atomic():
            active = signing_key_create(state=State.ACTIVE)
            next_key = signing_key_create(state=State.NEXT)
            signing_keys_change_record(
                action=RotationResult.BOOTSTRAPPED,
                kid=active.kid,
                changes=key_changes(
                    [
                        KeyChange(active.kid, None, State.ACTIVE),
                        KeyChange(next_key.kid, None, State.NEXT),
                    ]
                ),
            )
    except IntegrityError:
        # Another process bootstrapped at the same moment; its keys stand.
        return None
    logger.info("created the first signing keys")
    return active.kid, next_key.kid


def signing_keys_bootstrap() -> bool:
    """On a database with no key at all, create the active key and the next one.

    Returns True when it created keys. It never creates a key when any key exists: a key that
    cannot be decrypted must stop signing, not be papered over by a fresh one. Raises
    EncryptionKeyError when KEY_ENCRYPTION_KEY is missing or malformed. Called by the writes
    that need a key (the first signature, a rotation), never by a read.
    """
    return _create_first_keys() is not None


# --- Filling the active and next slots -------------------------------------------------------


def _signing_slots() -> tuple[SigningKey | None, SigningKey | None]:
    keys = {
        key.state: key for key in SigningKey.objects.filter(state__in=[State.ACTIVE, State.NEXT])
    }
    return keys.get(State.ACTIVE), keys.get(State.NEXT)


@dataclass(frozen=True)
class _SlotsFilled:
    active: str | None  # the kid that signs afterwards
    activated: str | None
    created: str | None
    changes: tuple[KeyChange, ...]


def _fill_signing_slots(*, now: datetime) -> _SlotsFilled:
    """Make sure a key is active and a key is next.

    With no active key, the next key is promoted whatever its age: nothing signs otherwise.
    New keys are only created when the configured encryption key decrypts the key that signs
    (or when no key is active or next at all, which only an explicit revocation leads to).
    """
    active, next_key = _signing_slots()
    activated: str | None = None
    changes: list[KeyChange] = []
    if active is None:
        if next_key is not None:
            require_decryptable(next_key)
            # The old active key left its state first, so the constraint never sees two.
            SigningKey.objects.filter(pk=next_key.pk).update(state=State.ACTIVE, activated_at=now)
            activated = next_key.kid
            changes.append(KeyChange(activated, State.NEXT, State.ACTIVE))
            next_key = None
        else:
            activated = signing_key_create(state=State.ACTIVE, now=now).kid
            changes.append(KeyChange(activated, None, State.ACTIVE))
    elif next_key is None:
        require_decryptable(active)
    created: str | None = None
    if next_key is None:
        created = signing_key_create(state=State.NEXT, now=now).kid
        changes.append(KeyChange(created, None, State.NEXT))
    return _SlotsFilled(
        active=activated or (active.kid if active else None),
        activated=activated,
        created=created,
        changes=tuple(changes),
    )


def _retired_keys_to_remove(now: datetime) -> list[str]:
    """Retired keys whose every token has expired: retired before now - (max TTL + skew)."""
    return list(
        SigningKey.objects.filter(
            state=State.RETIRED, retired_at__lte=now - max_token_lifetime()
        ).values_list("kid", flat=True)
    )


# --- Rotation -------------------------------------------------------------------------------


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

    On a database with no key at all it creates the first two keys (``bootstrapped``).
    Raises EncryptionKeyError (naming the kid) before writing anything when the configured
    encryption key cannot decrypt the key it would promote.
    """
    encryption_keys()
    if not SigningKey.objects.exists():
        first = _create_first_keys()
        if first is None:
            return RotationResult(
                RotationResult.NOTHING_TO_DO, detail="another process created keys"
            )
        active, next_kid = first
        return RotationResult(
            RotationResult.BOOTSTRAPPED,
            activated=active,
            created=next_kid,
            detail="created the first keys",
            changes=(KeyChange(active, None, State.ACTIVE), KeyChange(next_kid, None, State.NEXT)),
        )

    with transaction.atomic():
        lock_all_keys()
        now = now or timezone.now()
        removed = tuple(_retired_keys_to_remove(now))
        SigningKey.objects.filter(kid__in=removed).delete()
        result = _rotate_locked(now=now, force=force, removed=removed)
        signing_keys_change_record(
            action=result.outcome if result.changes else "removed",
            kid=result.activated or result.created or "",
            changes=key_changes(result.changes, result.removed),
        )
    if result.retired:
        private_key_forget(result.retired)
    logger.info("signing keys: %s", result.describe())
    return result


def _rotate_locked(*, now: datetime, force: bool, removed: tuple[str, ...]) -> RotationResult:
    """The rotation proper, with every key row locked (see ``signing_key_rotate``)."""
    active, next_key = _signing_slots()
    retired: str | None = None
    changes: list[KeyChange] = []
    if active is not None and next_key is not None:
        activated_at = active.activated_at or active.created_at
        if not force and rotation_due_at(active) > now:
            return RotationResult(
                RotationResult.RECENTLY_ROTATED,
                removed=removed,
                detail=f"active key {active.kid} was activated at {_seconds(activated_at)}",
            )
        ready_at = next_key_signs_from(next_key)
        if ready_at > now:
            return RotationResult(
                RotationResult.NEXT_KEY_TOO_YOUNG,
                removed=removed,
                detail=f"next key {next_key.kid} may sign from {_seconds(ready_at)}, "
                "one JWKS cache lifetime after it was published",
            )
        require_decryptable(next_key)
        # Order matters: the active key leaves ``active`` before the next key enters it,
        # and the next key leaves ``next`` before a new one is created.
        SigningKey.objects.filter(pk=active.pk).update(
            state=State.RETIRED, retired_at=now, private_key_encrypted=""
        )
        retired = active.kid
        changes.append(KeyChange(retired, State.ACTIVE, State.RETIRED))

    filled = _fill_signing_slots(now=now)
    if filled.activated:
        outcome = RotationResult.ROTATED
    elif filled.created:
        outcome = RotationResult.NEXT_KEY_CREATED
    else:
        outcome = RotationResult.NOTHING_TO_DO
    return RotationResult(
        outcome,
        retired=retired,
        activated=filled.activated,
        created=filled.created,
        removed=removed,
        changes=(*changes, *filled.changes),
    )


# --- Revocation -----------------------------------------------------------------------------


def signing_key_revoke(*, kid: str, now: datetime | None = None) -> RevocationResult:
    """Withdraw a key at once: it leaves JWKS, and tokens it signed no longer verify or refresh.

    When it was the active key, the next key signs at once (or a fresh key when there is no
    next key), and a new next key is published. The private half is erased. The revocation
    stands even when no replacement can be made (an unusable KEY_ENCRYPTION_KEY): that is
    logged, and signing answers ``no_signing_key`` until the operator fixes it.
    Raises DomainError ``not_found`` for an unknown kid.
    """
    with transaction.atomic():
        lock_all_keys()
        key = SigningKey.objects.filter(kid=kid).first()
        if key is None:
            raise DomainError(Code.NOT_FOUND, f"No signing key {kid}.")
        if key.state == State.REVOKED:
            signing = (
                SigningKey.objects.filter(state=State.ACTIVE).values_list("kid", flat=True).first()
            )
            # Set together with the revoked state below, so a revoked key always has it.
            revoked_at = cast(datetime, key.revoked_at)
            return RevocationResult(
                kid=kid, previous_state=State.REVOKED, revoked_at=revoked_at, signing=signing
            )
        now = now or timezone.now()
        previous_state = key.state
        key.state = State.REVOKED
        key.revoked_at = now
        key.private_key_encrypted = ""
        key.save(update_fields=["state", "revoked_at", "private_key_encrypted"])
        replacement_error = ""
        try:
            with transaction.atomic():
                filled = _fill_signing_slots(now=now)
        except EncryptionKeyError as exc:
            logger.error(
                "revoked signing key %s but cannot put a replacement in its place: %s", kid, exc
            )
            replacement_error = str(exc)
            # The savepoint rolled back: the key that signed before still does, unless it is
            # the one just revoked.
            active, _ = _signing_slots()
            filled = _SlotsFilled(active.kid if active else None, None, None, ())
        result = RevocationResult(
            kid=kid,
            previous_state=previous_state,
            revoked_at=now,
            signing=filled.active,
            activated=filled.activated,
            created=filled.created,
            changes=(KeyChange(kid, previous_state, State.REVOKED), *filled.changes),
            replacement_error=replacement_error,
        )
        signing_keys_change_record(
            action="revoked",
            kid=kid,
            changes=key_changes(result.changes),
            extra={"signing": result.signing}
            | ({"replacement_error": replacement_error} if replacement_error else {}),
        )
    private_key_forget(kid)
    logger.warning(
        "revoked signing key %s (was %s)%s%s",
        kid,
        previous_state,
        f"; {result.activated} signs now" if result.activated else "",
        f"; published next key {result.created}" if result.created else "",
    )
    return result
