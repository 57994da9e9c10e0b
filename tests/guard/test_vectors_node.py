"""The token vectors (guard/vectors/tokens.json) run by a guard's token check written in
JavaScript on node's `jose`: the file is enough for another language, and what the Python
guard answers is what an independent stack answers when it follows docs/guard-vectors.md.

`jose` checks the signature; the rest of the contract (which algorithms, which header
members, the issuer, the clock, the plan hash over RFC 8785 JSON) is the runner's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.node_packages import JOSE, node_folder, node_run

TOKENS = Path(__file__).resolve().parents[2] / "guard" / "vectors" / "tokens.json"

RUNNER = """
import * as jose from "jose";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

const vectors = JSON.parse(readFileSync(process.argv[2], "utf8"));
const keys = new Map(vectors.jwks.keys.map((jwk) => [jwk.kid, jwk]));

// RFC 8785 for the values a plan holds: sorted members, numbers and strings as ES writes them.
const canonical = (value) =>
  Array.isArray(value) ? `[${value.map(canonical).join(",")}]`
  : value !== null && typeof value === "object"
    ? `{${Object.keys(value).sort()
        .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`
    : JSON.stringify(value);

async function verify(vector) {
  const refuse = (code, reason) => ({ valid: false, code, reason });
  const header = jose.decodeProtectedHeader(vector.token);
  if (!["EdDSA", "Ed25519"].includes(header.alg)) {
    return refuse("token_invalid", "algorithm_not_accepted");
  }
  if (["jku", "x5u", "jwk", "x5c", "crit"].some((name) => name in header)) {
    return refuse("token_invalid", "header_not_accepted");
  }
  const jwk = keys.get(header.kid);
  if (jwk === undefined) return refuse("token_invalid", "unknown_kid");
  // Either name verifies with the key, whatever the JWK's own alg says.
  const key = await jose.importJWK({ kty: jwk.kty, crv: jwk.crv, x: jwk.x }, header.alg);
  let payload;
  try {
    ({ payload } = await jose.compactVerify(vector.token, key, { algorithms: [header.alg] }));
  } catch {
    return refuse("token_invalid", "bad_signature");
  }
  const claims = JSON.parse(new TextDecoder().decode(payload));
  if (claims.iss !== vectors.issuer) return refuse("token_invalid", "wrong_issuer");
  if (vectors.now - vectors.leeway >= claims.exp) return refuse("token_invalid", "expired");
  if (claims.iat > vectors.now + vectors.leeway) return refuse("token_invalid", "issued_in_future");
  const carried = createHash("sha256").update(canonical(claims.plan)).digest("hex");
  if (claims.ph !== vector.planHash || claims.ph !== carried) {
    return refuse("plan_swapped", "plan_hash_mismatch");
  }
  return { valid: true, jti: claims.jti, sub: claims.sub, ph: claims.ph };
}

const answers = {};
for (const vector of vectors.cases) answers[vector.name] = await verify(vector);
console.log(JSON.stringify(answers));
"""


@pytest.mark.slow  # installs jose from npm on first use, then one node process
def test_a_javascript_runner_on_jose_answers_every_token_vector_as_the_file_says():
    answers = node_run(node_folder(JOSE), RUNNER, str(TOKENS))
    expected = {
        case["name"]: case["expect"] for case in json.loads(TOKENS.read_text("utf-8"))["cases"]
    }
    assert answers == expected
