"""examples/delegation/ runs end to end against a live control plane: the parent delegates
a read step to a sub-agent started as its own process, with its own agent's API key."""

from __future__ import annotations

from members.services import agent_update
from plans.models import Plan
from tests.conftest import make_agent

from .examples_run import run_example


def test_the_parent_delegates_a_read_step_to_a_sub_agent(live_server, agent, team, policy_version):
    worker = make_agent(team, "reader", policy_version)
    agent_update(agent=worker.agent, accepts_delegations=True)
    result = run_example(
        "examples/delegation/parent.py",
        url=live_server.url,
        api_key=agent.api_key,
        PLANGATE_SUB_AGENT_API_KEY=worker.api_key,
        PLANGATE_SUB_AGENT_ID=worker.agent.pk,
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
