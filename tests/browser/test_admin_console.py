"""The admin console in a real browser: a team admin at work, an auditor browsing, and
team scoping as a person meets it."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from kernel.problems import Code
from members.models import ApiKey, Member
from members.services import api_key_authenticate, member_upsert
from plans.models import Plan
from policies.models import PolicyVersion
from tests.admin.conftest import ensure_admin_groups
from tests.conftest import POLICY, make_agent, plan_document

from .conftest import fill_json_editor, log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"
KEY_PATTERN = re.compile(r"^pg_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$")


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
def world(transactional_db):
    """Two teams, each with a policy, a member and an agent; a plan declared through the API."""
    from members.services import team_get_or_create
    from policies.services import policy_set

    acme = team_get_or_create(slug="default", name="Acme")
    globex = team_get_or_create(slug="globex", name="Globex")
    version = policy_set(team=acme, slug="default", document=POLICY)
    member_upsert(team=acme, email="alice@acme.dev", name="Alice", role="engineer")
    member_upsert(team=globex, email="olga@globex.test", name="Olga")
    agent = make_agent(acme, "summariser", version)
    declared = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert declared.status_code == 201, declared.content
    return {"acme": acme, "globex": globex, "agent": agent, "declared": declared.json()}


def refresh(world):
    declared = world["declared"]
    return world["agent"].client.post(
        f"/v1/plans/{declared['id']}/refresh", {"token": declared["token"]}, format="json"
    )


def success_message(page) -> str:
    return page.locator("ul.messagelist").inner_text()


def test_a_team_admin_manages_members_policies_keys_and_plans(page, world):
    staff("tessa", "Team admins", [world["acme"]])
    log_in(page, "tessa", PASSWORD)

    # Add a member.
    page.goto("/admin/members/member/")
    page.get_by_role("link", name="Add member").click()
    page.fill("#id_email", "Bob@Acme.dev")
    page.fill("#id_name", "Bob")
    page.click("input[name=_save]")
    expect(page.locator("ul.messagelist")).to_contain_text("was added successfully")
    assert Member.objects.get(team=world["acme"], email="bob@acme.dev").name == "Bob"

    # Edit the policy: an invalid document is refused on the form, naming the path...
    page.goto("/admin/policies/policy/")
    page.get_by_role("link", name="default", exact=True).click()
    broken = json.loads(json.dumps(POLICY))
    broken["rules"][1]["effect"] = "forbid"
    fill_json_editor(page, json.dumps(broken, indent=2))
    page.click("input[name=_save]")
    expect(page.locator(".errorlist")).to_contain_text("rules[1].effect")
    assert (
        PolicyVersion.objects.filter(policy__slug="default", policy__team=world["acme"]).count()
        == 1
    )

    # ...a valid one publishes version 2, which the next refresh carries.
    tightened = json.loads(json.dumps(POLICY))
    tightened["rules"].append({"effect": "deny", "tools": ["send_email"]})
    fill_json_editor(page, json.dumps(tightened, indent=2))
    page.fill("#id_comment", "no e-mail for now")
    page.click("input[name=_save]")
    # (first shown with what it would refuse among live plans: tests/browser/test_policy_preview.py)
    page.click("#impact-confirm input[name=_save]")
    expect(page.locator("ul.messagelist")).to_contain_text("Published default version 2")
    refreshed = refresh(world)
    assert refreshed.status_code == 200, refreshed.content
    assert refreshed.json()["policy"]["version"] == 2

    # Create an API key: shown once.
    keys_before = ApiKey.objects.count()
    page.goto("/admin/members/agent/")
    page.get_by_role("link", name="summariser").click()
    page.get_by_role("link", name="Create API key").click()
    page.fill("#id_name", "browser test")
    page.get_by_role("button", name="Create API key").or_(
        page.locator("input[type=submit][value='Create API key']")
    ).click()
    plaintext = page.locator("#secret-plaintext").input_value()
    assert KEY_PATTERN.match(plaintext)
    assert api_key_authenticate(plaintext).agent_id == world["agent"].agent.pk
    secret = plaintext.split("_", 2)[2]
    page.reload()
    assert secret not in page.content()
    page.goto(f"/admin/members/agent/{world['agent'].agent.pk}/change/")
    assert secret not in page.content()
    assert ApiKey.objects.count() == keys_before + 1

    # Revoke the plan: its next refresh answers 410 plan_revoked.
    page.goto("/admin/plans/plan/")
    page.get_by_role("link", name=re.compile("Summarise open issues")).click()
    page.get_by_role("link", name="Revoke plan").click()
    page.get_by_role("button", name="Yes, revoke").or_(
        page.locator("input[type=submit][value='Yes, revoke']")
    ).click()
    expect(page.locator("ul.messagelist")).to_contain_text("Revoked 1 plan")
    expect(page.locator("#content-main")).to_contain_text("revoked")
    assert Plan.objects.get(pk=world["declared"]["id"]).status == Plan.Status.REVOKED
    gone = refresh(world)
    assert gone.status_code == 410
    assert gone.json()["code"] == Code.PLAN_REVOKED


def test_an_auditor_browses_plans_and_is_refused_any_change(page, world, live_server):
    staff("audrey", "Auditors", [world["acme"]])
    log_in(page, "audrey", PASSWORD)

    page.get_by_role("link", name="Issued plans").click()
    expect(page.locator("#result_list")).to_contain_text("Summarise open issues")
    page.get_by_role("link", name=re.compile("Summarise open issues")).click()
    expect(page.locator("#steps")).to_contain_text("github_list_issues")
    expect(page.locator("#content-main")).to_contain_text(world["declared"]["planHash"])
    expect(page.locator("#tokens")).to_contain_text("issue")
    expect(page.get_by_role("link", name="Revoke plan")).to_have_count(0)
    expect(page.locator("input[name=_save]")).to_have_count(0)

    # No add page, and a forged POST is refused by the server, not hidden by the page.
    response = page.goto("/admin/members/member/add/")
    assert response.status == 403
    page.goto("/admin/plans/plan/")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    forged = page.request.post(
        f"{live_server.url}/admin/plans/plan/",
        form={
            "csrfmiddlewaretoken": csrf,
            "action": "revoke_plans",
            "_selected_action": world["declared"]["id"],
            "post": "yes",
        },
        headers={"Referer": f"{live_server.url}/admin/plans/plan/"},
    )
    assert forged.status == 403
    assert Plan.objects.get(pk=world["declared"]["id"]).status == Plan.Status.ACTIVE


def test_a_team_admin_cannot_see_another_teams_members(page, world):
    staff("tessa", "Team admins", [world["acme"]])
    olga = Member.objects.get(email="olga@globex.test")
    log_in(page, "tessa", PASSWORD)

    page.goto("/admin/members/member/")
    expect(page.locator("#result_list")).to_contain_text("alice@acme.dev")
    expect(page.locator("#result_list")).not_to_contain_text("olga@globex.test")
    page.fill("#searchbar", "olga")
    page.press("#searchbar", "Enter")
    expect(page.locator("#changelist")).not_to_contain_text("olga@globex.test")
    page.goto(f"/admin/members/member/{olga.pk}/change/")
    expect(page.locator("ul.messagelist")).to_contain_text("doesn\u2019t exist")
    expect(page.locator("#content")).not_to_contain_text("olga@globex.test")
