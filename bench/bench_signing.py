"""In-process cost of what issuance computes: validate the plan, hash it, sign the token.

No server and no database: `guard.plan.validate_plan`, `guard.plan.plan_hash` and an
Ed25519 JWS made with PyJWT exactly as `plans.keys.Signer` makes it, for a 2-step and a
50-step plan, next to a bare Ed25519 signature of a tiny payload measured in the same run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root

from benchlib import heading, measure, print_table

# The same shapes the HTTP bench sends, so both parts describe the same requests.
from run import BENCH_POLICY, bench_plan

from guard.plan import plan_hash, validate_plan
from guard.policy import policy_hash, validate_policy

KID = "bench-kid-0123456789abcdefghijklmnopqrstuvwxyz"


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--signing-seconds",
        type=float,
        default=0.6,
        help="seconds spent timing each in-process figure (default 0.6)",
    )


def _claims(plan: dict, policy: dict) -> dict:
    """The claims plans.intent_tokens.intent_token_sign builds, with fixed values."""
    return {
        "iss": "http://127.0.0.1:8000",
        "sub": plan["user"],
        "jti": "01J00000000000000000000000",
        "iat": 1_800_000_000,
        "exp": 1_800_000_900,
        "ph": plan_hash(plan),
        "plan": plan,
        "agent": "01J00000000000000000000001",
        "pol": policy,
        "polv": 1,
        "polh": policy_hash(policy),
        "role": "engineer",
        "groups": ["bench"],
    }


def main(args: argparse.Namespace) -> int:
    heading("In-process: validate + hash + sign (no server, no database)")
    seconds = getattr(args, "signing_seconds", 0.6)
    private_key = Ed25519PrivateKey.generate()
    policy = validate_policy(BENCH_POLICY)
    headers = {"kid": KID, "typ": "JWT"}

    def sign(claims: dict) -> str:
        return jwt.encode(claims, private_key, algorithm="EdDSA", headers=headers)

    baseline = measure(
        "Ed25519 sign, 32 bytes (baseline)", lambda: private_key.sign(b"x" * 32), seconds=seconds
    )
    results = [
        baseline,
        measure("PyJWT EdDSA sign, {'a': 1}", lambda: sign({"a": 1}), seconds=seconds),
    ]
    for steps in (2, 50):
        raw = bench_plan(steps)
        plan = validate_plan(raw)
        claims = _claims(plan, policy)

        def whole(raw: dict = raw, claims: dict = claims) -> str:
            valid = validate_plan(raw)
            return sign({**claims, "plan": valid, "ph": plan_hash(valid)})

        results += [
            measure(
                f"{steps} steps: validate_plan", lambda raw=raw: validate_plan(raw), seconds=seconds
            ),
            measure(
                f"{steps} steps: plan_hash", lambda plan=plan: plan_hash(plan), seconds=seconds
            ),
            measure(
                f"{steps} steps: sign the token",
                lambda claims=claims: sign(claims),
                seconds=seconds,
            ),
            measure(f"{steps} steps: validate + hash + sign", whole, seconds=seconds),
        ]
    print_table(
        ["operation", "us/op", "x baseline"],
        [
            [
                result.name,
                f"{result.microseconds:,.1f}",
                f"{result.microseconds / baseline.microseconds:.1f}",
            ]
            for result in results
        ],
    )
    return 0
