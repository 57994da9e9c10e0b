"""The one credential format API keys and audit tokens share (kernel.credentials)."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from django.conf import settings

from audit.models import AUDIT_TOKEN_FORMAT
from members.models import API_KEY_FORMAT


def test_api_keys_hash_as_they_always_did_so_existing_keys_keep_working():
    pepper = hmac.new(settings.SECRET_KEY.encode(), b"plangate.api-key.v1", hashlib.sha256)
    expected = hmac.new(pepper.digest(), b"the-secret", hashlib.sha256).hexdigest()
    assert API_KEY_FORMAT.secret_hash("the-secret") == expected


def test_one_secret_hashes_differently_as_an_api_key_and_as_an_audit_token():
    assert API_KEY_FORMAT.secret_hash("s") != AUDIT_TOKEN_FORMAT.secret_hash("s")


@pytest.mark.parametrize("credential_format", [API_KEY_FORMAT, AUDIT_TOKEN_FORMAT])
def test_a_minted_credential_parses_back_and_matches_only_its_own_hash(credential_format):
    minted = credential_format.mint()
    lookup_id, secret = credential_format.parse(minted.plaintext)
    assert lookup_id == minted.lookup_id
    assert credential_format.matches(minted.secret_hash, secret)
    assert not credential_format.matches(minted.secret_hash, secret + "x")
    assert minted.secret_hash != secret and secret not in minted.secret_hash


@pytest.mark.parametrize(
    "text",
    [
        "",
        "pg_",
        "pga_0123456789ab",
        "pga_0123456789ab_",
        "pga_0123456789AB_secret",
        "pga_0123456789a_secret",
        "pga_0123456789a\x00_secret",
        "pg_0123456789ab_secret",
    ],
)
def test_malformed_or_other_kinds_of_credentials_do_not_parse_as_audit_tokens(text):
    assert AUDIT_TOKEN_FORMAT.parse(text) is None


def test_an_audit_token_is_not_an_api_key():
    assert API_KEY_FORMAT.parse(AUDIT_TOKEN_FORMAT.mint().plaintext) is None
