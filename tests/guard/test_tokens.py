"""Intent token verification: algorithm pinning, key selection, signature, claims."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key as rsa_key
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwt as jose_jwt
from joserfc.jwk import OKPKey

from guard.claims import IntentClaims
from guard.errors import TokenInvalid, WrongIssuer
from guard.jwk import KeySet, jwk_thumbprint, public_jwk
from guard.plan import plan_hash, validate_plan
from guard.policy import policy_hash, validate_policy
from guard.tokens import unverified_claims, unverified_header, verify_intent_token, verify_token

from .strategies import lone_surrogates, wild_text

ISSUER = "https://plangate.test"
NOW = 1_800_000_000

PRIVATE_KEY = Ed25519PrivateKey.generate()
PUBLIC_KEY = PRIVATE_KEY.public_key()
KID = jwk_thumbprint(public_jwk(PUBLIC_KEY))
KEYS = KeySet({"keys": [{**public_jwk(PUBLIC_KEY), "kid": KID, "use": "sig", "alg": "EdDSA"}]})

PLAN = validate_plan(
    {"version": 1, "goal": "g", "user": "alice@acme.dev", "steps": [{"tool": "search"}]}
)
POLICY = validate_policy({"version": 1, "default": "allow", "rules": []})


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(**changes: Any) -> dict[str, Any]:
    values = {
        "iss": ISSUER,
        "sub": "alice@acme.dev",
        "jti": "01JD0000000000000000000000",
        "iat": NOW,
        "exp": NOW + 900,
        "ph": plan_hash(PLAN),
        "plan": PLAN,
        "agent": "01JD0000000000000000000001",
        "pol": POLICY,
        "polv": 3,
        "polh": policy_hash(POLICY),
        "role": "engineer",
        "groups": ["oncall", "platform"],
    }
    values.update(changes)
    return {key: value for key, value in values.items() if value is not None}


def sign(payload: dict[str, Any] | None = None, **headers: Any) -> str:
    return jwt.encode(
        claims() if payload is None else payload,
        PRIVATE_KEY,
        algorithm="EdDSA",
        headers={"kid": KID, **headers},
    )


def sign_raw(header: dict[str, Any], payload: Any, key: Any = PRIVATE_KEY) -> str:
    """A compact JWS with exactly this header, signed with Ed25519 regardless of `alg`.

    `payload` is JSON-encoded unless it is already bytes."""
    payload_bytes = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(payload_bytes)}"
    return f"{signing_input}.{b64url(key.sign(signing_input.encode()))}"


def verify(token: str, **options: Any) -> dict[str, Any]:
    return verify_token(token, KEYS, issuer=ISSUER, now=NOW, **options)


def reason(token: str, **options: Any) -> str:
    with pytest.raises(TokenInvalid) as caught:
        verify(token, **options)
    return caught.value.reason


# --- the happy path ------------------------------------------------------------------------


def test_valid_token_verifies_and_returns_its_claims() -> None:
    assert verify(sign()) == claims()


def test_fully_specified_ed25519_algorithm_is_accepted() -> None:
    token = sign_raw({"alg": "Ed25519", "kid": KID, "typ": "JWT"}, claims())
    assert verify(token)["jti"] == claims()["jti"]


def test_token_verifies_with_the_current_clock_by_default() -> None:
    now = int(time.time())
    token = sign(claims(iat=now, exp=now + 60))
    assert verify_token(token, KEYS, issuer=ISSUER)["iat"] == now


# --- tampering -----------------------------------------------------------------------------


def test_tampered_payload_fails() -> None:
    header, _, signature = sign().split(".")
    forged = b64url(json.dumps(claims(sub="mallory@acme.dev")).encode())
    assert reason(f"{header}.{forged}.{signature}") == "bad signature"


def test_tampered_header_fails() -> None:
    _, payload, signature = sign().split(".")
    header = b64url(json.dumps({"alg": "EdDSA", "kid": KID, "typ": "x"}).encode())
    assert reason(f"{header}.{payload}.{signature}") == "bad signature"


def test_tampered_signature_fails() -> None:
    header, payload, signature = sign().split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
    raw[0] ^= 1
    assert reason(f"{header}.{payload}.{b64url(bytes(raw))}") == "bad signature"


def test_signature_of_another_key_fails() -> None:
    other = Ed25519PrivateKey.generate()
    token = jwt.encode(claims(), other, algorithm="EdDSA", headers={"kid": KID})
    assert reason(token) == "bad signature"


def test_truncated_signature_fails() -> None:
    header, payload, signature = sign().split(".")
    assert reason(f"{header}.{payload}.{signature[:40]}") == "bad signature"


# --- algorithms and header parameters ------------------------------------------------------


def test_alg_none_is_rejected() -> None:
    header = b64url(json.dumps({"alg": "none", "kid": KID}).encode())
    payload = b64url(json.dumps(claims()).encode())
    assert reason(f"{header}.{payload}.") in {
        "token has an empty part",
        "algorithm none is not accepted",
    }
    assert reason(f"{header}.{payload}.AAAA") == "algorithm none is not accepted"


def test_hmac_signed_with_the_public_key_is_rejected() -> None:
    # The classic confusion: an HMAC keyed with the (public) verification key bytes.
    secret = PUBLIC_KEY.public_bytes(Encoding.Raw, PublicFormat.Raw)
    header = b64url(json.dumps({"alg": "HS256", "kid": KID}).encode())
    payload = b64url(json.dumps(claims()).encode())
    mac = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert reason(f"{header}.{payload}.{b64url(mac)}") == "algorithm HS256 is not accepted"
    jwk_secret = json.dumps(public_jwk(PUBLIC_KEY)).encode()
    mac = hmac.new(jwk_secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert reason(f"{header}.{payload}.{b64url(mac)}") == "algorithm HS256 is not accepted"


def test_rsa_and_ecdsa_tokens_are_rejected() -> None:
    rs256 = jwt.encode(
        claims(), rsa_key(public_exponent=65537, key_size=2048), "RS256", headers={"kid": KID}
    )
    assert reason(rs256) == "algorithm RS256 is not accepted"
    es256 = jwt.encode(claims(), generate_private_key(SECP256R1()), "ES256", headers={"kid": KID})
    assert reason(es256) == "algorithm ES256 is not accepted"


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "PS256", "HS512", "eddsa", "EdDSA ", ""])
def test_any_other_algorithm_name_is_rejected_even_with_a_valid_ed25519_signature(
    algorithm: str,
) -> None:
    token = sign_raw({"alg": algorithm, "kid": KID}, claims())
    assert reason(token) == f"algorithm {algorithm} is not accepted"


def test_missing_or_non_string_algorithm_is_rejected() -> None:
    assert reason(sign_raw({"kid": KID}, claims())) == "header has no algorithm"
    assert "not accepted" in reason(sign_raw({"alg": ["EdDSA"], "kid": KID}, claims()))


def test_unknown_kid_fails() -> None:
    assert reason(sign(kid="someone-elses-key")) == "unknown key id"


def test_missing_kid_fails() -> None:
    assert reason(sign_raw({"alg": "EdDSA"}, claims())) == "header has no key id"
    assert reason(sign_raw({"alg": "EdDSA", "kid": 7}, claims())) == "header has no key id"


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("jku", "https://evil.example/jwks.json"),
        ("x5u", "https://evil.example/cert.pem"),
        ("jwk", {"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}),
        ("x5c", ["MIIB"]),
    ],
)
def test_header_naming_or_embedding_a_key_fails(parameter: str, value: Any) -> None:
    token = sign_raw({"alg": "EdDSA", "kid": KID, parameter: value}, claims())
    assert reason(token) == f"header parameter {parameter} is not accepted"


def test_jwk_header_with_the_right_key_is_still_refused() -> None:
    token = sign_raw({"alg": "EdDSA", "kid": KID, "jwk": public_jwk(PUBLIC_KEY)}, claims())
    assert reason(token) == "header parameter jwk is not accepted"


def test_unencoded_payload_header_fails() -> None:
    token = sign_raw({"alg": "EdDSA", "kid": KID, "b64": False}, claims())
    assert reason(token) == "unencoded payloads (b64) are not accepted"


def test_crit_header_fails() -> None:
    token = sign_raw({"alg": "EdDSA", "kid": KID, "crit": ["exp"], "exp": 1}, claims())
    assert "critical" in reason(token)
    assert "critical" in reason(sign_raw({"alg": "EdDSA", "kid": KID, "crit": []}, claims()))


# --- claims --------------------------------------------------------------------------------


def test_expired_token_fails() -> None:
    assert reason(sign(claims(iat=NOW - 1000, exp=NOW - 31))) == "token expired"


def test_expiry_within_leeway_passes() -> None:
    verify(sign(claims(iat=NOW - 1000, exp=NOW - 29)))
    assert reason(sign(claims(iat=NOW - 1000, exp=NOW - 5)), leeway=0) == "token expired"


def test_expired_token_passes_when_expiry_is_not_required() -> None:
    token = sign(claims(iat=NOW - 10_000, exp=NOW - 9_000))
    assert verify(token, require_unexpired=False)["exp"] == NOW - 9_000


def test_token_issued_in_the_future_fails() -> None:
    assert reason(sign(claims(iat=NOW + 60, exp=NOW + 960))) == "token issued in the future"
    verify(sign(claims(iat=NOW + 20, exp=NOW + 920)))


def test_not_before_in_the_future_fails() -> None:
    assert reason(sign(claims(nbf=NOW + 120))) == "token not yet valid"
    verify(sign(claims(nbf=NOW)))


def test_wrong_issuer_fails_naming_the_expected_and_the_presented_issuer() -> None:
    with pytest.raises(WrongIssuer) as refused:
        verify_token(
            sign(claims(iss="http://localhost:8000")), KEYS, issuer="http://127.0.0.1:8000", now=NOW
        )
    assert refused.value.reason == (
        'wrong issuer: the token names "http://localhost:8000", expected "http://127.0.0.1:8000"'
    )
    assert (refused.value.expected, refused.value.presented) == (
        "http://127.0.0.1:8000",
        "http://localhost:8000",
    )
    payload = claims()
    del payload["iss"]
    assert reason(sign(payload)) == f'wrong issuer: the token names no issuer, expected "{ISSUER}"'
    not_text = sign_raw({"alg": "EdDSA", "kid": KID}, claims(iss=["x"]))
    assert reason(not_text) == f'wrong issuer: the token names ["x"], expected "{ISSUER}"'


@pytest.mark.parametrize("claim", ["exp", "iat"])
@pytest.mark.parametrize("value", ['"1800000000"', "true", None, "[1]", "1e400", "-1e400", "{}"])
def test_times_must_be_finite_numbers(claim: str, value: str | None) -> None:
    payload = claims()
    if value is None:
        del payload[claim]
    else:
        payload[claim] = "VALUE"
    payload_bytes = json.dumps(payload).encode().replace(b'"VALUE"', (value or "").encode())
    token = sign_raw({"alg": "EdDSA", "kid": KID}, payload_bytes)
    assert claim in reason(token)


def test_huge_integer_times_are_compared_not_crashing() -> None:
    payload = json.dumps(claims(exp="HUGE")).encode().replace(b'"HUGE"', b"1" + b"0" * 400)
    assert verify(sign_raw({"alg": "EdDSA", "kid": KID}, payload))["exp"] == 10**400
    payload = json.dumps(claims(iat="HUGE")).encode().replace(b'"HUGE"', b"1" + b"0" * 400)
    assert reason(sign_raw({"alg": "EdDSA", "kid": KID}, payload)) == "token issued in the future"


@pytest.mark.parametrize(
    "claim",
    ["sub", "jti", "ph", "plan", "agent", "pol", "polv", "polh", "role", "groups"],
)
def test_required_claims(claim: str) -> None:
    payload = claims()
    del payload[claim]
    assert reason(sign(payload)) == f"claim {claim} is missing"


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("sub", 1),
        ("jti", None),
        ("ph", ["x"]),
        ("plan", "plan"),
        ("agent", 1),
        ("pol", []),
        ("polv", "3"),
        ("polv", True),
        ("polv", 3.0),
        ("polh", None),
        ("role", 5),
        ("role", ["sre"]),
        ("groups", "oncall"),
        ("groups", ["oncall", 1]),
        ("groups", None),
        ("exp", NOW + 900.5),
        ("iat", float(NOW)),
    ],
)
def test_required_claims_have_types(claim: str, value: Any) -> None:
    payload = claims()
    payload[claim] = value
    assert claim in reason(sign_raw({"alg": "EdDSA", "kid": KID}, payload))


def test_a_null_role_and_no_groups_are_claims_too() -> None:
    payload = {**claims(), "role": None, "groups": []}
    verified = verify_intent_token(sign(payload), KEYS, issuer=ISSUER, now=NOW)
    assert (verified.role, verified.groups) == (None, ())


def test_verify_intent_token_returns_the_typed_claims() -> None:
    verified = verify_intent_token(sign(), KEYS, issuer=ISSUER, now=NOW)

    assert verified == IntentClaims.from_payload(claims())
    assert verified.groups == ("oncall", "platform")
    assert verified.agent == claims()["agent"]
    assert verified.to_payload() == claims()


def test_intent_claims_round_trip_through_a_signed_token() -> None:
    built = IntentClaims.from_payload(claims())
    assert verify_intent_token(sign(built.to_payload()), KEYS, issuer=ISSUER, now=NOW) == built


def test_claims_that_are_not_intent_claims_are_kept_in_the_payload_only() -> None:
    token = sign({**claims(), "nbf": NOW, "x-extra": 1})
    assert verify(token)["x-extra"] == 1
    assert verify_intent_token(token, KEYS, issuer=ISSUER, now=NOW) == IntentClaims.from_payload(
        claims()
    )


def test_intent_claims_from_payload_names_the_bad_claim() -> None:
    with pytest.raises(TokenInvalid, match="claim polv is not an integer"):
        IntentClaims.from_payload({**claims(), "polv": "3"})
    with pytest.raises(TokenInvalid, match="claim iss is missing"):
        IntentClaims.from_payload({key: value for key, value in claims().items() if key != "iss"})


@pytest.mark.filterwarnings("ignore::joserfc.errors.SecurityWarning")  # EdDSA, per RFC 9864
@pytest.mark.parametrize("algorithm", ["EdDSA", "Ed25519"])
def test_a_token_signed_by_an_independent_jose_stack_verifies(algorithm: str) -> None:
    # joserfc shares no code with PyJWT: both must agree on the bytes of an Ed25519 JWS.
    jose_key = OKPKey.import_key(
        {**public_jwk(PUBLIC_KEY), "d": b64url(PRIVATE_KEY.private_bytes_raw())}
    )
    token = jose_jwt.encode(
        {"alg": algorithm, "kid": KID}, claims(), jose_key, algorithms=[algorithm]
    )

    assert unverified_header(token)["alg"] == algorithm
    assert verify(token) == claims()


def test_signature_is_checked_before_claims() -> None:
    # An expired token from the wrong issuer with a bad signature: the signature is blamed.
    header, _, signature = sign().split(".")
    forged = b64url(json.dumps(claims(iss="x", exp=0)).encode())
    assert reason(f"{header}.{forged}.{signature}") == "bad signature"


# --- strict parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        "",
        "abc",
        "a.b",
        "a.b.c.d",
        "..",
        "eyJhbGciOiJFZERTQSJ9..sig",
        "!!!.@@@.###",
        "a=.b.c",
    ],
)
def test_malformed_compact_serialisation_fails(token: str) -> None:
    reason(token)


def test_padded_base64_fails() -> None:
    header, payload, signature = sign().split(".")
    assert "base64url" in reason(f"{header}==.{payload}.{signature}")


def test_non_canonical_base64_fails() -> None:
    header, payload, signature = sign().split(".")
    # 64 bytes encode to 86 characters whose last one carries 4 unused bits.
    last = signature[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    sibling = alphabet[alphabet.index(last) ^ 1]
    assert "base64url" in reason(f"{header}.{payload}.{signature[:-1]}{sibling}")


def test_header_that_is_not_a_json_object_fails() -> None:
    _, payload, signature = sign().split(".")
    assert "header" in reason(f"{b64url(b'[1]')}.{payload}.{signature}")
    assert "header" in reason(f"{b64url(b'not json')}.{payload}.{signature}")
    assert "header" in reason(f"{b64url(bytes([0xFF, 0xFE]))}.{payload}.{signature}")


def test_duplicate_header_members_fail() -> None:
    header = b64url(b'{"alg":"none","alg":"EdDSA","kid":"' + KID.encode() + b'"}')
    _, payload, signature = sign().split(".")
    assert "header" in reason(f"{header}.{payload}.{signature}")


def test_payload_that_is_not_a_json_object_fails_after_a_valid_signature() -> None:
    header = b64url(json.dumps({"alg": "EdDSA", "kid": KID}).encode())
    payload = b64url(b'"just a string"')
    signing_input = f"{header}.{payload}"
    token = f"{signing_input}.{b64url(PRIVATE_KEY.sign(signing_input.encode()))}"
    assert reason(token) == "payload is not a JSON object"


def test_nan_in_payload_fails() -> None:
    header = b64url(json.dumps({"alg": "EdDSA", "kid": KID}).encode())
    payload = b64url(json.dumps(claims(exp=float("nan"))).encode())
    signing_input = f"{header}.{payload}"
    token = f"{signing_input}.{b64url(PRIVATE_KEY.sign(signing_input.encode()))}"
    assert reason(token) == "payload is not valid JSON"


def test_non_string_token_fails() -> None:
    with pytest.raises(TokenInvalid):
        verify_token(b"a.b.c", KEYS, issuer=ISSUER)  # type: ignore[arg-type]
    with pytest.raises(TokenInvalid):
        verify_token(None, KEYS, issuer=ISSUER)  # type: ignore[arg-type]


@given(st.text(max_size=300) | wild_text | st.from_regex(r"[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-.]*"))
def test_garbage_text_only_raises_token_invalid(text: str) -> None:
    with pytest.raises(TokenInvalid):
        verify(text)
    for helper in (unverified_header, unverified_claims):
        with contextlib.suppress(TokenInvalid):
            helper(text)


@given(st.lists(st.binary(max_size=80), min_size=1, max_size=4))
def test_garbage_base64_parts_only_raise_token_invalid(parts: list[bytes]) -> None:
    with pytest.raises(TokenInvalid):
        verify(".".join(b64url(part) for part in parts))


@given(
    st.dictionaries(
        st.sampled_from(["alg", "kid", "crit", "jku", "typ", "b64"]),
        st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.just(KID),
    ),
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
        lambda children: st.lists(children) | st.dictionaries(st.text(max_size=5), children),
        max_leaves=10,
    ),
)
def test_garbage_headers_and_payloads_only_raise_token_invalid(
    header: dict[str, Any], payload: Any
) -> None:
    token = sign_raw(header, payload) if _json_ok(payload) else "x.y.z"
    with contextlib.suppress(TokenInvalid):
        verify(token)


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def test_deeply_nested_json_fails_cleanly() -> None:
    header = b64url(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(TokenInvalid):
        unverified_header(f"{header}.e30.AAAA")


# --- unverified helpers --------------------------------------------------------------------


def test_unverified_header_and_claims() -> None:
    token = sign()
    assert unverified_header(token) == {"alg": "EdDSA", "kid": KID, "typ": "JWT"}
    assert unverified_claims(token)["jti"] == claims()["jti"]


def test_unverified_helpers_reject_garbage() -> None:
    with pytest.raises(TokenInvalid):
        unverified_header("not-a-token")
    with pytest.raises(TokenInvalid):
        unverified_claims("a.b")


# --- keys ----------------------------------------------------------------------------------


def test_public_jwk_shape() -> None:
    jwk = public_jwk(PUBLIC_KEY)
    assert set(jwk) == {"kty", "crv", "x"}
    assert (jwk["kty"], jwk["crv"]) == ("OKP", "Ed25519")
    assert base64.urlsafe_b64decode(jwk["x"] + "=") == PUBLIC_KEY.public_bytes(
        Encoding.Raw, PublicFormat.Raw
    )


def test_thumbprint_matches_joserfc() -> None:
    for _ in range(5):
        key = Ed25519PrivateKey.generate().public_key()
        jwk = public_jwk(key)
        assert jwk_thumbprint(jwk) == OKPKey.import_key(jwk).thumbprint()


def test_thumbprint_ignores_optional_members() -> None:
    jwk = public_jwk(PUBLIC_KEY)
    assert jwk_thumbprint({**jwk, "kid": "x", "use": "sig", "alg": "EdDSA"}) == jwk_thumbprint(jwk)


def test_thumbprint_matches_the_rfc_8037_example() -> None:
    # RFC 8037, appendix A.3.
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    assert jwk_thumbprint(jwk) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_thumbprint_rejects_incomplete_keys() -> None:
    with pytest.raises(ValueError):
        jwk_thumbprint({"kty": "OKP", "crv": "Ed25519"})
    with pytest.raises(ValueError):
        jwk_thumbprint({"kty": "weird"})
    with pytest.raises(ValueError):
        jwk_thumbprint({"kty": ["OKP"]})


def test_key_set_ignores_keys_it_cannot_use() -> None:
    good = {**public_jwk(PUBLIC_KEY), "kid": "good"}
    keys = KeySet(
        {
            "keys": [
                "not a key",
                None,
                {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa"},
                {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA", "kid": "ec"},
                {"kty": "OKP", "crv": "X25519", "x": good["x"], "kid": "x25519"},
                {"kty": "OKP", "crv": "Ed25519", "kid": "no-x"},
                {"kty": "OKP", "crv": "Ed25519", "x": "short", "kid": "short"},
                {"kty": "OKP", "crv": "Ed25519", "x": good["x"] + "==", "kid": "padded"},
                {**good, "kid": "enc", "use": "enc"},
                {**good, "kid": "hs", "alg": "HS256"},
                {**good, "kid": 5},
                {**good, "kid": "listed-alg", "alg": ["EdDSA"]},
                {**good, "kid": "listed-use", "use": ["sig"]},
                {**good, "kid": "no-verify", "key_ops": ["sign"]},
                {**good, "kid": "bad-ops", "key_ops": "verify"},
                {"kty": ["OKP"], "crv": "Ed25519", "x": good["x"], "kid": "listed-kty"},
                good,
            ]
        }
    )
    assert keys.kids == ("good",)
    assert keys.get("good") is not None
    assert keys.get("rsa") is None
    assert keys.get(["good"]) is None
    assert "good" in keys
    assert len(keys) == 1


@pytest.mark.parametrize("jwks", [None, {}, {"keys": "x"}, [], "jwks", {"keys": [[]]}])
def test_key_set_from_garbage_is_empty(jwks: Any) -> None:
    assert len(KeySet(jwks)) == 0


def test_key_without_kid_is_filed_under_its_thumbprint() -> None:
    keys = KeySet.from_public_keys([PUBLIC_KEY])
    assert keys.kids == (KID,)
    assert verify_token(sign(), keys, issuer=ISSUER, now=NOW)["sub"] == "alice@acme.dev"


def test_rotated_key_set_verifies_tokens_of_every_listed_key() -> None:
    new_private = Ed25519PrivateKey.generate()
    new_kid = jwk_thumbprint(public_jwk(new_private.public_key()))
    keys = KeySet.from_public_keys([PUBLIC_KEY, new_private.public_key()])
    old_token = sign()
    new_token = jwt.encode(claims(), new_private, algorithm="EdDSA", headers={"kid": new_kid})
    assert verify_token(old_token, keys, issuer=ISSUER, now=NOW)
    assert verify_token(new_token, keys, issuer=ISSUER, now=NOW)
    crossed = jwt.encode(claims(), new_private, algorithm="EdDSA", headers={"kid": KID})
    with pytest.raises(TokenInvalid, match="bad signature"):
        verify_token(crossed, keys, issuer=ISSUER, now=NOW)


# --- malformed tokens: only ever TokenInvalid ----------------------------------------------

SEGMENTS = ("header", "payload", "signature")


def with_text_in(token: str, segment: str, text: str, position: int = 3) -> str:
    parts = token.split(".")
    index = SEGMENTS.index(segment)
    parts[index] = parts[index][:position] + text + parts[index][position:]
    return ".".join(parts)


@pytest.mark.parametrize("segment", SEGMENTS)
@pytest.mark.parametrize("text", ["é", "ü", "\u2603", "\U0001f600", "\ud800", "\x00", " "])
def test_a_non_ascii_character_in_any_segment_is_token_invalid(segment: str, text: str) -> None:
    token = with_text_in(sign(), segment, text)

    with pytest.raises(TokenInvalid):
        verify(token)


def test_a_non_ascii_payload_is_token_invalid_even_when_expiry_is_not_required() -> None:
    # The control plane verifies refresh tokens this way: an expired token may refresh.
    token = with_text_in(sign(), "payload", "é")

    with pytest.raises(TokenInvalid, match="payload"):
        verify(token, require_unexpired=False)


mutation_characters = st.characters() | lone_surrogates | st.sampled_from(".-_=+/é")


@st.composite
def mutated_tokens(draw: st.DrawFn) -> str:
    """A valid token with characters replaced, inserted or deleted anywhere in it."""
    token = list(sign())
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        position = draw(st.integers(min_value=0, max_value=len(token)))
        edit = draw(st.sampled_from(["replace", "insert", "delete"]))
        if edit == "insert" or position == len(token):
            token.insert(position, draw(mutation_characters))
        elif edit == "replace":
            token[position] = draw(mutation_characters)
        else:
            del token[position]
    return "".join(token)


# Four times the profile: mutated tokens are a wide space, each cheap to verify.
@settings(max_examples=4 * settings.default.max_examples)
@given(mutated_tokens())
def test_a_mutated_token_only_ever_raises_token_invalid(token: str) -> None:
    try:
        claims_seen = verify(token)
    except TokenInvalid:
        return
    # Only a mutation that left the token unchanged (a character replaced by itself) may
    # verify; base64url has exactly one spelling of each signature.
    assert token == sign()
    assert claims_seen == claims()


# --- apr: the approval a token carries -----------------------------------------------------


def test_a_signed_apr_for_the_tokens_own_plan_hash_verifies():
    apr = {"by": "carol@acme.dev", "at": NOW - 5, "ph": plan_hash(PLAN)}

    verified = verify_intent_token(sign(claims(apr=apr)), KEYS, issuer=ISSUER, now=NOW)

    assert verified.apr is not None and verified.apr.to_payload() == apr


def test_a_signed_apr_for_another_plan_hash_is_refused_by_every_verification():
    token = sign(claims(apr={"by": "carol@acme.dev", "at": NOW - 5, "ph": "0" * 64}))

    with pytest.raises(TokenInvalid, match="apr covers another plan hash"):
        verify_intent_token(token, KEYS, issuer=ISSUER, now=NOW)
    assert "apr" in reason(token)
