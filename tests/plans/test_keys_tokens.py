"""Tokens across key changes, checked the way a guard checks them: against /v1/keys/jwks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.test import override_settings

from guard.errors import TokenInvalid
from guard.jwk import KeySet
from guard.tokens import verify_token
from kernel.problems import Code
from plans.keys import (
    jwks_document,
    max_token_lifetime,
    signing_key_revoke,
    signing_key_rotate,
    signing_keys_bootstrap,
)
from plans.models import PlanToken, SigningKey
from tests.conftest import plan_document

from .helpers import assert_problem, decode_segment
from .keys_helpers import OTHER_ENCRYPTION_KEY, age_keys, kid_in, snapshot

DAY = 86400


def declare(persona) -> dict:
    response = persona.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def kid_of(token: str) -> str:
    return decode_segment(token.split(".")[0])["kid"]


def published(client) -> KeySet:
    response = client.get("/v1/keys/jwks")
    assert response.status_code == 200
    return KeySet(response.json())


def verify(token: str, keys: KeySet, *, at: float | None = None) -> dict:
    return verify_token(
        token, keys, issuer=settings.PLANGATE_ISSUER, now=at, leeway=settings.PLANGATE_CLOCK_SKEW
    )


def test_a_token_signed_before_a_rotation_verifies_after_it_until_its_expiry(
    agent, anonymous_client
):
    issued = declare(agent)
    age_keys(DAY)
    claims = verify(issued["token"], published(anonymous_client))

    result = signing_key_rotate()

    assert result.retired == kid_of(issued["token"])
    keys_now = published(anonymous_client)
    assert verify(issued["token"], keys_now)["jti"] == issued["id"]
    # At its expiry, the JWKS served then still lists the retired key.
    expiry = datetime.fromtimestamp(claims["exp"], tz=UTC)
    keys_at_expiry = KeySet(jwks_document(expiry))
    assert verify(issued["token"], keys_at_expiry, at=claims["exp"] - 1)["jti"] == issued["id"]
    # New tokens are signed by the promoted key, which verifiers already had.
    newer = declare(agent)
    assert kid_of(newer["token"]) == result.activated
    assert verify(newer["token"], keys_now)


def test_the_retired_key_leaves_jwks_once_its_tokens_have_expired(agent, anonymous_client):
    issued = declare(agent)
    age_keys(DAY)
    retired_kid = signing_key_rotate().retired
    retired_at = SigningKey.objects.get(kid=retired_kid).retired_at
    token = PlanToken.objects.get(plan_id=issued["id"])
    assert token.expires_at <= retired_at + max_token_lifetime()

    later = retired_at + max_token_lifetime() + timedelta(seconds=1)
    keys_later = KeySet(jwks_document(later))
    signing_key_rotate(now=later)

    assert retired_kid not in keys_later
    with pytest.raises(TokenInvalid, match="unknown key id"):
        verify(issued["token"], keys_later, at=later.timestamp())
    assert retired_kid not in published(anonymous_client)
    assert not SigningKey.objects.filter(kid=retired_kid).exists()


def test_a_revoked_keys_tokens_no_longer_verify_and_refresh_answers_invalid_token(
    agent, anonymous_client
):
    issued = declare(agent)
    kid = kid_of(issued["token"])
    assert verify(issued["token"], published(anonymous_client))

    signing_key_revoke(kid=kid)

    keys = published(anonymous_client)
    assert kid not in keys
    with pytest.raises(TokenInvalid, match="unknown key id"):
        verify(issued["token"], keys)
    before = PlanToken.objects.count()
    refused = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )
    assert_problem(refused, 401, Code.INVALID_TOKEN)
    assert PlanToken.objects.count() == before
    # A fresh key signs at once, and its tokens verify against the same JWKS.
    again = declare(agent)
    assert kid_of(again["token"]) != kid
    assert verify(again["token"], keys)


def test_a_token_of_a_retired_key_still_refreshes(agent):
    issued = declare(agent)
    age_keys(DAY)
    signing_key_rotate()

    refreshed = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )

    assert refreshed.status_code == 200, refreshed.content
    assert kid_of(refreshed.json()["token"]) == kid_in("active")


def test_the_wrong_encryption_key_refuses_to_sign_and_creates_no_key(agent):
    declare(agent)
    before = snapshot()

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert_problem(response, 503, Code.NO_SIGNING_KEY)
    assert snapshot() == before


@pytest.mark.parametrize("setting", ["", "not-a-fernet-key"])
def test_a_missing_encryption_key_refuses_to_sign_on_a_fresh_database(agent, setting, caplog):
    with override_settings(KEY_ENCRYPTION_KEY=setting):
        response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert_problem(response, 503, Code.NO_SIGNING_KEY)
    assert not SigningKey.objects.exists()
    assert "KEY_ENCRYPTION_KEY" in caplog.text


def test_the_refusal_is_logged_with_the_kid(agent, caplog):
    declare(agent)
    kid = kid_in("active")

    with override_settings(KEY_ENCRYPTION_KEY=OTHER_ENCRYPTION_KEY):
        agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert f"refusing to sign: signing key {kid}" in caplog.text


def test_jwks_etag_changes_on_rotation_and_on_revocation(db, anonymous_client):
    signing_keys_bootstrap()  # the JWKS is a read: it creates no key
    first = anonymous_client.get("/v1/keys/jwks")
    etag = first["ETag"]
    assert anonymous_client.get("/v1/keys/jwks", HTTP_IF_NONE_MATCH=etag).status_code == 304

    age_keys(DAY)
    signing_key_rotate()
    rotated = anonymous_client.get("/v1/keys/jwks", HTTP_IF_NONE_MATCH=etag)

    assert rotated.status_code == 200
    assert rotated["ETag"] != etag
    assert len(rotated.json()["keys"]) == 3
    rotated_etag = rotated["ETag"]
    assert anonymous_client.get("/v1/keys/jwks", HTTP_IF_NONE_MATCH=rotated_etag).status_code == 304

    signing_key_revoke(kid=kid_in("retired"))
    revoked = anonymous_client.get("/v1/keys/jwks", HTTP_IF_NONE_MATCH=rotated_etag)

    assert revoked.status_code == 200
    assert revoked["ETag"] not in {etag, rotated_etag}
    assert revoked["Cache-Control"] == f"public, max-age={settings.PLANGATE_JWKS_MAX_AGE}"
