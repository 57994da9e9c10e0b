"""An auditor in a real browser: opens a plan, reads its timeline in order, follows a
decision to its plan's policy version (author, comment, the rule), and never meets a
control they cannot use."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from guard.agent import CallBlocked, Guard
from members.services import member_upsert, team_get_or_create
from plans.models import Plan
from policies.services import policy_set
from tests.admin.conftest import ensure_admin_groups
from tests.conftest import POLICY, make_agent, plan_document

from .conftest import log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"
REPO = "acme/public-app"


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
def audited_plan(transactional_db, live_server, settings) -> Plan:
    """A plan run by a real guard against the live server, under a policy published with
    an author and a comment: declared, one allowed call, one blocked call, closed. The
    guard reports its decisions (with the rule and version that decided), the ACP updates
    it showed and the plan's end through the real API."""
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
    guard = Guard(
        live_server.url,
        agent.api_key,
        issuer=settings.PLANGATE_ISSUER,
        acp_sink=lambda message: None,
        report_interval=0.05,
    )
    try:
        declared = guard.declare(
            plan_document(
                steps=[
                    {"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}},
                    {"tool": "github_get_issue", "args": {"repo": {"eq": REPO}}},
                ]
            )
        )
        guard.call("github_list_issues", {"repo": REPO}, lambda repo: [])
        with pytest.raises(CallBlocked):
            guard.call("github_delete_repo", {"repo": REPO}, lambda repo: None)
    finally:
        guard.close()
    return Plan.objects.get(pk=declared.plan_id)


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
    expect(rows.first).to_contain_text("plan issued")
    kinds = [row.get_attribute("data-kind") for row in rows.all()]
    assert kinds[:2] == ["issued", "token"] and kinds[-1] == "ended"
    assert kinds.count("decision") == 2 and kinds.count("display") >= 2
    assert kinds.index("display") < kinds.index("decision")  # the user saw the plan first
    times = page.locator("#timeline > tbody > tr time").all_inner_texts()
    assert times == sorted(times) and all(len(time) == len("2026-12-01 09:00:00") for time in times)
    allowed, blocked = (rows.nth(index) for index, kind in enumerate(kinds) if kind == "decision")
    expect(allowed).to_contain_text("github_list_issues")
    expect(allowed).to_contain_text("step 1")
    expect(blocked).to_contain_text("github_delete_repo")
    expect(blocked).to_contain_text("not_in_plan")
    expect(rows.last).to_contain_text("completed")  # no step was required

    allowed.get_by_role("link", name="decision").click()
    expect(page.locator("#content")).to_contain_text("step 1: github_list_issues")
    expect(page.locator("#content")).to_contain_text("tessa")
    expect(page.locator("#content")).to_contain_text("read the team's repositories")
    expect(page.get_by_role("link", name=plan.pk)).to_have_count(1)

    expect(page.locator("#content")).to_contain_text('"acme/*"')  # the rule as published
    expect(page.get_by_role("link", name="default v1")).to_have_count(1)

    page.locator("#content").get_by_role("link", name=re.compile(r"\(rules\[0\]\)")).click()
    expect(page).to_have_url(re.compile(r"/admin/policies/policyversion/\d+/change/#rules-0$"))
    expect(page.locator("#content")).to_contain_text("tessa")
    expect(page.locator("#content")).to_contain_text("read the team's repositories")
    expect(page.locator("#rules-0")).to_contain_text("github_*")

    # The agent's page lists its API key with no Revoke… link for an auditor.
    page.goto(f"/admin/members/agent/{plan.agent_id}/change/")
    expect(page.locator("#content")).to_contain_text(plan.agent.api_keys.get().prefix)
    expect(page.get_by_role("link", name="Revoke…")).to_have_count(0)
