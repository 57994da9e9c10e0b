"""The guard's conformance vectors (guard/vectors/, docs/guard-vectors.md), run against the
Python guard.

The runner reads only the JSON files, and is the reference for a guard in another
language: verify the token against the file's JWKS, issuer, clock and leeway; check that
it is for the plan declared; decide each call under its claims, completing or failing
steps as the events say; compare every answer with the file's. The last tests check that
the files are what scripts/generate_guard_vectors.py writes, and that they match their
schema.
"""

from __future__ import annotations

import importlib.util
import json
import math
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from guard.agent.decider import Decider
from guard.agent.session import PlanState
from guard.agent.verified import VerifiedToken
from guard.claims import IntentClaims
from guard.errors import DocumentInvalid, TokenInvalid, WrongIssuer
from guard.jwk import KeySet
from guard.plan import plan_hash, validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import CompiledPolicy
from guard.tokens import verify_intent_token

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "guard" / "vectors"
FILES = {
    name: json.loads((VECTORS / f"{name}.json").read_text("utf-8"))
    for name in ("tokens", "plans", "decisions")
}

# How the Python guard words each refusal a token vector names.
REASONS = {
    "bad_signature": "bad signature",
    "algorithm_not_accepted": "algorithm ",
    "header_not_accepted": "header",
    "unknown_kid": "unknown key id",
    "expired": "token expired",
    "issued_in_future": "token issued in the future",
}


def cases(kind: str) -> Any:
    return pytest.mark.parametrize(
        "case", FILES[kind]["cases"], ids=[case["name"] for case in FILES[kind]["cases"]]
    )


def verify(vectors: dict[str, Any], token: str) -> IntentClaims:
    """Step 1 of every vector: the token, verified as the guard verifies its answer."""
    return verify_intent_token(
        token,
        KeySet(vectors["jwks"]),
        issuer=vectors["issuer"],
        now=vectors["now"],
        leeway=vectors["leeway"],
    )


# --8<-- [start:tokens]
@cases("tokens")
def test_token(case):
    expect = case["expect"]
    assert plan_hash(validate_plan(case["plan"])) == case["planHash"]
    try:
        claims = verify(FILES["tokens"], case["token"])
    except WrongIssuer:
        assert (expect["code"], expect["reason"]) == ("token_invalid", "wrong_issuer")
        return
    except TokenInvalid as error:
        assert expect["code"] == "token_invalid"
        assert REASONS[expect["reason"]] in str(error)
        return
    if claims.ph != case["planHash"] or claims.ph != plan_hash(claims.plan):
        assert (expect["code"], expect["reason"]) == ("plan_swapped", "plan_hash_mismatch")
        return
    assert expect == {"valid": True, "jti": claims.jti, "sub": claims.sub, "ph": claims.ph}


# --8<-- [end:tokens]


@cases("plans")
def test_plan(case):
    expect = case["expect"]
    try:
        normal = validate_plan(case["plan"])
    except DocumentInvalid as error:
        assert expect == {"valid": False, "errors": sorted({e.path for e in error.errors})}
    else:
        assert expect == {"valid": True, "plan": normal, "hash": plan_hash(normal)}


# --8<-- [start:decisions]
@cases("decisions")
def test_decisions(case):
    vectors = FILES["decisions"]
    claims = verify(vectors, case["token"])
    assert claims.ph == plan_hash(validate_plan(case["plan"]))
    assert (claims.pol, claims.role, list(claims.groups)) == (
        validate_policy(case["policy"]),
        case["role"],
        case["groups"],
    )
    # The guard's own pieces, as guard.offline.call_decide puts them together.
    policy = CompiledPolicy(validate_policy(claims.pol), role=claims.role, groups=claims.groups)
    token = VerifiedToken(case["token"], claims, policy, float(claims.exp), math.inf, kid="")
    lock = threading.Lock()
    state = PlanState(claims.jti, claims.plan, claims.ph, token, report_arguments=False)
    decider = Decider(
        lock=lock, publish=lambda *a, **k: None, wake_refresher=lambda: None, auto_refresh=False
    )
    for number, event in enumerate(case["events"]):
        where = f"event {number}: {event}"
        if event["event"] == "check":
            decision = decider.decide(state, event["tool"], event["args"], vectors["now"])
            got = {"code": decision.code.value, "step": decision.step, "rule": decision.rule}
            if decision.amounts is not None:
                got["amounts"] = decision.amounts
            assert got == event["expect"], where
        elif event["event"] == "completed":
            with lock:
                state.complete_step(event["step"])
        elif event["event"] == "failed":
            with lock:
                state.fail_step(event["step"])
        else:
            got = {"outcome": state.outcome().value, "requiredNotRun": state.required_not_run()}
            assert got == event["expect"], where


# --8<-- [end:decisions]


# --- the files themselves ---------------------------------------------------------------


def test_the_files_are_what_the_generator_writes():
    """A change in the guard's behaviour is a diff of the vectors: regenerate them with
    ``python scripts/generate_guard_vectors.py`` and review it."""
    path = ROOT / "scripts" / "generate_guard_vectors.py"
    spec = importlib.util.spec_from_file_location("generate_guard_vectors", path)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for name, text in generator.files().items():
        assert (VECTORS / name).read_text("utf-8") == text, f"{name} is out of date"


@pytest.mark.parametrize("kind", sorted(FILES))
def test_each_file_matches_the_schema_and_ships_no_private_key(kind):
    schema = json.loads((VECTORS / "schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(FILES[kind])
    assert FILES[kind]["kind"] == kind
    assert all("d" not in key for key in FILES[kind]["jwks"]["keys"])


def test_the_vectors_reach_every_code_and_operator():
    checks = [
        event
        for case in FILES["decisions"]["cases"]
        for event in case["events"]
        if event["event"] == "check"
    ]
    assert {event["expect"]["code"] for event in checks} == {
        "allowed",
        "not_in_plan",
        "policy_denied",
        "max_calls_exceeded",
        "invalid_arguments",
        "out_of_order",
        "budget_exceeded",
        "unexpected_argument",
    }
    text = json.dumps(FILES["decisions"]["cases"])
    words = "eq in glob regex lte gte subpath url cidr argv type maxLength after budgets"
    for operator in [*words.split(), "additionalArgs"]:
        assert f'"{operator}"' in text, operator
    reasons = {case["expect"].get("reason") for case in FILES["tokens"]["cases"]}
    assert reasons - {None} == set(REASONS) | {"wrong_issuer", "plan_hash_mismatch"}
