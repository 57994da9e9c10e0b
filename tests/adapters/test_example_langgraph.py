"""examples/adapters/langgraph_agent.py runs end to end against a live control plane, with
its scripted model: declare and list in one message, the injection's calls blocked and
shown to the model as error ToolMessages."""

from __future__ import annotations

from guard.decisions import Decision
from plans.models import Plan, PlanEvent
from tests.guard.examples_run import run_example


def test_the_langgraph_example_runs_and_every_call_is_decided_as_expected(live_server, agent):
    result = run_example(
        "examples/adapters/langgraph_agent.py", url=live_server.url, api_key=agent.api_key
    )

    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout
    assert "github_list_issues: ok" in output
    assert "github_delete_repo: not_in_plan: " in output
    assert "send_email: not_in_plan: " in output
    assert "('github_list_issues', 'completed')" in output
    plan = Plan.objects.get()
    decisions = list(PlanEvent.objects.filter(plan=plan).values_list("decision", flat=True))
    assert sorted(decisions) == sorted(
        [Decision.ALLOWED, Decision.ALLOWED, Decision.NOT_IN_PLAN, Decision.NOT_IN_PLAN]
    )
