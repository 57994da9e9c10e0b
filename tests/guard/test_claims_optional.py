"""The optional claims of issue 23: ``status``, ``cnf``, ``parent`` and ``act``, read back
from a verified token exactly as signed, and refused by name when mistyped."""

from __future__ import annotations

from typing import Any

import pytest

from guard.claims import MAX_ACT_DEPTH, IntentClaims
from guard.errors import TokenInvalid
from guard.tokens import verify_intent_token

from .test_tokens import ISSUER, KEYS, NOW, claims, sign

STATUS = {"status_list": {"idx": 7, "uri": "https://plangate.test/v1/status-lists/3"}}
PARENT = {"jti": "01JD0000000000000000000009", "ph": "a" * 64}
ACT = {"sub": "01JD000000000000000000000B", "act": {"sub": "01JD000000000000000000000A"}}


def _verified(**extra: Any) -> IntentClaims:
    return verify_intent_token(sign(claims(**extra)), KEYS, issuer=ISSUER, now=NOW)


def test_a_token_without_the_optional_claims_reads_none_for_each():
    verified = _verified()

    assert (verified.status, verified.cnf, verified.parent, verified.act) == (None,) * 4
    assert set(verified.to_payload()) == set(claims())


def test_every_optional_claim_round_trips_through_a_signature():
    extra = {"status": STATUS, "cnf": {"jkt": "thumbprint"}, "parent": PARENT, "act": ACT}

    verified = _verified(**extra)

    assert verified.status is not None and verified.status.idx == 7
    assert verified.cnf == "thumbprint"
    assert verified.parent is not None and verified.parent.jti == PARENT["jti"]
    assert verified.to_payload() == claims(**extra)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("status", {"status_list": {"idx": -1, "uri": "u"}}, "status.status_list.idx"),
        ("status", {"status_list": {"idx": True, "uri": "u"}}, "idx is not an integer"),
        ("status", {"status_list": {"idx": 1}}, "claim status"),
        ("status", [], "claim status"),
        ("cnf", {"jkt": ""}, "claim cnf"),
        ("cnf", {"x5t#S256": "abc"}, "claim cnf"),
        ("parent", {"jti": "x"}, "claim parent"),
        ("parent", {"jti": "x", "ph": 1}, "claim parent"),
        ("parent", {**PARENT, "extra": 1}, "claim parent"),
        ("act", {"act": {"sub": "a"}}, "claim act"),
        ("act", {"sub": "a", "act": "b"}, "claim act"),
    ],
)
def test_a_mistyped_optional_claim_is_refused_by_name(name, value, reason):
    with pytest.raises(TokenInvalid, match=reason):
        _verified(**{name: value})


def test_an_act_chain_deeper_than_the_limit_is_refused():
    def chain(depth: int) -> dict[str, Any]:
        level: dict[str, Any] = {"sub": "agent-0"}
        for index in range(1, depth):
            level = {"sub": f"agent-{index}", "act": level}
        return level

    assert _verified(act=chain(MAX_ACT_DEPTH)).act == chain(MAX_ACT_DEPTH)
    with pytest.raises(TokenInvalid, match="deeper than"):
        _verified(act=chain(MAX_ACT_DEPTH + 1))
