"""The signing-key lifecycle: next -> active -> retired -> removed, and revoked at once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.test import override_settings
from django.utils import timezone

from kernel.problems import Code, DomainError
from plans.keys import (
    EncryptionKeyError,
    RotationResult,
    active_signer,
    clear_private_key_cache,
    jwks_document,
    max_token_lifetime,
    signing_key_revoke,
    signing_key_rotate,
    signing_keys_bootstrap,
)
from plans.models import SigningKey

from .keys_helpers import OTHER_ENCRYPTION_KEY, age_keys, kid_in, snapshot, states

DAY = 86400
JWKS_MAX_AGE = 300

pytestmark = pytest.mark.django_db


def published_kids(now=None) -> set[str]:
    return {key["kid"] for key in jwks_document(now)["keys"]}


@pytest.fixture
def keys() -> tuple[str, str]:
    """Bootstrapped keys, old enough for any rotation: (active kid, next kid)."""
    signing_keys_bootstrap()
    age_keys(DAY)
    return kid_in("active"), kid_in("next")


def test_the_first_start_creates_an_active_key_and_a_published_next_key(db):
    assert signing_keys_bootstrap() is True

    assert sorted(states().values()) == ["active", "next"]
    assert published_kids() == set(states())
    assert signing_keys_bootstrap() is False
    assert SigningKey.objects.count() == 2


def test_rotation_retires_the_active_key_activates_the_next_and_publishes_a_new_next(keys):
    old_active, old_next = keys

    result = signing_key_rotate()

    assert result.outcome == RotationResult.ROTATED and result.rotated
    assert (result.retired, result.activated) == (old_active, old_next)
    assert states() == {old_active: "retired", old_next: "active", result.created: "next"}
    retired = SigningKey.objects.get(kid=old_active)
    activated = SigningKey.objects.get(kid=old_next)
    assert retired.retired_at == activated.activated_at
    assert active_signer().kid == old_next
    assert published_kids() == {old_active, old_next, result.created}


def test_a_retired_key_keeps_only_its_public_half(keys):
    old_active, _ = keys

    signing_key_rotate()

    assert SigningKey.objects.get(kid=old_active).private_key_encrypted == ""


def test_many_rotations_always_leave_exactly_one_active_and_one_next_key(keys):
    for _ in range(5):
        assert signing_key_rotate(force=True).rotated
        age_keys(JWKS_MAX_AGE + 1)
        counts = {state: list(states().values()).count(state) for state in ("active", "next")}
        assert counts == {"active": 1, "next": 1}


def test_the_database_refuses_a_second_active_or_next_key(keys):
    active = SigningKey.objects.get(state="active")
    for state in ("active", "next"):
        with pytest.raises(IntegrityError), transaction.atomic():
            SigningKey.objects.create(
                kid=f"another-{state}", state=state, public_key="x", private_key_encrypted="x"
            )
    assert SigningKey.objects.get(state="active") == active


def test_a_scheduled_rotation_right_after_a_rotation_does_nothing(keys):
    signing_key_rotate()
    before = snapshot()

    again = signing_key_rotate()

    assert again.outcome == RotationResult.RECENTLY_ROTATED and not again.rotated
    assert snapshot() == before


def test_a_scheduled_rotation_a_period_later_rotates_again(keys):
    first = signing_key_rotate()
    age_keys(DAY)

    second = signing_key_rotate()

    assert second.rotated
    assert second.retired == first.activated and second.activated == first.created


def test_a_forced_rotation_does_not_promote_a_next_key_younger_than_the_jwks_lifetime(keys):
    signing_key_rotate()
    age_keys(JWKS_MAX_AGE - 5)
    before = snapshot()

    result = signing_key_rotate(force=True)

    assert result.outcome == RotationResult.NEXT_KEY_TOO_YOUNG and not result.rotated
    assert snapshot() == before


def test_a_forced_rotation_promotes_a_next_key_published_one_jwks_lifetime_ago(keys):
    first = signing_key_rotate()
    age_keys(JWKS_MAX_AGE + 1)

    result = signing_key_rotate(force=True)

    assert result.rotated and result.activated == first.created


@override_settings(PLANGATE_JWKS_MAX_AGE=30, KEY_ROTATION_SECONDS=100)
def test_the_rules_follow_the_settings(keys):
    signing_key_rotate()
    age_keys(29)
    assert signing_key_rotate(force=True).outcome == RotationResult.NEXT_KEY_TOO_YOUNG
    age_keys(2)  # 31 s: old enough to sign, but less than half a period since the rotation
    assert signing_key_rotate().outcome == RotationResult.RECENTLY_ROTATED
    assert signing_key_rotate(force=True).rotated


def test_a_retired_key_stays_published_until_its_last_token_may_have_expired(keys):
    old_active, _ = keys
    signing_key_rotate()
    retired_at = SigningKey.objects.get(kid=old_active).retired_at
    last_moment = retired_at + max_token_lifetime()

    assert old_active in published_kids(last_moment - timedelta(seconds=1))
    assert old_active not in published_kids(last_moment + timedelta(seconds=1))


def test_rotation_removes_retired_keys_once_every_token_has_expired(keys):
    old_active, _ = keys
    signing_key_rotate()
    retired_at = SigningKey.objects.get(kid=old_active).retired_at
    last_moment = retired_at + max_token_lifetime()  # retired + max TTL + clock skew

    kept = signing_key_rotate(now=last_moment - timedelta(seconds=1))
    removed = signing_key_rotate(now=last_moment)

    assert kept.removed == ()
    assert removed.removed == (old_active,)
    assert not SigningKey.objects.filter(kid=old_active).exists()


def test_rotation_on_an_empty_database_creates_the_first_keys(db):
    result = signing_key_rotate()

    assert result.outcome == RotationResult.BOOTSTRAPPED
    assert states() == {result.activated: "active", result.created: "next"}


def test_rotation_without_a_next_key_publishes_one_and_waits_before_promoting_it(keys):
    old_active, old_next = keys
    SigningKey.objects.filter(kid=old_next).delete()

    result = signing_key_rotate(force=True)

    assert result.outcome == RotationResult.NEXT_KEY_CREATED and not result.rotated
    assert states() == {old_active: "active", result.created: "next"}


def test_rotation_without_an_active_key_promotes_the_next_key_at_once(keys):
    old_active, old_next = keys
    SigningKey.objects.filter(kid=old_active).update(state="retired", retired_at=timezone.now())
    age_keys(-DAY)  # the next key was published just now: nothing signs, so it may anyway

    result = signing_key_rotate()

    assert result.rotated and result.activated == old_next
    assert active_signer().kid == old_next


def test_rotation_refuses_and_writes_nothing_when_the_next_key_cannot_be_decrypted(keys):
    before = snapshot()

    with (
        override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY),
        pytest.raises(EncryptionKeyError, match=re.escape(kid_in("next"))),
    ):
        signing_key_rotate()

    assert snapshot() == before


@pytest.mark.parametrize("setting", ["", "not-a-fernet-key"])
def test_rotation_without_a_usable_encryption_key_refuses_and_writes_nothing(keys, setting):
    before = snapshot()

    with override_settings(KEY_ENCRYPTION_KEY=setting), pytest.raises(EncryptionKeyError):
        signing_key_rotate()

    assert snapshot() == before


def test_the_wrong_encryption_key_never_leads_to_signing_with_a_fresh_key(keys):
    """Rotations under a wrong key must not end up promoting keys created under it."""
    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        for _ in range(3):
            with pytest.raises(EncryptionKeyError):
                signing_key_rotate(force=True)
            age_keys(DAY)
        clear_private_key_cache()
        with pytest.raises(DomainError) as refused:
            active_signer()

    assert refused.value.code == Code.NO_SIGNING_KEY
    assert set(states()) == set(keys)


# --- Revocation -------------------------------------------------------------------------


def test_revoking_the_active_key_withdraws_it_and_the_next_key_signs_at_once(keys):
    old_active, old_next = keys

    revoked = signing_key_revoke(kid=old_active)

    stored = SigningKey.objects.get(kid=old_active)
    assert stored.state == "revoked" and stored.revoked_at == revoked.revoked_at is not None
    assert stored.private_key_encrypted == ""
    assert revoked.previous_state == "active" and revoked.signing == old_next
    assert active_signer().kid == old_next
    new_next = kid_in("next")
    assert new_next not in {old_active, old_next}
    assert published_kids() == {old_next, new_next}


def test_revoking_the_active_key_promotes_even_a_young_next_key(db):
    signing_keys_bootstrap()
    old_active, old_next = kid_in("active"), kid_in("next")

    signing_key_revoke(kid=old_active)

    assert active_signer().kid == old_next


def test_revoking_the_active_key_without_a_next_key_makes_a_fresh_key_sign(keys):
    old_active, old_next = keys
    SigningKey.objects.filter(kid=old_next).delete()

    signing_key_revoke(kid=old_active)

    assert active_signer().kid not in {old_active, old_next}
    assert kid_in("next") is not None


def test_a_revoked_key_does_not_sign_from_the_private_key_cache(keys):
    old_active, _ = keys
    assert active_signer().kid == old_active  # decrypted and cached

    signing_key_revoke(kid=old_active)

    assert active_signer().kid != old_active


def test_revoking_the_next_key_publishes_a_fresh_next_key(keys):
    old_active, old_next = keys

    signing_key_revoke(kid=old_next)

    assert kid_in("active") == old_active
    new_next = kid_in("next")
    assert new_next not in {old_active, old_next}
    assert published_kids() == {old_active, new_next}


def test_revoking_a_retired_key_withdraws_it_from_jwks_at_once(keys):
    old_active, _ = keys
    signing_key_rotate()
    assert old_active in published_kids()

    signing_key_revoke(kid=old_active)

    assert old_active not in published_kids()
    assert sorted(states().values()) == ["active", "next", "revoked"]


def test_revoking_twice_changes_nothing_the_second_time(keys):
    old_active, _ = keys
    first = signing_key_revoke(kid=old_active)
    before = snapshot()

    second = signing_key_revoke(kid=old_active)

    assert second.revoked_at == first.revoked_at
    assert snapshot() == before


def test_revoking_an_unknown_key_is_not_found_and_writes_nothing(keys):
    before = snapshot()

    with pytest.raises(DomainError) as error:
        signing_key_revoke(kid="no-such-kid")

    assert error.value.code == Code.NOT_FOUND
    assert snapshot() == before


def test_revocation_stands_even_when_no_replacement_can_be_decrypted(keys):
    """The emergency door opens with a broken encryption key; nothing signs until fixed."""
    old_active, old_next = keys

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        signing_key_revoke(kid=old_active)
        with pytest.raises(DomainError):
            active_signer()

    assert states() == {old_active: "revoked", old_next: "next"}
    assert published_kids() == {old_next}
    # Back with the right key, a rotation promotes the next key at once.
    assert signing_key_rotate().activated == old_next


def test_after_a_lost_encryption_key_revoking_both_keys_lets_a_rotation_start_afresh(keys):
    old_active, old_next = keys

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        signing_key_revoke(kid=old_active)
        signing_key_revoke(kid=old_next)
        clear_private_key_cache()
        signer = active_signer()

    assert signer.kid not in keys
    assert {states()[old_active], states()[old_next]} == {"revoked"}
