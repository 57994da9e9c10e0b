"""System checks and start-up refusals about signing keys and their schedule."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from controlplane.celery import refuse_to_start_without_a_usable_encryption_key
from plans.checks import check_key_encryption_key, check_key_rotation_schedule
from plans.keys import require_usable_encryption_key, signing_keys_bootstrap

from .keys_helpers import OTHER_ENCRYPTION_KEY, TEST_ENCRYPTION_KEY, kid_in


def ids(messages) -> list[str]:
    return [message.id for message in messages]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("", "KEY_ENCRYPTION_KEY is not set"),
        ("not-a-fernet-key", "comma-separated Fernet keys"),
        (f"{TEST_ENCRYPTION_KEY},broken", "comma-separated Fernet keys"),
    ],
)
def test_a_missing_or_malformed_encryption_key_is_a_check_error(setting, message):
    with override_settings(KEY_ENCRYPTION_KEY=setting):
        errors = check_key_encryption_key(None)

    assert ids(errors) == ["plangate.E001"]
    assert message in errors[0].msg


def test_an_encryption_key_that_cannot_decrypt_the_active_key_is_a_check_error(db):
    signing_keys_bootstrap()
    active = kid_in("active")

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        errors = check_key_encryption_key(None)

    assert ids(errors) == ["plangate.E001"]
    assert active in errors[0].msg and "cannot be decrypted" in errors[0].msg
    assert "reencrypt_keys" in errors[0].hint


def test_the_right_encryption_key_passes_the_check(db):
    signing_keys_bootstrap()

    assert check_key_encryption_key(None) == []
    with override_settings(KEY_ENCRYPTION_KEY=f"{OTHER_ENCRYPTION_KEY},{TEST_ENCRYPTION_KEY}"):
        assert check_key_encryption_key(None) == []


def test_the_check_does_not_touch_a_database_it_may_not_use():
    # No `db` fixture: pytest-django refuses database access, as a down database would.
    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        assert check_key_encryption_key(None) == []


def test_the_check_skips_a_database_that_is_not_migrated_yet(db, monkeypatch):
    signing_keys_bootstrap()
    monkeypatch.setattr(connection.introspection, "table_names", lambda *args, **kwargs: [])

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        assert check_key_encryption_key(None) == []


def test_the_default_schedule_passes_the_check():
    assert check_key_rotation_schedule(None) == []


@override_settings(KEY_ROTATION_SECONDS=299, PLANGATE_JWKS_MAX_AGE=300)
def test_a_rotation_period_shorter_than_the_jwks_cache_lifetime_is_a_check_error():
    errors = check_key_rotation_schedule(None)

    assert ids(errors) == ["plangate.E003"]
    assert "shorter than the JWKS cache lifetime" in errors[0].msg


@override_settings(KEY_ROTATION_SECONDS=300, PLANGATE_JWKS_MAX_AGE=300)
def test_a_rotation_period_equal_to_the_jwks_cache_lifetime_is_accepted():
    assert check_key_rotation_schedule(None) == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"KEY_ROTATION_SECONDS": 0},
        {"KEY_ROTATION_SECONDS": -5},
        {"PLANGATE_JWKS_MAX_AGE": -1},
        {"PLAN_EXPIRY_SWEEP_SECONDS": 0},
        {"PLANGATE_CLOCK_SKEW": -1},
    ],
)
def test_nonsensical_periods_are_check_errors(overrides):
    with override_settings(**overrides):
        errors = check_key_rotation_schedule(None)

    assert errors and set(ids(errors)) == {"plangate.E003"}


@pytest.mark.parametrize("setting", ["", "not-a-fernet-key"])
def test_start_up_refuses_a_missing_encryption_key(setting):
    with override_settings(KEY_ENCRYPTION_KEY=setting), pytest.raises(ImproperlyConfigured):
        require_usable_encryption_key()


def test_start_up_refuses_an_encryption_key_that_cannot_decrypt_the_keys(db, caplog):
    signing_keys_bootstrap()

    with (
        override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY),
        pytest.raises(ImproperlyConfigured, match=r"docs/keys\.md"),
    ):
        require_usable_encryption_key()

    assert f"refusing to start: signing key {kid_in('active')}" in caplog.text


def test_start_up_accepts_the_right_key(db):
    signing_keys_bootstrap()

    require_usable_encryption_key()


def test_the_celery_worker_refuses_to_start_without_a_usable_encryption_key():
    with override_settings(KEY_ENCRYPTION_KEY=""), pytest.raises(SystemExit) as stopped:
        refuse_to_start_without_a_usable_encryption_key(sender=None)

    assert "Refusing to start the Celery worker: KEY_ENCRYPTION_KEY is not set" in str(
        stopped.value
    )
