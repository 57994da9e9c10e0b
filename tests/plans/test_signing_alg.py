"""PLANGATE_SIGNING_ALG: tokens signed as `EdDSA` (RFC 8037) or `Ed25519` (RFC 9864), the
JWK Set naming the one in use, and every verifying side accepting both: the guard, the
`plangate` CLI, the server's refresh; and which JOSE libraries verify `Ed25519` as they
come (docs/decisions/0067)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import httpx
import jwt
import pytest
from cryptography.fernet import Fernet
from django.conf import settings as django_settings
from joserfc import jws as joserfc_jws
from joserfc.errors import UnsupportedKeyAlgorithmError
from joserfc.jwk import OKPKey
from jwcrypto import jwk as jwcrypto_jwk  # type: ignore[import-untyped]
from jwcrypto import jws as jwcrypto_jws  # type: ignore[import-untyped]

from guard.jwk import KeySet
from guard.tokens import verify_token
from plans.models import PlanToken
from tests.conftest import plan_document
from tests.guard.test_cli import plangate
from tests.node_packages import JOSE, node_folder, node_run

from .helpers import b64url_json, claims_of, decode_segment, table_counts

ALGS = ("EdDSA", "Ed25519")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def declare(persona) -> dict:
    response = persona.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def header_of(token: str) -> dict:
    return decode_segment(token.split(".")[0])


def jwks(client) -> dict:
    response = client.get("/v1/keys/jwks")
    assert response.status_code == 200
    return response.json()


@pytest.mark.slow  # a Python process per value
@pytest.mark.parametrize("value", ["RS256", "eddsa", "ED25519", "none", ""])
def test_any_other_name_fails_start_up(value):
    env = {
        **os.environ,
        "SECRET_KEY": "x",
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "PLANGATE_SIGNING_ALG": value,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
    }
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "PLANGATE_SIGNING_ALG must be" in result.stderr


def test_the_default_is_eddsa():
    assert django_settings.PLANGATE_SIGNING_ALG == "EdDSA"


@pytest.mark.parametrize("alg", ALGS)
def test_tokens_and_the_key_set_name_the_setting(settings, agent, anonymous_client, alg):
    settings.PLANGATE_SIGNING_ALG = alg
    issued = declare(agent)

    assert header_of(issued["token"])["alg"] == alg
    keys = jwks(anonymous_client)["keys"]
    assert keys and {key["alg"] for key in keys} == {alg}
    # The guard's verification (guard.tokens) takes either name from the same key set.
    claims = verify_token(
        issued["token"], KeySet({"keys": keys}), issuer=django_settings.PLANGATE_ISSUER
    )
    assert claims["jti"] == issued["id"]


@pytest.mark.parametrize("signed_as", ALGS)
@pytest.mark.parametrize("refreshed_as", ALGS)
def test_the_server_refreshes_a_token_signed_under_either_name(
    settings, agent, signed_as, refreshed_as
):
    settings.PLANGATE_SIGNING_ALG = signed_as
    issued = declare(agent)
    settings.PLANGATE_SIGNING_ALG = refreshed_as

    response = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )

    assert response.status_code == 200, response.content
    token = response.json()["token"]
    assert header_of(token)["alg"] == refreshed_as
    assert claims_of(token)["jti"] == issued["id"]
    assert list(PlanToken.objects.filter(plan_id=issued["id"]).values_list("kind", flat=True)) == [
        PlanToken.Kind.ISSUE,
        PlanToken.Kind.REFRESH,
    ]


def test_a_token_under_another_algorithm_name_is_refused_and_writes_nothing(agent):
    issued = declare(agent)
    _, payload, signature = issued["token"].split(".")
    forged = header_of(issued["token"]) | {"alg": "Ed448"}
    token = ".".join([b64url_json(forged), payload, signature])
    before = table_counts()

    response = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": token}, format="json"
    )

    assert response.status_code == 401, response.content
    assert response.json()["code"] == "invalid_token"
    assert table_counts() == before


# --- which libraries verify `Ed25519` as they come ---------------------------------------


@pytest.fixture
def both_tokens(settings, agent, anonymous_client) -> tuple[dict[str, str], dict]:
    tokens = {}
    for alg in ALGS:
        settings.PLANGATE_SIGNING_ALG = alg
        tokens[alg] = declare(agent)["token"]
    return tokens, jwks(anonymous_client)["keys"][0]


def test_pyjwt_verifies_ed25519_only_once_registered(both_tokens):
    tokens, key = both_tokens
    public = jwt.PyJWK({k: key[k] for k in ("kty", "crv", "x")}, algorithm="EdDSA").key
    options = {"verify_exp": False, "verify_aud": False}

    assert jwt.decode(tokens["EdDSA"], public, algorithms=["EdDSA"], options=options)
    # PyJWT 2.15 does not know the name; guard.tokens registers it (ed25519_jws).
    with pytest.raises(jwt.InvalidAlgorithmError):
        jwt.decode(tokens["Ed25519"], public, algorithms=["Ed25519"], options=options)


@pytest.mark.parametrize("alg", ALGS)
def test_joserfc_verifies_both_names_and_holds_a_keys_alg(both_tokens, alg):
    tokens, key = both_tokens  # the key set was read under Ed25519, the last setting
    bare = {k: key[k] for k in ("kty", "crv", "x")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # joserfc warns that EdDSA is deprecated (RFC 9864)
        verified = joserfc_jws.deserialize_compact(
            tokens[alg], OKPKey.import_key(bare), algorithms=[alg]
        )
        assert json.loads(verified.payload)["iss"] == django_settings.PLANGATE_ISSUER
        # A key whose JWK says `alg` verifies only tokens under that name.
        if alg == key["alg"]:
            joserfc_jws.deserialize_compact(tokens[alg], OKPKey.import_key(key), algorithms=[alg])
        else:
            with pytest.raises(UnsupportedKeyAlgorithmError):
                joserfc_jws.deserialize_compact(
                    tokens[alg], OKPKey.import_key(key), algorithms=[alg]
                )


@pytest.mark.parametrize("alg", ALGS)
def test_the_guard_verifies_either_name_whatever_the_key_set_says(both_tokens, alg):
    tokens, key = both_tokens
    for published in ALGS:
        keys = KeySet({"keys": [key | {"alg": published}]})
        claims = verify_token(tokens[alg], keys, issuer=django_settings.PLANGATE_ISSUER)
        assert claims["iss"] == django_settings.PLANGATE_ISSUER


@pytest.mark.parametrize("alg", ALGS)
def test_jwcrypto_verifies_both_names_by_default(both_tokens, alg):
    tokens, key = both_tokens
    token = jwcrypto_jws.JWS()
    token.deserialize(tokens[alg])
    token.verify(jwcrypto_jwk.JWK(**{k: key[k] for k in ("kty", "crv", "x")}))
    assert json.loads(token.payload)["iss"] == django_settings.PLANGATE_ISSUER


# --- against a running server: the CLI and node's jose -----------------------------------

NODE_VERIFY = """
import * as jose from "jose";
const [jwksUrl, ...tokens] = process.argv.slice(2);
const document = await (await fetch(jwksUrl)).json();
const keySet = jose.createLocalJWKSet(document);
const out = {};
async function outcome(verify) {
  try {
    const { payload } = await verify();
    return payload.jti;
  } catch (error) {
    return error.code;
  }
}
for (const token of tokens) {
  const { alg } = jose.decodeProtectedHeader(token);
  const { kty, crv, x } = document.keys[0];
  const key = await jose.importJWK({ kty, crv, x }, alg);
  out[alg] = {
    keySet: await outcome(() => jose.jwtVerify(token, keySet)),
    key: await outcome(() => jose.jwtVerify(token, key)),
  };
}
console.log(JSON.stringify({ published: document.keys[0].alg, tokens: out }));
"""


@pytest.fixture
def live_tokens(settings, live_server, agent) -> dict[str, str]:
    tokens = {}
    for alg in ALGS:
        settings.PLANGATE_SIGNING_ALG = alg
        response = httpx.post(
            f"{live_server.url}/v1/plans",
            json={"plan": plan_document()},
            headers={"Authorization": f"Bearer {agent.api_key}"},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        tokens[alg] = response.json()["token"]
    return tokens


@pytest.mark.slow
@pytest.mark.parametrize("alg", ALGS)
def test_the_cli_verifies_a_live_token_under_either_name(settings, live_server, live_tokens, alg):
    settings.PLANGATE_SIGNING_ALG = alg  # the key set's alg: the CLI must not mind it either
    result = plangate(
        "token",
        "verify",
        live_tokens[alg],
        "--jwks",
        f"{live_server.url}/v1/keys/jwks",
        "--issuer",
        django_settings.PLANGATE_ISSUER,
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["jti"] == claims_of(live_tokens[alg])["jti"]


@pytest.mark.slow
@pytest.mark.parametrize("published", ALGS)
def test_node_jose_verifies_either_name_and_its_key_sets_hold_a_keys_alg(
    settings, live_server, live_tokens, published
):
    folder = node_folder(JOSE)
    settings.PLANGATE_SIGNING_ALG = published

    answer = node_run(folder, NODE_VERIFY, f"{live_server.url}/v1/keys/jwks", *live_tokens.values())

    jti = {alg: claims_of(token)["jti"] for alg, token in live_tokens.items()}
    assert answer["published"] == published
    assert answer["tokens"] == {
        alg: {
            # A JWK Set's key verifies only the name its `alg` says; the key itself both.
            "keySet": jti[alg] if alg == published else "ERR_JWKS_NO_MATCHING_KEY",
            "key": jti[alg],
        }
        for alg in ALGS
    }
