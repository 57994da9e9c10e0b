"""The console for people, in a real browser: a superuser invites an auditor who sets a
password through the link and sees their team only; the busiest lists fit a 1400-pixel
screen with the navigation sidebar open, and tool names never break mid-word."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from audit.services import records_seal
from guard.decisions import Decision
from members.services import member_upsert, team_get_or_create
from plans.services import plan_issue
from policies.services import policy_set
from tests.admin.conftest import ensure_admin_groups
from tests.conftest import POLICY, make_agent, plan_document
from tests.plans.decision_rows import decision_create

from .conftest import csp_violations, log_in, new_page

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"
INVITEE_PASSWORD = "a long and private passphrase 42"
LONG_TOOL = "github_list_repository_collaborators"
WIDTH = 1400


def long_plan(user: str, goal: str) -> dict:
    return plan_document(
        user=user,
        goal=goal,
        steps=[
            {"tool": LONG_TOOL, "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 3},
            {"tool": "github_get_issue", "args": {"repo": {"eq": "acme/public-app"}}},
        ],
    )


@pytest.fixture
def world(transactional_db):
    """Two teams with a plan each, decisions with long tools and reasons, a sealed trail."""
    ensure_admin_groups()
    import importlib

    from django.contrib.auth.models import Group, Permission

    importlib.import_module("audit.migrations.0003_audit_view_permissions").grant(Group, Permission)
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    teams = {}
    for slug, name, email in [
        ("default", "Acme Corporation Platform Engineering", "alexandra.longname@acme.dev"),
        ("globex", "Globex International Operations", "olga.verylongsurname@globex.test"),
    ]:
        team = team_get_or_create(slug=slug, name=name)
        member_upsert(team=team, email=email, name="Someone", role="engineer")
        agent = make_agent(
            team,
            f"{slug}-repository-triage-assistant",
            policy_set(team=team, slug="default", document=POLICY),
        )
        plan = plan_issue(
            agent=agent.agent,
            document=long_plan(email, f"{name}: summarise the open issues " * 3),
        ).plan
        now = timezone.now()
        for index in range(8):
            decision_create(
                plan=plan,
                occurred_at=now - timedelta(minutes=index),
                tool=LONG_TOOL,
                decision=Decision.ALLOWED if index % 2 else Decision.NOT_IN_PLAN,
                step=0,
                reason='step 0: repo must satisfy {"eq": "acme/public-app"} but the call '
                "named acme/secret-infrastructure-configuration",
            )
        refused = agent.client.post(
            "/v1/plans", {"plan": long_plan("nobody.unknown.person@acme.dev", "x")}, format="json"
        )
        assert refused.status_code == 403
        teams[slug] = {"team": team, "plan": plan}
    records_seal()
    return teams


def test_a_superuser_invites_an_auditor_who_sees_their_team_only(page, browser, live_server, world):
    log_in(page, "root", PASSWORD)
    page.get_by_role("link", name="Invite a teammate").click()
    expect(page.locator("h1")).to_have_text("Invite a teammate")
    page.fill("#id_email", "Audrey@Acme.dev")
    page.fill("#id_name", "Audrey")
    page.get_by_role("radio", name=re.compile("Auditor")).check()
    page.get_by_role("checkbox", name="Acme Corporation Platform Engineering").check()
    # No raw permission list anywhere on the way.
    assert "permission" not in page.content().lower()
    page.get_by_role("button", name="Invite").click()
    expect(page.locator("#plangate-invited")).to_contain_text("audrey@acme.dev")
    assert "permission" not in page.content().lower()
    link = page.locator("#set-password-link").input_value()

    invitee = new_page(browser, live_server.url)
    violations = csp_violations(invitee)
    try:
        invitee.goto(link)
        expect(invitee.locator("h1")).to_have_text("Choose your password")
        invitee.fill("#id_new_password1", INVITEE_PASSWORD)
        invitee.fill("#id_new_password2", INVITEE_PASSWORD)
        invitee.get_by_role("button", name="Set my password").click()
        expect(invitee.locator("ul.messagelist")).to_contain_text("Your password is set")
        invitee.fill("#id_username", "audrey@acme.dev")
        invitee.fill("#id_password", INVITEE_PASSWORD)
        invitee.click("input[type=submit]")
        invitee.wait_for_selector("#user-tools")
        expect(invitee.locator("#plangate-overview")).to_be_visible()
        invitee.get_by_role("link", name="Issued plans").first.click()
        rows = invitee.locator("#result_list tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(world["default"]["plan"].id)
        assert world["globex"]["plan"].id not in invitee.content()
        # The used link does not work a second time.
        invitee.goto(link)
        expect(invitee.locator(".errornote")).to_contain_text("does not work any more")
        assert not violations, violations
    finally:
        invitee.context.close()


LISTS = {
    "plans": "/admin/plans/plan/",
    "decisions": "/admin/plans/planevent/",
    "audit trail": "/admin/audit/auditrecord/",
    "refused attempts": "/admin/audit/refusedattempt/",
    "activity": "/admin/audit/activityrecord/",
    "signing keys": "/admin/plans/signingkey/",
}

# Whether each text node holding the tool's name lies on one line.
TOOL_ON_ONE_LINE = """(tool) => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const lines = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const at = node.textContent.indexOf(tool);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + tool.length);
    const tops = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
    lines.push(tops.size);
  }
  return lines;
}"""


def test_the_lists_fit_1400_pixels_with_the_sidebar_open(browser, live_server, world):
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": WIDTH, "height": 900}
    )
    page = context.new_page()
    try:
        log_in(page, "root", PASSWORD)
        for name, url in LISTS.items():
            page.goto(url)
            expect(page.locator("#nav-sidebar")).to_be_visible()
            expect(page.locator("#result_list")).to_be_visible()
            scroll_width = page.evaluate("document.scrollingElement.scrollWidth")
            assert scroll_width <= WIDTH, f"{name}: the page is {scroll_width} px wide"
            columns = page.locator("#result_list thead th").count()
            visible = page.evaluate(
                """() => [...document.querySelectorAll('#result_list thead th')]
                    .filter((th) => th.getBoundingClientRect().right <= window.innerWidth)
                    .length"""
            )
            assert visible == columns, f"{name}: {columns - visible} column(s) off screen"
            if name == "decisions":
                lines = page.evaluate(TOOL_ON_ONE_LINE, LONG_TOOL)
                assert lines and all(count == 1 for count in lines), f"{name}: {lines}"
        page.goto(f"/admin/plans/plan/{world['default']['plan'].id}/change/")
        lines = page.evaluate(TOOL_ON_ONE_LINE, LONG_TOOL)
        assert lines and all(count == 1 for count in lines), f"plan page: {lines}"
        assert page.evaluate("document.scrollingElement.scrollWidth") <= WIDTH
    finally:
        context.close()
