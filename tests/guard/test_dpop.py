"""guard.dpop: DPoP proofs (RFC 9449) made and verified without a server."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from guard.claims import IntentClaims
from guard.dpop import (
    DpopInvalid,
    DpopKey,
    access_token_hash,
    check_binding,
    htu_normalize,
    verify_proof,
)
from guard.jwk import b64url_encode, jwk_thumbprint
from guard.tokens import ed25519_jws

URL = "https://plangate.example/v1/plans/01ARZ3NDEKTSV4RRFFQ69G5FAV/refresh"
NOW = 1_800_000_000
KEY = DpopKey.generate()


def problem(proof: str | None, **options) -> str:
    options = {"htm": "POST", "htu": URL, "now": NOW, **options}
    with pytest.raises(DpopInvalid) as caught:
        verify_proof(proof, **options)
    return caught.value.problem


def hand_made(header: dict, claims: dict, key: Ed25519PrivateKey | None = None) -> str:
    """A proof with any header and claims, signed by `key` (default: KEY's pair is not
    reachable, so a fresh key whose jwk goes in the header unless one is given)."""
    private = key or Ed25519PrivateKey.generate()
    return ed25519_jws().encode(
        json.dumps(claims).encode(), private, algorithm=header.pop("alg", "EdDSA"), headers=header
    )


def good_claims(**overrides) -> dict:
    return {"jti": "j1", "htm": "POST", "htu": URL, "iat": NOW, **overrides}


def own_jwk(private: Ed25519PrivateKey) -> dict:
    return DpopKey(private).jwk


def test_a_proof_verifies_and_names_its_key():
    proof = KEY.proof(htm="post", htu=URL + "?q=1#f", access_token="pg_key", iat=NOW)

    verified = verify_proof(
        proof, htm="POST", htu=URL, access_token="pg_key", expected_jkt=KEY.jkt, now=NOW
    )

    assert verified.jkt == KEY.jkt == jwk_thumbprint(KEY.jwk)
    assert verified.iat == NOW
    header = jwt.get_unverified_header(proof)
    assert header == {"typ": "dpop+jwt", "alg": "EdDSA", "jwk": KEY.jwk}
    claims = jwt.decode(proof, options={"verify_signature": False})
    assert claims["htu"] == URL and claims["htm"] == "POST"
    assert claims["ath"] == access_token_hash("pg_key")


def test_each_proof_has_its_own_jti():
    first, second = (KEY.proof(htm="GET", htu=URL) for _ in range(2))
    assert (
        verify_proof(first, htm="GET", htu=URL).jti != verify_proof(second, htm="GET", htu=URL).jti
    )


def test_ath_is_rfc_9449s_hash():
    # RFC 9449 section 7.1's example access token and its ath.
    assert (
        access_token_hash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
        == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"
    )


@pytest.mark.parametrize(
    ("name", "proof", "options"),
    [
        ("missing", None, {}),
        ("malformed", "a.b", {}),
        ("malformed", "x" * 5000, {}),
        ("htm", KEY.proof(htm="GET", htu=URL, iat=NOW), {}),
        ("htu", KEY.proof(htm="POST", htu=URL + "x", iat=NOW), {}),
        ("iat", KEY.proof(htm="POST", htu=URL, iat=NOW - 120), {}),
        ("iat", KEY.proof(htm="POST", htu=URL, iat=NOW + 60), {}),
        ("ath", KEY.proof(htm="POST", htu=URL, iat=NOW), {"access_token": "pg_key"}),
        ("ath", KEY.proof(htm="POST", htu=URL, iat=NOW, access_token="a"), {"access_token": "b"}),
        ("jkt", KEY.proof(htm="POST", htu=URL, iat=NOW), {"expected_jkt": "x" * 43}),
    ],
)
def test_what_is_wrong_is_named(name, proof, options):
    assert problem(proof, **options) == name


def test_the_header_must_say_what_a_proof_is():
    private = Ed25519PrivateKey.generate()
    jwk = own_jwk(private)
    assert problem(hand_made({"typ": "JWT", "jwk": jwk}, good_claims(), private)) == "typ"
    assert problem(hand_made({"typ": "dpop+jwt"}, good_claims(), private)) == "jwk"
    with_d = {**jwk, "d": b64url_encode(b"\0" * 32)}
    assert problem(hand_made({"typ": "dpop+jwt", "jwk": with_d}, good_claims(), private)) == (
        "private_key"
    )
    ec = {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}
    assert problem(hand_made({"typ": "dpop+jwt", "jwk": ec}, good_claims(), private)) == "jwk"


def test_the_fully_specified_name_is_accepted_and_no_other():
    private = Ed25519PrivateKey.generate()
    header = {"typ": "dpop+jwt", "jwk": own_jwk(private), "alg": "Ed25519"}
    verify_proof(hand_made(dict(header), good_claims(), private), htm="POST", htu=URL, now=NOW)
    # alg none / HS256 never reach a signature check.
    for alg in ("none", "HS256", "ES256"):
        segments = hand_made(dict(header), good_claims(), private).split(".")
        forged = json.dumps({**header, "alg": alg}).encode()
        segments[0] = base64.urlsafe_b64encode(forged).rstrip(b"=").decode()
        assert problem(".".join(segments)) == "alg"


def test_a_key_in_the_header_that_did_not_sign_is_refused():
    signer, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    proof = hand_made({"typ": "dpop+jwt", "jwk": own_jwk(other)}, good_claims(), signer)
    assert problem(proof) == "signature"


@pytest.mark.parametrize(
    "claims",
    [
        good_claims(jti=""),
        good_claims(jti=7),
        good_claims(jti="j" * 129),
        {"htm": "POST", "htu": URL, "iat": NOW},
    ],
)
def test_a_proof_needs_a_usable_jti(claims):
    private = Ed25519PrivateKey.generate()
    assert problem(hand_made({"typ": "dpop+jwt", "jwk": own_jwk(private)}, claims, private)) == (
        "claims"
    )


@pytest.mark.parametrize("iat", ["1800000000", 1.8e9, True, None])
def test_iat_is_an_integer(iat):
    private = Ed25519PrivateKey.generate()
    proof = hand_made({"typ": "dpop+jwt", "jwk": own_jwk(private)}, good_claims(iat=iat), private)
    assert problem(proof) == "iat"


@given(age=st.integers(min_value=-5, max_value=65))
def test_a_proof_is_good_for_its_window_give_or_take_the_leeway(age):
    proof = KEY.proof(htm="POST", htu=URL, iat=NOW - age)
    assert verify_proof(proof, htm="POST", htu=URL, now=NOW).iat == NOW - age


@given(age=st.one_of(st.integers(max_value=-6), st.integers(min_value=66)))
def test_a_proof_outside_its_window_is_refused(age):
    assert problem(KEY.proof(htm="POST", htu=URL, iat=NOW - age)) == "iat"


@given(
    scheme=st.sampled_from(["http", "HTTPS", "https"]),
    host=st.sampled_from(["Plangate.Example", "plangate.example", "127.0.0.1", "[::1]"]),
    port=st.sampled_from(["", ":80", ":443", ":8000"]),
    path=st.from_regex(r"/[a-z0-9/]{0,20}", fullmatch=True),
    query=st.sampled_from(["", "?kid=x", "#frag", "?a=b#c"]),
)
def test_htu_compares_scheme_host_and_path_only(scheme, host, port, path, query):
    url = f"{scheme}://{host}{port}{path}{query}"
    normal = htu_normalize(url)
    assert "?" not in normal and "#" not in normal
    assert normal == htu_normalize(normal)
    assert normal.startswith(scheme.lower() + "://")
    proof = KEY.proof(htm="GET", htu=url, iat=NOW)
    assert verify_proof(proof, htm="GET", htu=f"{scheme}://{host}{port}{path}", now=NOW)


def test_a_server_may_give_several_names_of_the_same_url():
    proof = KEY.proof(htm="POST", htu="http://10.0.0.5:8000/v1/plans", iat=NOW)
    names = ("https://plangate.example/v1/plans", "http://10.0.0.5:8000/v1/plans")
    assert verify_proof(proof, htm="POST", htu=names, now=NOW).jkt == KEY.jkt


@given(other=st.text(min_size=1, max_size=40).filter(lambda text: text.isascii()))
def test_a_proof_for_one_access_token_is_no_proof_for_another(other):
    proof = KEY.proof(htm="POST", htu=URL, iat=NOW, access_token="pg_the_key")
    if other != "pg_the_key":
        assert problem(proof, access_token=other) == "ath"


def claims_bound_to(jkt: str | None) -> IntentClaims:
    payload = {"cnf": {"jkt": jkt}} if jkt else {}
    return payload  # type: ignore[return-value]  # check_binding reads a payload too


def test_check_binding_takes_the_holder_and_refuses_anyone_else():
    holder = KEY.proof(htm="POST", htu=URL, iat=NOW)
    assert check_binding(claims_bound_to(KEY.jkt), holder, htm="POST", htu=URL, now=NOW)

    stranger = DpopKey.generate().proof(htm="POST", htu=URL, iat=NOW)
    with pytest.raises(DpopInvalid) as caught:
        check_binding(claims_bound_to(KEY.jkt), stranger, htm="POST", htu=URL, now=NOW)
    assert caught.value.problem == "jkt"
    with pytest.raises(DpopInvalid):
        check_binding({"cnf": {"x5t#S256": "abc"}}, holder, htm="POST", htu=URL, now=NOW)


def test_an_unbound_token_needs_no_proof():
    assert check_binding(claims_bound_to(None), None, htm="POST", htu=URL) is None


def test_the_private_key_stays_out_of_the_repr_and_the_jwk():
    assert "d" not in KEY.jwk
    assert repr(KEY) == f"DpopKey(jkt={KEY.jkt!r})"
