"""A token bound to its holder's key, on the wire (docs/tokens.md, "Tokens bound to their
holder"). A `Guard` does all of this by itself (`bind_token=True`, the default); here a
plain HTTP client does it by hand, to show what the proofs are and what they stop.

1. The holder makes an Ed25519 key and declares a plan with a DPoP proof by it: the token
   names the key (`cnf.jkt`).
2. The holder refreshes with a fresh proof: 200.
3. The same token and API key, copied to a client without the key: refresh and status
   feed answer 401 `invalid_dpop_proof`; so does the holder's own proof sent twice.
4. A resource server checks the binding offline, with the token alone.

    export PLANGATE_API_KEY=pg_...
    python examples/bound_token.py      # PLANGATE_URL, PLANGATE_ISSUER, PLANGATE_MEMBER

Exit status 0 when everything went as expected, 1 when something did not, 2 when the
example could not run (one line on stderr says why).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx

try:
    from guard.dpop import DpopInvalid, DpopKey, check_binding
except ImportError:  # a checkout without `pip install ./guard`: use the repository's copy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from guard.dpop import DpopInvalid, DpopKey, check_binding

import jwt  # installed with the guard (PyJWT)


def plan(member: str) -> dict:
    return {
        "version": 1,
        "goal": "List the open issues",
        "user": member,
        "steps": [{"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}}],
    }


def main() -> int:
    url = os.environ.get("PLANGATE_URL", "http://localhost:8000").rstrip("/")
    # Proofs name the control plane by its issuer (whatever proxy is in between).
    issuer = (os.environ.get("PLANGATE_ISSUER") or url).rstrip("/")
    api_key = os.environ.get("PLANGATE_API_KEY")
    member = os.environ.get("PLANGATE_MEMBER", "alice@acme.dev")
    if not api_key:
        print("set PLANGATE_API_KEY to an agent's key (pg_...)", file=sys.stderr)
        return 2
    key = DpopKey.generate()  # a guard holds one per session, in memory only
    expected = True

    def proof(method: str, path: str) -> str:
        return key.proof(htm=method, htu=issuer + path, access_token=api_key)

    with httpx.Client(headers={"Authorization": f"Bearer {api_key}"}) as client:
        try:
            declared = client.post(
                f"{url}/v1/plans",
                json={"plan": plan(member)},
                headers={"DPoP": proof("POST", "/v1/plans")},
            )
        except httpx.HTTPError as error:
            print(f"cannot reach the control plane at {url}: {error}", file=sys.stderr)
            return 2
        if declared.status_code != 201:
            print(f"could not declare: {declared.status_code} {declared.text}", file=sys.stderr)
            return 2
        plan_id, token = declared.json()["id"], declared.json()["token"]
        claims = jwt.decode(token, options={"verify_signature": False})  # the guard verifies
        print("bound to key:", claims["cnf"]["jkt"] == key.jkt)

        path = f"/v1/plans/{plan_id}/refresh"
        refreshed = client.post(
            url + path, json={"token": token}, headers={"DPoP": proof("POST", path)}
        )
        print("holder refresh:", refreshed.status_code)
        expected = expected and refreshed.status_code == 200

        # The copy: same token, same API key, no key to prove with.
        status_path = f"/v1/plans/{plan_id}/status"
        once = proof("GET", status_path)
        for name, response in (
            ("copied refresh", client.post(url + path, json={"token": token})),
            ("copied status", client.get(url + status_path)),
            ("holder status", client.get(url + status_path, headers={"DPoP": once})),
            ("replayed proof", client.get(url + status_path, headers={"DPoP": once})),
        ):
            code = response.json().get("code") if response.status_code != 200 else "ok"
            print(f"{name}: {response.status_code} {code}")
            wanted = (200, "ok") if name == "holder status" else (401, "invalid_dpop_proof")
            expected = expected and (response.status_code, code) == wanted

    # A resource server, offline: the holder's proof passes, another key's does not.
    target = "https://tools.example/mcp"
    holder = key.proof(htm="POST", htu=target, access_token=token)
    check_binding(claims, holder, htm="POST", htu=target, access_token=token)
    print("offline check, holder: ok")
    try:
        stranger = DpopKey.generate().proof(htm="POST", htu=target, access_token=token)
        check_binding(claims, stranger, htm="POST", htu=target, access_token=token)
        expected = False
    except DpopInvalid as error:
        print(f"offline check, another key: refused ({error.problem})")
    print("as expected" if expected else "NOT as expected")
    return 0 if expected else 1


if __name__ == "__main__":
    sys.exit(main())
