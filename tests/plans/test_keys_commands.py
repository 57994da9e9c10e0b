"""Operator commands: rotate_keys, list_keys, revoke_key, reencrypt_keys."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from plans.keys import active_signer, clear_private_key_cache, signing_keys_bootstrap
from plans.models import SigningKey

from .keys_helpers import (
    OTHER_ENCRYPTION_KEY,
    TEST_ENCRYPTION_KEY,
    age_keys,
    kid_in,
    snapshot,
    states,
)

DAY = 86400

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def keys() -> tuple[str, str]:
    signing_keys_bootstrap()
    age_keys(DAY)
    return kid_in("active"), kid_in("next")


def test_rotate_keys_rotates_now(keys):
    old_active, old_next = keys

    output = run("rotate_keys")

    assert output.startswith("rotated:")
    assert f"retired {old_active}" in output and f"activated {old_next}" in output
    assert states()[old_active] == "retired" and states()[old_next] == "active"


def test_rotate_keys_by_hand_ignores_the_schedule_but_not_the_jwks_lifetime(keys):
    run("rotate_keys")
    before = snapshot()

    output = run("rotate_keys")

    assert output.startswith("next_key_too_young:")
    assert "revoke_key" in output
    assert snapshot() == before


def test_rotate_keys_if_due_skips_like_the_scheduled_rotation(keys):
    run("rotate_keys")
    age_keys(3600)

    assert run("rotate_keys", "--if-due").startswith("recently_rotated:")
    assert run("rotate_keys").startswith("rotated:")


def test_rotate_keys_refuses_with_an_encryption_key_that_cannot_decrypt(keys):
    before = snapshot()

    with (
        override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY),
        pytest.raises(CommandError, match=f"not rotated: signing key {keys[1]}"),
    ):
        call_command("rotate_keys", skip_checks=True)

    assert snapshot() == before


def test_list_keys_json_prints_every_key_with_its_lifecycle_times(keys):
    run("rotate_keys")

    listed = json.loads(run("list_keys", "--json"))

    assert [set(entry) for entry in listed] == [
        {"kid", "state", "createdAt", "activatedAt", "retiredAt"}
    ] * 3
    by_kid = {entry["kid"]: entry for entry in listed}
    assert {kid: entry["state"] for kid, entry in by_kid.items()} == states()
    retired = by_kid[keys[0]]
    assert retired["retiredAt"].endswith("Z") and retired["activatedAt"].endswith("Z")
    next_key = by_kid[kid_in("next")]
    assert next_key["activatedAt"] is None and next_key["retiredAt"] is None
    assert [entry["createdAt"] for entry in listed] == sorted(e["createdAt"] for e in listed)


def test_list_keys_prints_a_table_without_json(keys):
    output = run("list_keys").splitlines()

    assert output[0].split() == [
        "kid",
        "state",
        "created",
        "activated",
        "retired",
        "revoked",
        "in",
        "JWKS",
    ]
    assert len(output) == 3
    assert any(line.startswith(keys[0]) and " active " in line for line in output)


def test_revoke_key_withdraws_the_key_and_says_which_key_signs(keys):
    old_active, old_next = keys

    output = run("revoke_key", "--", old_active)

    assert f"revoked {old_active}" in output
    assert f"signing with {old_next}" in output
    assert states()[old_active] == "revoked"


def test_revoke_key_takes_a_kid_that_starts_with_a_dash_after_a_double_dash(keys):
    # A kid is base64url: one key in 64 starts with "-", which argparse reads as an option.
    SigningKey.objects.filter(kid=keys[0]).update(kid="-" + keys[0][1:])

    output = run("revoke_key", "--", "-" + keys[0][1:])

    assert f"revoked -{keys[0][1:]}" in output


def test_revoke_key_refuses_an_unknown_kid(keys):
    with pytest.raises(CommandError, match="No signing key"):
        call_command("revoke_key", "nope")


def test_revoke_key_works_with_a_broken_encryption_key_and_says_nothing_signs(keys):
    with (
        override_settings(KEY_ENCRYPTION_KEY=""),
        pytest.raises(CommandError, match="no key signs"),
    ):
        call_command("revoke_key", "--", keys[0])

    assert states()[keys[0]] == "revoked"


def test_reencrypt_keys_moves_the_keys_under_the_newest_encryption_key(keys):
    rotated = f"{OTHER_ENCRYPTION_KEY},{TEST_ENCRYPTION_KEY}"
    with override_settings(KEY_ENCRYPTION_KEY=rotated):
        assert "re-encrypted 2 signing key(s)" in run("reencrypt_keys")
        assert "re-encrypted 0 signing key(s)" in run("reencrypt_keys")

    clear_private_key_cache()
    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        assert active_signer().kid == keys[0]


def test_reencrypt_keys_refuses_and_writes_nothing_when_a_key_cannot_be_decrypted(keys):
    before = snapshot()

    with (
        override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY),
        pytest.raises(CommandError, match="nothing re-encrypted"),
    ):
        call_command("reencrypt_keys", skip_checks=True)

    assert snapshot() == before
    assert SigningKey.objects.count() == 2
