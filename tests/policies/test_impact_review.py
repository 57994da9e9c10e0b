"""The impact preview and review rules: a document that sends a live plan's step to a
person that nobody approved would make its next refresh answer approval_required, and the
preview says so; an approval of that step keeps the plan off the list."""

from __future__ import annotations

import copy

import pytest

from kernel.problems import Code, DomainError
from plans.approvals import plan_approval_decide
from plans.models import Plan
from plans.services import plan_issue, plan_refresh
from policies.services import policy_version_publish
from rehearsal.impact import policy_impact
from tests.conftest import POLICY, plan_document
from tests.plans.approval_helpers import approver_for
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, issue, mail_plan


def review_mail(*more_review_tools: str) -> dict:
    """POLICY with e-mail (and ``more_review_tools``) sent to a person: rules[4] onwards."""
    document = copy.deepcopy(POLICY)
    document["rules"].append({"effect": "review", "tools": ["send_email"], "name": "mail"})
    for tool in more_review_tools:
        document["rules"].append({"effect": "review", "tools": [tool]})
    return document


def test_review_added_to_a_live_plans_step_is_listed_as_approval_required(agent):
    summary = issue(agent)
    held = plan_issue(
        agent=agent.agent, document=plan_document(goal="Mail it", steps=MAIL_PLAN_STEPS)
    )

    impact = policy_impact(policy=agent.agent.policy, document=review_mail())

    (affected,) = impact.plans
    assert affected.id == held.plan.pk and summary.pk != affected.id
    (step,) = affected.steps
    assert (step.index, step.tool, step.rule) == (1, "send_email", 4)
    assert "approval_required" in step.reason

    policy_version_publish(policy=agent.agent.policy, document=review_mail())
    with pytest.raises(DomainError) as refused:
        plan_refresh(agent=agent.agent, plan_id=held.plan.pk, token=held.token)
    assert refused.value.code == Code.APPROVAL_REQUIRED


def test_an_approved_step_stays_off_the_list_and_a_newly_reviewed_one_is_on_it(agent, team):
    policy_version_publish(policy=agent.agent.policy, document=review_mail())
    requested = mail_plan(agent)
    plan_approval_decide(
        plan=Plan.objects.get(pk=requested.pk), by_user=approver_for(team), approve=True
    )

    same = policy_impact(policy=agent.agent.policy, document=review_mail())
    more = policy_impact(policy=agent.agent.policy, document=review_mail("github_list_issues"))

    assert (same.plans_checked, same.plans_affected) == (1, 0)
    assert [step.index for plan in more.plans for step in plan.steps] == [0]
