"""`plangate token verify` against a running control plane: a token the server issued, its
key set fetched from the server's JWKS endpoint, and tokens that must not verify (a
tampered payload, another issuer, an expired one, signed by the server's own key)."""

from __future__ import annotations

import inspect
import json
import time

import httpx
import pytest
from django.conf import settings

from guard import Guard
from guard.jwk import b64url_encode
from guard.tokens import unverified_claims
from plans.keys import active_signer
from plans.models import Plan
from tests.conftest import plan_document

from .test_cli import plangate

pytestmark = pytest.mark.slow  # a live server, and the command in a subprocess


@pytest.fixture
def issued(live_server, agent) -> str:
    """A token the live control plane issued for the agent's plan."""
    response = httpx.post(
        f"{live_server.url}/v1/plans",
        json={"plan": plan_document()},
        headers={"Authorization": f"Bearer {agent.api_key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return response.json()["token"]


@pytest.fixture
def jwks_url(live_server) -> str:
    return f"{live_server.url}/v1/keys/jwks"


def verify(token: str, jwks_url: str, *args: str, **options):
    return plangate("token", "verify", token, "--jwks", jwks_url, *args, **options)


def test_a_token_the_server_issued_verifies_and_its_claims_are_printed(issued, jwks_url):
    result = verify(issued, jwks_url, "--issuer", settings.PLANGATE_ISSUER)

    assert result.returncode == 0, result.stderr
    claims = json.loads(result.stdout)
    assert claims == unverified_claims(issued)
    plan = Plan.objects.get()
    assert claims["jti"] == plan.pk
    assert claims["ph"] == plan.hash
    assert claims["sub"] == "alice@acme.dev"


def test_the_token_is_read_from_standard_input_and_the_issuer_from_the_environment(
    issued, jwks_url
):
    result = verify(
        "-",
        jwks_url,
        "--json",
        stdin=issued + "\n",
        env={"PLANGATE_ISSUER": settings.PLANGATE_ISSUER},
    )

    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["verified"] is True
    assert body["claims"]["jti"] == Plan.objects.get().pk


def test_a_tampered_token_is_token_invalid(issued, jwks_url):
    header, _payload, signature = issued.split(".")
    claims = unverified_claims(issued)
    claims["plan"]["steps"][0]["maxCalls"] = 1000
    tampered = ".".join(
        [header, b64url_encode(json.dumps(claims, separators=(",", ":")).encode()), signature]
    )

    result = verify(tampered, jwks_url, "--issuer", settings.PLANGATE_ISSUER, "--json")

    assert result.returncode == 1
    assert json.loads(result.stdout) == {
        "verified": False,
        "code": "token_invalid",
        "detail": "bad signature",
    }
    assert result.stderr.strip() == "token_invalid: bad signature"


def test_a_token_of_another_issuer_is_token_invalid_naming_both_issuers(issued, jwks_url):
    result = verify(issued, jwks_url, "--issuer", "https://elsewhere.test")

    assert result.returncode == 1
    issuer = settings.PLANGATE_ISSUER
    assert result.stderr.strip() == (
        f'token_invalid: wrong issuer: the token names "{issuer}", expected'
        f' "https://elsewhere.test" (if that is your control plane: --issuer {issuer})'
    )
    assert result.stdout == ""


def test_an_expired_token_signed_by_the_server_is_token_expired(issued, jwks_url):
    claims = unverified_claims(issued)
    an_hour_ago = int(time.time()) - 3600
    claims.update(iat=an_hour_ago - 900, exp=an_hour_ago)
    expired = active_signer().sign(claims)

    result = verify(expired, jwks_url, "--issuer", settings.PLANGATE_ISSUER)

    assert result.returncode == 1
    assert result.stderr.strip() == "token_expired: token expired"


def test_the_default_leeway_is_the_guards_clock_skew(issued, jwks_url):
    # A token expired 45 s ago: inside the guard's 60 s of skew, outside 30 s.
    skew = inspect.signature(Guard).parameters["clock_skew"].default
    assert skew == 60
    claims = unverified_claims(issued)
    now = int(time.time())
    claims.update(iat=now - 945, exp=now - 45)
    just_expired = active_signer().sign(claims)

    by_default = verify(just_expired, jwks_url, "--issuer", settings.PLANGATE_ISSUER)
    narrower = verify(
        just_expired, jwks_url, "--issuer", settings.PLANGATE_ISSUER, "--leeway", "30"
    )

    assert by_default.returncode == 0, by_default.stderr
    assert narrower.returncode == 1
    assert narrower.stderr.strip() == "token_expired: token expired"


def test_without_an_issuer_the_url_before_the_jwks_path_is_required(issued, jwks_url):
    # The tests' issuer is not the live server's URL: the default issuer does not match.
    result = verify(issued, jwks_url, env={"PLANGATE_ISSUER": ""})

    assert result.returncode == 1
    assert result.stderr.strip().startswith(
        f'token_invalid: wrong issuer: the token names "{settings.PLANGATE_ISSUER}", expected'
        f' "{jwks_url.removesuffix("/v1/keys/jwks")}"'
    )


def test_a_key_set_that_cannot_be_fetched_is_a_usage_error(issued, live_server):
    missing = verify(issued, f"{live_server.url}/no-such-path", "--issuer", "x")
    unreachable = verify(issued, "http://127.0.0.1:9/v1/keys/jwks", "--issuer", "x")

    assert missing.returncode == unreachable.returncode == 2
    assert "HTTP 404" in missing.stderr
    assert "cannot fetch the key set" in unreachable.stderr
