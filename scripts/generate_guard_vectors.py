"""Write the guard's conformance vectors (guard/vectors/*.json) from the Python guard.

    .venv/bin/python scripts/generate_guard_vectors.py          # rewrite the files
    .venv/bin/python scripts/generate_guard_vectors.py --check  # exit 1 if they differ

The cases are written here; every expectation in the files (a decision's code, step, rule
and amounts, a token's outcome, a plan's errors and hash) is what the Python guard answers,
and each case also names the code it is meant to show (``want``), so that a case that no
longer shows what it was written for stops the generator instead of changing silently.
The output is deterministic: a fixed Ed25519 key (derived from a fixed seed, and kept
here: only its public half is written), fixed ``iat``/``exp`` and a fixed clock. A change
in the guard's behaviour shows up as a diff of the vector files (tests/guard/test_vectors.py
compares them with this script's output). See docs/guard-vectors.md.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import hmac
import json
import math
import sys
import threading
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from guard.agent.decider import Decider  # noqa: E402
from guard.agent.session import PlanState  # noqa: E402
from guard.agent.verified import VerifiedToken  # noqa: E402
from guard.errors import DocumentInvalid, TokenInvalid, WrongIssuer  # noqa: E402
from guard.jwk import KeySet, jwk_thumbprint, public_jwk  # noqa: E402
from guard.plan import plan_hash, validate_plan  # noqa: E402
from guard.policy import policy_hash, validate_policy  # noqa: E402
from guard.policy_evaluation import CompiledPolicy  # noqa: E402
from guard.tokens import GUARD_CLOCK_SKEW_SECONDS, verify_intent_token  # noqa: E402

VECTORS: Final = ROOT / "guard" / "vectors"
FORMAT: Final = "plangate-guard-vectors"
FORMAT_VERSION: Final = 1

# The test key: never a real one. Only its public JWK is written to the vector files.
_SEED: Final = hashlib.sha256(b"plangate guard conformance vectors, test key 1").digest()
_KEY: Final = Ed25519PrivateKey.from_private_bytes(_SEED)
PUBLIC_JWK: Final = public_jwk(_KEY.public_key())
KID: Final = jwk_thumbprint(PUBLIC_JWK)
JWKS: Final = {"keys": [{**PUBLIC_JWK, "kid": KID, "use": "sig", "alg": "Ed25519"}]}

ISSUER: Final = "https://plangate.example"
NOW: Final = 1_800_000_000  # the verifier's clock, in Unix seconds
IAT: Final = NOW - 60
EXP: Final = NOW + 840
LEEWAY: Final = GUARD_CLOCK_SKEW_SECONDS
PLAN_ID: Final = "01JD0000000000000000000000"
AGENT: Final = "01JD0000000000000000000001"

ALLOW_ALL: Final = {"version": 1, "default": "allow", "rules": []}


# --- signing ---------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sign(payload: dict[str, Any], *, alg: str = "EdDSA", kid: str = KID, **header: Any) -> str:
    """A compact JWS of `payload`, signed with the test key (Ed25519 is deterministic)."""
    protected = {"alg": alg, "kid": kid, "typ": "JWT", **header}
    signing_input = _b64(_json(protected)) + "." + _b64(_json(payload))
    return signing_input + "." + _b64(_KEY.sign(signing_input.encode("ascii")))


def claims(
    plan: dict[str, Any],
    policy: dict[str, Any] = ALLOW_ALL,
    *,
    role: str | None = None,
    groups: tuple[str, ...] = (),
    **changes: Any,
) -> dict[str, Any]:
    """The claims the control plane signs for a declared `plan` under `policy`."""
    normal = validate_plan(plan)
    normal_policy = validate_policy(policy)
    payload = {
        "iss": ISSUER,
        "sub": normal["user"],
        "jti": PLAN_ID,
        "iat": IAT,
        "exp": EXP,
        "ph": plan_hash(normal),
        "plan": normal,
        "agent": AGENT,
        "pol": normal_policy,
        "polv": 1,
        "polh": policy_hash(normal_policy),
        "role": role,
        "groups": sorted(groups),
    }
    payload.update(changes)
    return payload


# --- what the Python guard answers ----------------------------------------------------


def token_outcome(token: str, plan: dict[str, Any]) -> dict[str, Any]:
    """Verify `token` as a guard verifies its declaration's answer for `plan`."""
    try:
        verified = verify_intent_token(token, KeySet(JWKS), issuer=ISSUER, now=NOW, leeway=LEEWAY)
    except WrongIssuer:
        return {"valid": False, "code": "token_invalid", "reason": "wrong_issuer"}
    except TokenInvalid as error:
        return {"valid": False, "code": "token_invalid", "reason": _reason(str(error))}
    if verified.ph != plan_hash(validate_plan(plan)) or verified.ph != plan_hash(verified.plan):
        return {"valid": False, "code": "plan_swapped", "reason": "plan_hash_mismatch"}
    return {"valid": True, "jti": verified.jti, "sub": verified.sub, "ph": verified.ph}


_REASONS: Final = {
    "bad signature": "bad_signature",
    "algorithm ": "algorithm_not_accepted",
    "header parameter ": "header_not_accepted",
    "critical header": "header_not_accepted",
    "unknown key id": "unknown_kid",
    "token expired": "expired",
    "token issued in the future": "issued_in_future",
}


def _reason(message: str) -> str:
    for text, reason in _REASONS.items():
        if text in message:
            return reason
    raise AssertionError(f"a token refusal no vector names: {message}")


class Run:
    """One plan under one verified token, decided as the guard decides (guard.offline)."""

    def __init__(self, token: str) -> None:
        verified = verify_intent_token(token, KeySet(JWKS), issuer=ISSUER, now=NOW, leeway=LEEWAY)
        policy = CompiledPolicy(
            validate_policy(verified.pol), role=verified.role, groups=verified.groups
        )
        held = VerifiedToken(token, verified, policy, float(verified.exp), math.inf, kid=KID)
        self.lock = threading.Lock()
        self.state = PlanState(verified.jti, verified.plan, verified.ph, held, False)
        self.decider = Decider(
            lock=self.lock, publish=_nothing, wake_refresher=_nothing, auto_refresh=False
        )

    def check(self, tool: str, args: Any) -> dict[str, Any]:
        decision = self.decider.decide(self.state, tool, args, float(NOW))
        expect: dict[str, Any] = {
            "code": decision.code.value,
            "step": decision.step,
            "rule": decision.rule,
        }
        if decision.amounts is not None:
            expect["amounts"] = decision.amounts
        return expect

    def end(self) -> dict[str, Any]:
        return {
            "outcome": self.state.outcome().value,
            "requiredNotRun": self.state.required_not_run(),
        }


def _nothing(*args: Any, **kwargs: Any) -> None:
    pass


# --- the cases -------------------------------------------------------------------------


def check(tool: str, args: Any, want: str) -> dict[str, Any]:
    return {"event": "check", "tool": tool, "args": args, "want": want}


def completed(step: int) -> dict[str, Any]:
    return {"event": "completed", "step": step}


def failed(step: int) -> dict[str, Any]:
    return {"event": "failed", "step": step}


def end(want: str) -> dict[str, Any]:
    return {"event": "end", "want": want}


def v1(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "goal": "Tidy the docs", "user": "alice@acme.dev", "steps": list(steps)}


def v2(*steps: dict[str, Any], budgets: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "version": 2,
        "goal": "Refund the late orders",
        "user": "alice@acme.dev",
        "steps": list(steps),
    }
    if budgets is not None:
        plan["budgets"] = budgets
    return plan


OPERATORS_V1: Final = v1(
    {"tool": "repo_read", "args": {"repo": {"eq": "acme/app"}}},
    {"tool": "issue_label", "args": {"label": {"in": ["bug", "docs"]}}},
    {"tool": "file_read", "args": {"path": {"glob": "docs/*.md"}}},
    {"tool": "branch_create", "args": {"name": {"regex": "^feat/[a-z-]+$"}}},
    {"tool": "refund", "args": {"amount": {"lte": 100}}, "maxCalls": 2},
    {"tool": "stock_set", "args": {"count": {"gte": 1}}},
)

READ_BEFORE_WRITE: Final = v2(
    {"id": "read", "tool": "file_read", "args": {"path": {"subpath": "/srv/app"}}},
    {
        "id": "write",
        "tool": "file_write",
        "args": {"path": {"subpath": "/srv/app"}},
        "after": ["read"],
    },
)

REFUNDS: Final = v2(
    {"id": "lookup", "tool": "orders_get", "args": {"order": {"regex": "^A-[0-9]{1,8}$"}}},
    {
        "id": "refund",
        "tool": "payments_refund",
        "args": {"order": {"regex": "^A-[0-9]{1,8}$"}},
        "maxCalls": 10,
        "additionalArgs": False,
    },
    budgets=[{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 500}],
)

DECIMALS: Final = v2(
    {"id": "tip", "tool": "tip_send", "args": {}},
    budgets=[{"id": "tips", "arg": "amount", "steps": ["tip"], "max": 0.3}],
)

SHAPES: Final = v2(
    {"tool": "file_read", "args": {"path": {"subpath": "/srv/app"}}},
    {
        "tool": "http_get",
        "args": {
            "url": {"url": {"scheme": ["https"], "host": ["*.acme.dev"], "pathPrefix": "/api/"}}
        },
    },
    {"tool": "ping", "args": {"host": {"cidr": ["10.0.0.0/8", "2001:db8::/32"]}}},
    {
        "tool": "shell",
        "args": {
            "command": {"argv": {"cmd": ["git"], "maxArgs": 3, "options": ["--oneline", "-n"]}}
        },
    },
    {"tool": "count_set", "args": {"value": {"type": "integer"}}},
    {"tool": "note_add", "args": {"text": {"maxLength": 5}}},
)

CALL_POLICY: Final = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["refund", "orders_get"]},
        {"effect": "deny", "tools": ["refund"], "args": {"amount": {"gte": 1000}}},
        {"effect": "allow", "tools": ["deploy"], "roles": ["sre"]},
    ],
}

DECISIONS: Final = [
    {
        "name": "v1_operators",
        "description": "eq, in, glob, regex, gte/lte; a tool no step names; maxCalls",
        "plan": OPERATORS_V1,
        "events": [
            check("repo_read", {"repo": "acme/app"}, "allowed"),
            check("repo_read", {"repo": "acme/other"}, "not_in_plan"),
            check("issue_label", {"label": "docs"}, "allowed"),
            check("issue_label", {"label": "wontfix"}, "not_in_plan"),
            check("file_read", {"path": "docs/index.md"}, "allowed"),
            check("file_read", {"path": "src/app.py"}, "not_in_plan"),
            check("branch_create", {"name": "feat/vectors"}, "allowed"),
            check("branch_create", {"name": "main"}, "not_in_plan"),
            check("refund", {"amount": 101}, "not_in_plan"),
            check("refund", {"amount": "5"}, "not_in_plan"),
            check("stock_set", {"count": 1}, "allowed"),
            check("stock_set", {"count": 0.5}, "not_in_plan"),
            check("refund", {"amount": 100}, "allowed"),
            check("refund", {"amount": 1.5}, "allowed"),
            check("refund", {"amount": 2}, "max_calls_exceeded"),
            check("repo_delete", {"repo": "acme/app"}, "not_in_plan"),
            check("repo_read", ["acme/app"], "invalid_arguments"),
        ],
    },
    {
        "name": "required_steps",
        "description": "a required step that completed, and one whose only call failed",
        "plan": v1(
            {"tool": "tests_run", "args": {}, "required": True},
            {"tool": "pr_open", "args": {}, "required": True},
            {"tool": "note_add", "args": {}},
        ),
        "events": [
            check("tests_run", {}, "allowed"),
            completed(0),
            check("pr_open", {}, "allowed"),
            failed(1),
            end("ended"),
        ],
    },
    {
        "name": "required_steps_completed",
        "description": "every required step completed: the plan ends completed",
        "plan": v1({"tool": "tests_run", "args": {}, "required": True}),
        "events": [check("tests_run", {}, "allowed"), completed(0), end("completed")],
    },
    {
        "name": "v2_order",
        "description": "after: a step waits until each named step has completed; a failed "
        "call completes nothing",
        "plan": READ_BEFORE_WRITE,
        "events": [
            check("file_write", {"path": "/srv/app/a.txt"}, "out_of_order"),
            check("file_read", {"path": "/srv/app/a.txt"}, "allowed"),
            failed(0),
            check("file_write", {"path": "/srv/app/a.txt"}, "out_of_order"),
            check("file_read", {"path": "/srv/app/a.txt"}, "allowed"),
            completed(0),
            check("file_write", {"path": "/srv/app/a.txt"}, "allowed"),
        ],
    },
    {
        "name": "v2_budget",
        "description": "a budget of 500: reaching it exactly is allowed, passing it is not; "
        "a budgeted argument is required and not negative; a closed step",
        "plan": REFUNDS,
        "events": [
            check("payments_refund", {"order": "A-1", "amount": 200}, "allowed"),
            check("payments_refund", {"order": "A-2", "amount": 300}, "allowed"),
            check("payments_refund", {"order": "A-3", "amount": 1}, "budget_exceeded"),
            check("payments_refund", {"order": "A-3", "amount": 0}, "allowed"),
            check("payments_refund", {"order": "A-4"}, "not_in_plan"),
            check("payments_refund", {"order": "A-4", "amount": -5}, "not_in_plan"),
            check("payments_refund", {"order": "A-4", "amount": True}, "not_in_plan"),
            check(
                "payments_refund",
                {"order": "A-5", "amount": 0, "note": "sorry"},
                "unexpected_argument",
            ),
            check("orders_get", {"order": "A-5", "note": "free"}, "allowed"),
        ],
    },
    {
        "name": "v2_first_step_decides",
        "description": "several steps match: the first that can take the call does; when "
        "none can, the first matching step's first failing check is the code",
        "plan": v2(
            {"id": "approve", "tool": "approve"},
            {"id": "early", "tool": "pay", "maxCalls": 1},
            {
                "id": "late",
                "tool": "pay",
                "after": ["approve"],
                "additionalArgs": False,
                "args": {"to": {"in": ["acme"]}},
            },
        ),
        "events": [
            check("pay", {"to": "acme"}, "allowed"),
            check("pay", {"to": "acme"}, "max_calls_exceeded"),
            check("approve", {}, "allowed"),
            completed(0),
            check("pay", {"to": "acme"}, "allowed"),
            check("pay", {"to": "acme", "memo": "x"}, "max_calls_exceeded"),
            check("pay", {"to": "other"}, "max_calls_exceeded"),
        ],
    },
    {
        "name": "v2_first_failing_check",
        "description": "unexpected_argument is checked before out_of_order on the first "
        "matching step; a later step that can take the call does",
        "plan": v2(
            {
                "id": "closed",
                "tool": "write",
                "args": {"path": {"in": ["a"]}},
                "additionalArgs": False,
            },
            {"id": "ordered", "tool": "write", "after": ["read"]},
            {"id": "read", "tool": "read"},
        ),
        "events": [
            check("write", {"path": "a", "mode": "x"}, "unexpected_argument"),
            check("write", {"path": "b"}, "out_of_order"),
            check("write", {"path": "a"}, "allowed"),
            check("read", {}, "allowed"),
            completed(2),
            check("write", {"path": "a", "mode": "x"}, "allowed"),
        ],
    },
    {
        "name": "v2_budget_decimal",
        "description": "decimal sums are exact: 0.1 + 0.2 reaches a max of 0.3 exactly",
        "plan": DECIMALS,
        "events": [
            check("tip_send", {"amount": 0.1}, "allowed"),
            check("tip_send", {"amount": 0.2}, "allowed"),
            check("tip_send", {"amount": 0.000001}, "budget_exceeded"),
        ],
    },
    {
        "name": "v2_shapes",
        "description": "subpath, url, cidr, argv, type and maxLength",
        "plan": SHAPES,
        "events": [
            check("file_read", {"path": "/srv/app/docs/a.md"}, "allowed"),
            check("file_read", {"path": "/srv/app/../etc/passwd"}, "not_in_plan"),
            check("file_read", {"path": "/srv/application"}, "not_in_plan"),
            check("http_get", {"url": "https://api.acme.dev/api/v1"}, "allowed"),
            check("http_get", {"url": "https://acme.dev/api/v1"}, "not_in_plan"),
            check("http_get", {"url": "https://api.acme.dev@evil.test/api/"}, "not_in_plan"),
            check("http_get", {"url": "http://api.acme.dev/api/v1"}, "not_in_plan"),
            check("http_get", {"url": "https://api.acme.dev/api/%2e%2e/admin"}, "not_in_plan"),
            check("ping", {"host": "10.1.2.3"}, "allowed"),
            check("ping", {"host": "2001:db8::1"}, "allowed"),
            check("ping", {"host": "::ffff:10.1.2.3"}, "allowed"),
            check("ping", {"host": "010.1.2.3"}, "not_in_plan"),
            check("ping", {"host": "192.168.0.1"}, "not_in_plan"),
            check("shell", {"command": ["git", "log", "--oneline"]}, "allowed"),
            check("shell", {"command": "git log -n 5"}, "allowed"),
            check("shell", {"command": "git log; rm -rf /"}, "not_in_plan"),
            check("shell", {"command": ["git", "fetch", "--upload-pack=/tmp/x"]}, "not_in_plan"),
            check("shell", {"command": ["rm", "-rf"]}, "not_in_plan"),
            check("shell", {"command": ["git", "a", "b", "c", "d"]}, "not_in_plan"),
            check("count_set", {"value": 3}, "allowed"),
            check("count_set", {"value": 3.0}, "allowed"),
            check("count_set", {"value": True}, "not_in_plan"),
            check("count_set", {"value": "3"}, "not_in_plan"),
            check("note_add", {"text": "héllo"}, "allowed"),
            check("note_add", {"text": "hello!"}, "not_in_plan"),
        ],
    },
    {
        "name": "policy_at_call_time",
        "description": "the token's policy decides each call: a deny rule on an argument, a "
        "rule for a role, the default",
        "plan": v1(
            {"tool": "refund", "args": {}},
            {"tool": "deploy", "args": {}},
            {"tool": "orders_get", "args": {}},
        ),
        "policy": CALL_POLICY,
        "role": "dev",
        "groups": ["support"],
        "events": [
            check("refund", {"amount": 10}, "allowed"),
            check("refund", {"amount": 5000}, "policy_denied"),
            check("deploy", {}, "policy_denied"),
            check("orders_get", {"order": "A-1"}, "allowed"),
        ],
    },
    {
        "name": "policy_v2_deny_shapes",
        "description": "a version-2 policy's deny rules on a URL host (every port) and a "
        "path, decided on each call",
        "plan": v2(
            {
                "tool": "http_get",
                "args": {
                    "url": {
                        "url": {
                            "scheme": ["https"],
                            "host": ["*.acme.dev", "*.evil.test"],
                            "ports": [8443],
                        }
                    }
                },
            },
            {"tool": "file_read"},
        ),
        "policy": {
            "version": 2,
            "default": "allow",
            "rules": [
                {
                    "effect": "deny",
                    "tools": ["http_get"],
                    "args": {"url": {"url": {"scheme": ["https"], "host": ["*.evil.test"]}}},
                },
                {"effect": "deny", "tools": ["file_read"], "args": {"path": {"subpath": "/etc"}}},
            ],
        },
        "events": [
            check("http_get", {"url": "https://api.acme.dev/x"}, "allowed"),
            check("http_get", {"url": "https://api.evil.test/x"}, "policy_denied"),
            check("http_get", {"url": "https://api.evil.test:8443/x"}, "policy_denied"),
            check("file_read", {"path": "/srv/app/a"}, "allowed"),
            check("file_read", {"path": "/etc/passwd"}, "policy_denied"),
            check("file_read", {"path": "/srv/../etc/passwd"}, "policy_denied"),
        ],
    },
    {
        "name": "policy_role",
        "description": "the same policy for a member whose role a rule names",
        "plan": v1({"tool": "deploy", "args": {}}),
        "policy": CALL_POLICY,
        "role": "sre",
        "events": [check("deploy", {}, "allowed")],
    },
]

OTHER_PLAN: Final = v1({"tool": "repo_delete", "args": {}})
TOKEN_PLAN: Final = v1({"tool": "repo_read", "args": {"repo": {"eq": "acme/app"}}})


def _tamper(token: str) -> str:
    header, payload, signature = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
    raw[0] ^= 1
    return f"{header}.{payload}.{_b64(bytes(raw))}"


def _hs256(payload: dict[str, Any]) -> str:
    """HMAC-SHA256 keyed with the public key's bytes: the algorithm-confusion attack."""
    signing_input = (
        _b64(_json({"alg": "HS256", "kid": KID, "typ": "JWT"})) + "." + _b64(_json(payload))
    )
    secret = base64.urlsafe_b64decode(PUBLIC_JWK["x"] + "=")
    mac = hmac.new(secret, signing_input.encode("ascii"), hashlib.sha256).digest()
    return signing_input + "." + _b64(mac)


def _none(payload: dict[str, Any]) -> str:
    """alg none, with a real signature left in place (an empty one is merely malformed)."""
    signed = sign(payload)
    return ".".join(
        [_b64(_json({"alg": "none", "kid": KID, "typ": "JWT"})), *signed.split(".")[1:]]
    )


def _swapped_plan(payload: dict[str, Any]) -> dict[str, Any]:
    """Claims whose `ph` is another plan's: signed, but not the plan declared."""
    return {**payload, "ph": plan_hash(validate_plan(OTHER_PLAN))}


def token_cases() -> list[dict[str, Any]]:
    good = claims(TOKEN_PLAN)
    cases = [
        ("good_eddsa", "alg EdDSA (RFC 8037)", sign(good), "valid"),
        (
            "good_ed25519",
            "alg Ed25519 (RFC 9864): the same signature",
            sign(good, alg="Ed25519"),
            "valid",
        ),
        ("bad_signature", "one bit of the signature flipped", _tamper(sign(good)), "bad_signature"),
        ("alg_hs256", "HS256 keyed with the public key", _hs256(good), "algorithm_not_accepted"),
        ("alg_none", "alg none", _none(good), "algorithm_not_accepted"),
        (
            "alg_es256",
            "an algorithm the guard does not know",
            sign(good, alg="ES256"),
            "algorithm_not_accepted",
        ),
        (
            "expired",
            "exp an hour before now",
            sign(claims(TOKEN_PLAN, iat=NOW - 4000, exp=NOW - 3600)),
            "expired",
        ),
        (
            "expired_within_leeway",
            "exp 59 s before now, inside the 60 s leeway",
            sign(claims(TOKEN_PLAN, exp=NOW - 59)),
            "valid",
        ),
        (
            "expired_at_leeway",
            "exp exactly the leeway before now: expired",
            sign(claims(TOKEN_PLAN, exp=NOW - 60)),
            "expired",
        ),
        (
            "embedded_jwk",
            "a jwk header naming the signing key: keys come from the JWKS only",
            sign(good, jwk={**PUBLIC_JWK, "kid": KID}),
            "header_not_accepted",
        ),
        (
            "critical_extension",
            "a crit header: no extension is understood",
            sign(good, crit=["exp"]),
            "header_not_accepted",
        ),
        (
            "issued_in_future",
            "iat an hour after now",
            sign(claims(TOKEN_PLAN, iat=NOW + 3600, exp=NOW + 4500)),
            "issued_in_future",
        ),
        (
            "wrong_issuer",
            "another issuer",
            sign(claims(TOKEN_PLAN, iss="https://evil.example")),
            "wrong_issuer",
        ),
        (
            "unknown_kid",
            "a key id the JWKS does not hold",
            sign(good, kid="not-a-known-key"),
            "unknown_kid",
        ),
        (
            "plan_hash_mismatch",
            "validly signed, but ph is another plan's hash",
            sign(_swapped_plan(good)),
            "plan_hash_mismatch",
        ),
        (
            "plan_swapped",
            "validly signed for another plan than the one declared",
            sign(claims(OTHER_PLAN)),
            "plan_hash_mismatch",
        ),
    ]
    out = []
    for name, description, token, want in cases:
        expect = token_outcome(token, TOKEN_PLAN)
        got = "valid" if expect["valid"] else expect["reason"]
        if got != want:
            raise AssertionError(f"token case {name}: the guard answers {got}, not {want}")
        out.append(
            {
                "name": name,
                "description": description,
                "plan": TOKEN_PLAN,
                "planHash": plan_hash(validate_plan(TOKEN_PLAN)),
                "token": token,
                "expect": expect,
            }
        )
    return out


PLAN_CASES: Final = [
    (
        "v1_defaults",
        "a version-1 plan: defaults filled in, its hash",
        v1({"tool": "repo_read", "args": {"repo": {"eq": "acme/app"}}}),
        [],
    ),
    ("v2_refunds", "a version-2 plan with order and a budget", REFUNDS, []),
    (
        "no_goal",
        "goal is required",
        {"version": 1, "user": "alice@acme.dev", "steps": [{"tool": "a", "args": {}}]},
        ["goal"],
    ),
    (
        "version_3",
        "an unknown version",
        {**v1({"tool": "a", "args": {}}), "version": 3},
        ["version"],
    ),
    (
        "bad_tool_name",
        "a tool name with a space",
        v1({"tool": "read file", "args": {}}),
        ["steps[0].tool"],
    ),
    (
        "bad_regex",
        "a regex that does not compile",
        v1({"tool": "a", "args": {"x": {"regex": "("}}}),
        ["steps[0].args.x.regex"],
    ),
    (
        "after_unknown",
        "after names no step id",
        v2({"id": "read", "tool": "a"}, {"id": "write", "tool": "b", "after": ["raed"]}),
        ["steps[1].after[0]"],
    ),
    (
        "after_cycle",
        "after forms a cycle",
        v2({"id": "a", "tool": "a", "after": ["b"]}, {"id": "b", "tool": "b", "after": ["a"]}),
        ["steps[1].after"],
    ),
    (
        "budget_step_without_id",
        "a budget names a step id no step has",
        v2({"tool": "pay"}, budgets=[{"id": "b", "arg": "amount", "steps": ["pay"], "max": 5}]),
        ["budgets[0].steps[0]"],
    ),
    (
        "cidr_host_bits",
        "a network with host bits set",
        v2({"tool": "ping", "args": {"host": {"cidr": ["10.0.0.1/8"]}}}),
        ["steps[0].args.host.cidr[0]"],
    ),
    (
        "url_host_not_normal",
        "a host not in its A-label form",
        v2(
            {
                "tool": "get",
                "args": {"u": {"url": {"scheme": ["https"], "host": ["bücher.example"]}}},
            }
        ),
        ["steps[0].args.u.url.host[0]"],
    ),
    (
        "v2_operator_in_v1",
        "subpath is a version-2 operator",
        v1({"tool": "a", "args": {"p": {"subpath": "/srv"}}}),
        ["steps[0].args.p.subpath"],
    ),
]


def plan_cases() -> list[dict[str, Any]]:
    out = []
    for name, description, plan, want in PLAN_CASES:
        try:
            normal = validate_plan(copy.deepcopy(plan))
        except DocumentInvalid as error:
            paths = sorted({e.path for e in error.errors})
            expect: dict[str, Any] = {"valid": False, "errors": paths}
        else:
            paths = []
            expect = {"valid": True, "plan": normal, "hash": plan_hash(normal)}
        if not set(want) <= set(paths) or bool(want) != bool(paths):
            raise AssertionError(f"plan case {name}: the guard answers {paths}, not {want}")
        out.append({"name": name, "description": description, "plan": plan, "expect": expect})
    return out


def decision_cases() -> list[dict[str, Any]]:
    out = []
    for case in DECISIONS:
        token = sign(
            claims(
                case["plan"],
                case.get("policy", ALLOW_ALL),
                role=case.get("role"),
                groups=tuple(case.get("groups", ())),
            )
        )
        run = Run(token)
        events = []
        for event in case["events"]:
            kind = event["event"]
            if kind == "check":
                expect = run.check(event["tool"], event["args"])
                if expect["code"] != event["want"]:
                    raise AssertionError(
                        f"{case['name']}: {event['tool']} {event['args']} is {expect['code']},"
                        f" not {event['want']}"
                    )
                events.append(
                    {
                        "event": "check",
                        "tool": event["tool"],
                        "args": event["args"],
                        "expect": expect,
                    }
                )
            elif kind in ("completed", "failed"):
                with run.lock:
                    if kind == "completed":
                        run.state.complete_step(event["step"])
                    else:
                        run.state.fail_step(event["step"])
                events.append(event)
            else:
                expect = run.end()
                if expect["outcome"] != event["want"]:
                    raise AssertionError(f"{case['name']}: ends {expect['outcome']}")
                events.append({"event": "end", "expect": expect})
        entry = {
            "name": case["name"],
            "description": case["description"],
            "plan": case["plan"],
            "policy": case.get("policy", ALLOW_ALL),
            "role": case.get("role"),
            "groups": sorted(case.get("groups", ())),
            "token": token,
            "events": events,
        }
        out.append(entry)
    return out


def document(kind: str, description: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "$schema": "./schema.json",
        "format": FORMAT,
        "formatVersion": FORMAT_VERSION,
        "kind": kind,
        "description": description,
        "issuer": ISSUER,
        "now": NOW,
        "leeway": LEEWAY,
        "jwks": JWKS,
        "cases": cases,
    }


def files() -> dict[str, str]:
    """The vector files by name, as text."""
    documents = {
        "tokens.json": document(
            "tokens",
            "Verifying the intent token a declaration answered with, for the plan declared.",
            token_cases(),
        ),
        "plans.json": document(
            "plans",
            "Validating a plan document: its normal form and hash, or its errors.",
            plan_cases(),
        ),
        "decisions.json": document(
            "decisions",
            "Deciding calls under a verified token, with calls completing or failing.",
            decision_cases(),
        ),
    }
    return {
        name: json.dumps(value, indent=1, ensure_ascii=False) + "\n"
        for name, value in documents.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the files differ")
    args = parser.parse_args(argv)
    stale = []
    for name, text in files().items():
        path = VECTORS / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    print(("rewrote: " + ", ".join(stale)) if stale and not args.check else "up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
