"""examples/scripted_agent.py runs end to end against a live control plane."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from guard.decisions import Decision
from plans.models import Plan, PlanDisplayUpdate, PlanEvent, PlanToken

ROOT = Path(__file__).resolve().parents[2]


def test_the_scripted_agent_runs_and_every_call_is_decided_as_expected(live_server, agent):
    env = {
        **os.environ,
        "PLANGATE_URL": live_server.url,
        "PLANGATE_API_KEY": agent.api_key,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
    }
    env.pop("PYTHONPATH", None)  # the script finds the guard on its own

    result = subprocess.run(
        [sys.executable, "examples/scripted_agent.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout
    assert "guard: blocked: not_in_plan" in output
    assert "guard: declare_after_output" in output
    assert "guard: refreshed" in output
    assert "[acp] plan items:" in output
    plan = Plan.objects.get()
    assert list(PlanToken.objects.filter(plan=plan).values_list("kind", flat=True)) == [
        "issue",
        "refresh",
    ]
    decisions = list(PlanEvent.objects.filter(plan=plan).order_by("id").values_list("decision"))
    assert [decision for (decision,) in decisions] == [
        Decision.ALLOWED,
        Decision.ALLOWED,
        Decision.ALLOWED,
        Decision.NOT_IN_PLAN,
        Decision.NOT_IN_PLAN,
        Decision.ALLOWED,
        Decision.MAX_CALLS_EXCEEDED,
    ]
    assert PlanDisplayUpdate.objects.filter(plan=plan).exists()
