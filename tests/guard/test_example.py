"""The examples run end to end against a live control plane: examples/scripted_agent.py
(the synchronous Guard) and examples/async_agent.py (AsyncGuard, async tools)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from guard.decisions import Decision
from plans.models import Plan, PlanDisplayUpdate, PlanEvent, PlanToken

ROOT = Path(__file__).resolve().parents[2]


def run_example(script: str, live_server, agent) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PLANGATE_URL": live_server.url,
        "PLANGATE_API_KEY": agent.api_key,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
    }
    env.pop("PYTHONPATH", None)  # the script finds the guard on its own
    return subprocess.run(
        [sys.executable, script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_scripted_agent_runs_and_every_call_is_decided_as_expected(live_server, agent):
    result = run_example("examples/scripted_agent.py", live_server, agent)

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


def test_the_async_agent_runs_and_a_failed_tool_leaves_its_step_in_progress(live_server, agent):
    result = run_example("examples/async_agent.py", live_server, agent)

    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout
    assert "github_get_issue #3: allowed, then failed" in output
    assert "github_delete_repo: blocked: not_in_plan" in output
    assert "declare_plan again -> declare_after_output" in output
    # The failed call showed its step in progress, not completed; later calls completed it.
    assert "    [acp] [x] [>] [ ]" in output
    assert "    [acp] [x] [x] [x]" in output
    assert "decision log: " in output and " 0 dropped" in output
    plan = Plan.objects.get()
    decisions = list(PlanEvent.objects.filter(plan=plan).values_list("decision", flat=True))
    assert decisions.count(Decision.ALLOWED) == 5  # list, #3 (then failed), #1, #2, the mail
    assert decisions.count(Decision.NOT_IN_PLAN) == 2  # the deletion, the outsider's mail
    assert PlanEvent.objects.filter(plan=plan, tool="github_get_issue").count() == 3
    assert (
        PlanEvent.objects.filter(plan=plan, decision=Decision.NOT_IN_PLAN)
        .filter(tool__in=["github_delete_repo", "send_email"])
        .count()
        == 2
    )
