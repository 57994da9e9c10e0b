"""examples/bound_token.py runs end to end against a live control plane: the holder's
proofs pass, a copy of its token and API key is refused, the binding checks offline."""

from __future__ import annotations

from plans.models import Plan

from .examples_run import run_example


def test_the_bound_token_example(live_server, agent):
    result = run_example("examples/bound_token.py", url=live_server.url, api_key=agent.api_key)

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
