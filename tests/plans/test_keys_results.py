"""Rotation and revocation say what they changed, so their doors report it without
reading the keys again; the admin's history and the commands' output come from it."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from plans.keys import KeyChange, RotationResult, signing_key_revoke, signing_key_rotate

from .keys_helpers import OTHER_ENCRYPTION_KEY, age_keys, kid_in, snapshot, states

DAY = 86400

pytestmark = pytest.mark.django_db


def test_a_rotation_on_an_empty_database_reports_the_first_keys():
    result = signing_key_rotate()

    assert result.outcome == RotationResult.BOOTSTRAPPED
    assert result.changes == (
        KeyChange(kid_in("active"), None, "active"),
        KeyChange(kid_in("next"), None, "next"),
    )


def test_a_rotation_reports_every_key_it_moved_or_created_in_order():
    signing_key_rotate()
    age_keys(DAY)
    old_active, old_next = kid_in("active"), kid_in("next")

    result = signing_key_rotate()

    new_next = kid_in("next")
    assert result.changes == (
        KeyChange(old_active, "active", "retired"),
        KeyChange(old_next, "next", "active"),
        KeyChange(new_next, None, "next"),
    )
    assert states() == {change.kid: change.after for change in result.changes}


def test_a_skipped_rotation_reports_no_change():
    signing_key_rotate()
    before = snapshot()

    result = signing_key_rotate()

    assert result.outcome == RotationResult.RECENTLY_ROTATED
    assert result.changes == ()
    assert snapshot() == before


def test_revoking_the_active_key_reports_the_key_that_signs_and_the_new_next_key():
    signing_key_rotate()
    old_active, old_next = kid_in("active"), kid_in("next")

    result = signing_key_revoke(kid=old_active)

    new_next = kid_in("next")
    assert (result.kid, result.previous_state, result.signing) == (old_active, "active", old_next)
    assert (result.activated, result.created) == (old_next, new_next)
    assert result.changes == (
        KeyChange(old_active, "active", "revoked"),
        KeyChange(old_next, "next", "active"),
        KeyChange(new_next, None, "next"),
    )
    assert not result.already_revoked and result.replacement_error == ""


def test_revoking_the_next_key_reports_the_unchanged_signer():
    signing_key_rotate()
    active, old_next = kid_in("active"), kid_in("next")

    result = signing_key_revoke(kid=old_next)

    assert result.signing == active and result.activated is None
    assert result.changes == (
        KeyChange(old_next, "next", "revoked"),
        KeyChange(kid_in("next"), None, "next"),
    )


def test_a_revocation_without_a_possible_replacement_reports_that_nothing_signs():
    signing_key_rotate()
    old_active, old_next = kid_in("active"), kid_in("next")

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        result = signing_key_revoke(kid=old_active)

    assert result.signing is None
    assert result.changes == (KeyChange(old_active, "active", "revoked"),)
    assert (
        "cannot be decrypted" in result.replacement_error and old_next in result.replacement_error
    )
    assert states() == {old_active: "revoked", old_next: "next"}


def test_revoking_a_revoked_key_reports_no_change():
    signing_key_rotate()
    old_active = kid_in("active")
    first = signing_key_revoke(kid=old_active)
    before = snapshot()

    second = signing_key_revoke(kid=old_active)

    assert second.already_revoked and second.changes == ()
    assert second.revoked_at == first.revoked_at and second.signing == first.signing
    assert snapshot() == before


def test_the_key_checks_are_registered_by_the_plans_app():
    with override_settings(KEY_ENCRYPTION_KEY="", PLANGATE_TOKEN_MIN_TTL=0, KEY_ROTATION_SECONDS=0):
        ids = {message.id for message in run_checks()}

    assert {"plangate.E001", "plangate.E002", "plangate.E003"} <= ids
