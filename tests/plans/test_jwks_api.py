"""GET /v1/keys/jwks: public keys only, cacheable, with an ETag honoured by 304."""

from __future__ import annotations

from plans.keys import signing_keys_bootstrap
from plans.models import SigningKey


def test_jwks_lists_active_and_next_keys_without_private_parts(db, anonymous_client):
    signing_keys_bootstrap()

    response = anonymous_client.get("/v1/keys/jwks")

    assert response.status_code == 200
    keys = response.json()["keys"]
    assert {key["kid"] for key in keys} == set(SigningKey.objects.values_list("kid", flat=True))
    for key in keys:
        assert key["kty"] == "OKP" and key["crv"] == "Ed25519" and key["alg"] == "EdDSA"
        assert "d" not in key
    assert response["Cache-Control"] == "public, max-age=300"


def test_jwks_etag_answers_304_until_the_keys_change(db, anonymous_client):
    signing_keys_bootstrap()
    etag = anonymous_client.get("/v1/keys/jwks")["ETag"]

    unchanged = anonymous_client.get("/v1/keys/jwks", HTTP_IF_NONE_MATCH=etag)
    SigningKey.objects.filter(state="next").delete()
    changed = anonymous_client.get("/v1/keys/jwks", HTTP_IF_NONE_MATCH=etag)

    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert changed.status_code == 200
    assert changed["ETag"] != etag


def test_private_keys_are_not_stored_in_clear(db):
    signing_keys_bootstrap()

    for key in SigningKey.objects.all():
        assert key.private_key_encrypted.startswith("gAAAAA")  # a Fernet token
        assert key.public_key not in key.private_key_encrypted
