"""examples/guarded_mcp_server.py runs its round trip through plangate-mcp against a live
control plane: list, a call before a plan, declare, allowed calls, a blocked call."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from plans.models import Plan

from .conftest import ROOT

pytestmark = pytest.mark.slow  # runs the example, which starts the gateway and a server


def test_the_guarded_mcp_server_example_decides_every_call_as_expected(live_server, agent):
    env = {
        **os.environ,
        "PLANGATE_URL": live_server.url,
        "PLANGATE_API_KEY": agent.api_key,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
    }
    env.pop("PYTHONPATH", None)  # the example finds the guard on its own

    result = subprocess.run(
        [sys.executable, "examples/guarded_mcp_server.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout
    assert "tools/list: declare_plan, github_list_issues, github_get_issue, send_email" in output
    assert "isError=True: no_plan: " in output
    assert "isError=True: not_in_plan: " in output
    assert "every call was decided as expected" in output
    plan = Plan.objects.get()
    assert plan.agent_id == agent.agent.pk
