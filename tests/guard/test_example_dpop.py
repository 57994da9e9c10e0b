"""examples/bound_token.py runs end to end against a live control plane: the holder's
proofs pass, a copy of its token and API key is refused, the binding checks offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from plans.models import Plan

ROOT = Path(__file__).resolve().parents[2]


def test_the_bound_token_example(live_server, agent):
    env = {
        **os.environ,
        "PLANGATE_URL": live_server.url,
        "PLANGATE_API_KEY": agent.api_key,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
    }
    env.pop("PYTHONPATH", None)  # the script finds the guard on its own

    result = subprocess.run(
        [sys.executable, "examples/bound_token.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "bound to key: True",
        "holder refresh: 200",
        "copied refresh: 401 invalid_dpop_proof",
        "copied status: 401 invalid_dpop_proof",
        "holder status: 200 ok",
        "replayed proof: 401 invalid_dpop_proof",
        "offline check, holder: ok",
        "offline check, another key: refused (jkt)",
        "as expected",
    ]
    assert Plan.objects.get().jkt
