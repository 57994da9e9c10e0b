"""examples/delegation/ runs end to end against a live control plane: the parent delegates
a read step to a sub-agent started as its own process, with its own agent's API key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from members.services import agent_update
from plans.models import Plan
from tests.conftest import make_agent

ROOT = Path(__file__).resolve().parents[2]


def test_the_parent_delegates_a_read_step_to_a_sub_agent(live_server, agent, team, policy_version):
    worker = make_agent(team, "reader", policy_version)
    agent_update(agent=worker.agent, accepts_delegations=True)
    env = {
        **os.environ,
        "PLANGATE_URL": live_server.url,
        "PLANGATE_API_KEY": agent.api_key,
        "PLANGATE_SUB_AGENT_API_KEY": worker.api_key,
        "PLANGATE_SUB_AGENT_ID": worker.agent.pk,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
    }
    env.pop("PYTHONPATH", None)  # the scripts find the guard on their own

    result = subprocess.run(
        [sys.executable, "examples/delegation/parent.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "sub-agent: github_get_issue max_calls_exceeded" in lines
    assert "sub-agent: github_list_issues not_in_plan" in lines
    assert lines[-3:] == [
        "parent: github_get_issue allowed",
        "parent: github_get_issue max_calls_exceeded",
        "as expected",
    ]
    child = Plan.objects.get(parent__isnull=False)
    assert child.agent_id == worker.agent.pk
    assert child.reserved["calls"] == {"1": 2}
