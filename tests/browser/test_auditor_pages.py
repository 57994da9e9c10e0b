"""An auditor in a real browser: opens a plan, reads its timeline in order, follows a
decision to its plan's policy version (author, comment, the rule), and never meets a
control they cannot use."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import expect

from guard.decisions import Decision
from members.services import member_upsert, team_get_or_create
from plans.models import Plan, PlanDisplayUpdate, PlanEvent
from policies.services import policy_set
from tests.admin.conftest import ensure_admin_groups
from tests.conftest import POLICY, make_agent, plan_document

from .conftest import log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def admin_groups(transactional_db) -> None:
    ensure_admin_groups()


def staff(username: str, group: str, teams) -> User:
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    for team in teams:
        team.staff.add(user)
    return user


@pytest.fixture
def audited_plan(transactional_db) -> Plan:
    """A plan declared through the API under a policy published with an author and a
    comment, then an allowed call, an ACP update and a blocked call, a second apart."""
    acme = team_get_or_create(slug="default", name="Acme")
    version = policy_set(
        team=acme,
        slug="default",
        document=POLICY,
        comment="read the team's repositories",
        created_by="tessa",
    )
    member_upsert(team=acme, email="alice@acme.dev", name="Alice", role="engineer")
    agent = make_agent(acme, "summariser", version)
    declared = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert declared.status_code == 201, declared.content
    plan = Plan.objects.get(pk=declared.json()["id"])
    start = timezone.now() + timedelta(seconds=2)
    PlanEvent.objects.create(
        plan=plan,
        occurred_at=start,
        tool="github_list_issues",
        decision=Decision.ALLOWED,
        step=0,
        reason="step 1 of the plan; allow rule admits this call",
        rule_index=0,
        rule_description="allow github_* (rules[0])",
        policy_version=version.number,
    )
    PlanDisplayUpdate.objects.create(
        plan=plan,
        occurred_at=start + timedelta(seconds=1),
        message={
            "sessionId": "s1",
            "update": {
                "sessionUpdate": "plan_update",
                "plan": {
                    "type": "items",
                    "planId": plan.pk,
                    "entries": [
                        {"content": "List issues", "priority": "high", "status": "completed"},
                        {"content": "Read one", "priority": "low", "status": "pending"},
                    ],
                },
            },
        },
    )
    PlanEvent.objects.create(
        plan=plan,
        occurred_at=start + timedelta(seconds=2),
        tool="github_delete_repo",
        decision=Decision.NOT_IN_PLAN,
        reason="no step of the plan calls github_delete_repo",
    )
    return plan


def test_an_auditor_follows_a_plan_through_its_timeline_to_the_policy_version(page, audited_plan):
    plan = audited_plan
    staff("audrey", "Auditors", [plan.team])
    log_in(page, "audrey", PASSWORD)

    page.goto("/admin/plans/plan/")
    page.get_by_role("link", name=plan.goal).first.click()
    expect(page.locator("#content")).to_contain_text("Steps: planned against actual")
    expect(page.get_by_role("link", name="Revoke plan")).to_have_count(0)
    expect(page.get_by_text("Revoke", exact=False)).to_have_count(0)

    page.get_by_role("link", name="Timeline", exact=True).click()
    rows = page.locator("#timeline > tbody > tr")
    expect(rows).to_have_count(5)
    kinds = [rows.nth(index).get_attribute("data-kind") for index in range(5)]
    assert kinds == ["issued", "token", "decision", "display", "decision"]
    times = page.locator("#timeline time").all_inner_texts()
    assert times == sorted(times) and all(len(time) == len("2026-12-01 09:00:00") for time in times)
    expect(rows.nth(2)).to_contain_text("github_list_issues")
    expect(rows.nth(2)).to_contain_text("step 1")
    expect(rows.nth(3)).to_contain_text("2 entries: 1 completed, 1 pending")
    expect(rows.nth(4)).to_contain_text("no step of the plan calls github_delete_repo")

    rows.nth(2).get_by_role("link", name="decision").click()
    expect(page.locator("#content")).to_contain_text("step 1: github_list_issues")
    expect(page.locator("#content")).to_contain_text("tessa")
    expect(page.locator("#content")).to_contain_text("read the team's repositories")
    expect(page.get_by_role("link", name=plan.pk)).to_have_count(1)

    expect(page.locator("#content")).to_contain_text('"acme/*"')  # the rule as published
    expect(page.get_by_role("link", name="default v1")).to_have_count(1)

    page.get_by_role("link", name="allow github_* (rules[0])").click()
    expect(page).to_have_url(re.compile(r"/admin/policies/policyversion/\d+/change/#rules-0$"))
    expect(page.locator("#content")).to_contain_text("tessa")
    expect(page.locator("#content")).to_contain_text("read the team's repositories")
    expect(page.locator("#rules-0")).to_contain_text("github_*")

    # The agent's page lists its API key with no Revoke… link for an auditor.
    page.goto(f"/admin/members/agent/{plan.agent_id}/change/")
    expect(page.locator("#content")).to_contain_text(plan.agent.api_keys.get().prefix)
    expect(page.get_by_role("link", name="Revoke…")).to_have_count(0)
