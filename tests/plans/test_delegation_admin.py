"""The console shows the tree of delegations: a plan's page names its parent and lists its
children with their agent, status and reservation; its timeline shows each delegation."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from members.models import Agent
from members.services import agent_update
from plans.delegation import plan_delegate
from plans.models import Plan
from plans.services import plan_issue
from tests.admin.conftest import AUDITORS, ensure_admin_groups, logged_in, make_staff
from tests.conftest import make_agent, plan_document

STEP = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 2}


@pytest.fixture
def auditor_client(team) -> Client:
    ensure_admin_groups()
    return logged_in(make_staff("audrey", group=AUDITORS, teams=[team]))


@pytest.fixture
def tree(agent, team, policy_version) -> tuple[Plan, Plan]:
    worker = make_agent(team, "worker", policy_version).agent
    agent_update(agent=worker, accepts_delegations=True)
    parent = plan_issue(agent=agent.agent, document=plan_document()).plan
    child = plan_delegate(
        agent=agent.agent,
        parent_id=parent.pk,
        document=plan_document(goal="List them", steps=[STEP]),
        to_agent_id=worker.pk,
    ).issued.plan
    return parent, child


def page(client: Client, plan: Plan, view: str = "change") -> str:
    url = reverse(f"admin:plans_plan_{view}", args=[plan.pk])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_parents_page_lists_its_children(auditor_client, tree):
    parent, child = tree

    html = page(auditor_client, parent)

    assert 'id="children"' in html
    assert child.pk in html
    assert "worker" in html
    assert "2 calls of step 1" in html


def test_the_childs_page_names_its_parent_and_chain(auditor_client, tree, agent):
    parent, child = tree

    html = page(auditor_client, child)

    assert 'id="delegated-from"' in html
    assert parent.pk in html
    assert Agent.objects.get(name="worker").pk in html and agent.agent.pk in html


def test_the_timeline_shows_the_delegation(auditor_client, tree):
    parent, child = tree

    parents = page(auditor_client, parent, "timeline")
    childs = page(auditor_client, child, "timeline")

    assert "delegated" in parents and child.pk in parents
    assert "delegated from plan" in childs and parent.pk in childs


def test_a_plan_without_delegations_shows_no_tree(auditor_client, agent):
    plan = plan_issue(agent=agent.agent, document=plan_document()).plan

    assert 'id="delegation"' not in page(auditor_client, plan)
