"""The admin index: an overview per team of the last 24 hours, scoped to the user's teams,
at a fixed number of queries; and, for staff of no team, who can give them access."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from guard.decisions import Decision
from members.services import api_key_create, member_upsert, team_get_or_create
from plans.models import Plan
from plans.services import plan_issue
from policies.services import policy_set
from tests.admin.conftest import KEY_OPERATORS, logged_in, make_staff
from tests.conftest import POLICY, make_agent, plan_document
from tests.plans.decision_rows import decision_create

INDEX = "/admin/"


def cell(page: str, team_slug: str, column: str) -> str:
    row = re.search(rf'<tr data-team="{team_slug}">(.*?)</tr>', page, re.S)
    assert row is not None, f"no overview row for {team_slug}"
    value = re.search(rf'<td class="{column}">(?:<a [^>]*>)?([^<]*)', row.group(1))
    assert value is not None, f"no {column} in {team_slug}'s row"
    return value.group(1).strip()


def busy_day(team, agent) -> None:
    """Two active plans, one of which lost decisions, one whose token the guard refused,
    three blocked calls and an allowed one, a refused declaration, an expiring API key."""
    member_upsert(team=team, email="alice@acme.dev")
    member_upsert(team=team, email="bob@acme.dev")
    first = plan_issue(agent=agent.agent, document=plan_document()).plan
    plan_issue(agent=agent.agent, document=plan_document(user="bob@acme.dev"))
    refused_token = plan_issue(agent=agent.agent, document=plan_document()).plan
    Plan.objects.filter(pk=refused_token.pk).update(status=Plan.Status.TOKEN_REFUSED)
    Plan.objects.filter(pk=first.pk).update(decisions_lost=2)
    now = timezone.now()
    for decision in [Decision.NOT_IN_PLAN, Decision.POLICY_DENIED, Decision.NOT_IN_PLAN]:
        decision_create(plan=first, occurred_at=now, tool="github_x", decision=decision)
    decision_create(plan=first, occurred_at=now, tool="github_get_issue", decision=Decision.ALLOWED)
    # Older than the window: not counted.
    decision_create(
        plan=first,
        occurred_at=now - timedelta(hours=25),
        tool="github_x",
        decision=Decision.NOT_IN_PLAN,
    )
    refused = agent.client.post(
        "/v1/plans", {"plan": plan_document(user="nobody@acme.dev")}, format="json"
    )
    assert refused.status_code == 403
    api_key_create(agent=agent.agent, name="soon", expires_at=now + timedelta(days=2))
    api_key_create(agent=agent.agent, name="later", expires_at=now + timedelta(days=30))


def test_the_overview_counts_the_teams_day(team_admin_client, team, agent, other_agent):
    busy_day(team, agent)
    busy_day(other_agent.team, other_agent)
    page = team_admin_client.get(INDEX).content.decode()
    assert cell(page, "default", "active-plans") == "2"
    assert cell(page, "default", "blocked-calls") == "3"
    assert cell(page, "default", "refused-declarations") == "1"
    assert cell(page, "default", "refused-refreshes") == "0"
    assert cell(page, "default", "tokens-refused") == "1"
    assert cell(page, "default", "decisions-lost") == "1"
    assert cell(page, "default", "api-keys-expiring") == "1"
    # Latest activity: the team's changes, linking to its activity list.
    activity = re.search(
        r'<div class="plangate-activity" data-team="default">(.*?)</div>', page, re.S
    )
    assert activity is not None
    assert activity.group(1).count("<li>") == 5
    assert "created api_key" in activity.group(1)
    assert f"?team__exact={team.pk}" in activity.group(1)
    # Every link of the overview opens a list (an unknown filter would redirect with ?e=1).
    overview = page.split('id="plangate-overview"', 1)[1].split('id="nav-sidebar"', 1)[0]
    for href in set(re.findall(r'href="(/admin/[^"]+)"', overview)):
        response = team_admin_client.get(href.replace("&amp;", "&"))
        assert response.status_code == 200, href
    # And a count's link lists what it counts.
    for column in [
        "active-plans",
        "blocked-calls",
        "refused-declarations",
        "tokens-refused",
        "decisions-lost",
        "api-keys-expiring",
    ]:
        row = re.search(r'<tr data-team="default">(.*?)</tr>', page, re.S)
        assert row is not None
        link = re.search(rf'<td class="{column}"><a href="([^"]+)"', row.group(1))
        assert link is not None, column
        listed = team_admin_client.get(link.group(1).replace("&amp;", "&")).content.decode()
        body = re.search(r'<table id="result_list">.*?<tbody>(.*?)</tbody>', listed, re.S)
        shown = body.group(1).count("<tr") if body else 0
        assert str(shown) == cell(page, "default", column), column
    # Another team's data is nowhere on the page.
    assert 'data-team="globex"' not in page
    assert "globex-bot" not in page and "olga@globex.test" not in page


def test_a_superuser_sees_every_team(superuser_client, team, agent, other_agent):
    busy_day(other_agent.team, other_agent)
    page = superuser_client.get(INDEX).content.decode()
    assert cell(page, "default", "blocked-calls") == "0"
    assert cell(page, "globex", "blocked-calls") == "3"
    assert cell(page, "globex", "active-plans") == "2"


def test_an_auditor_sees_the_overview_and_the_key_schedule(auditor_client, team, agent):
    plan_issue(agent=agent.agent, document=plan_document())
    page = auditor_client.get(INDEX).content.decode()
    assert cell(page, "default", "active-plans") == "1"
    assert "due for rotation at" in page
    assert "Invite a teammate" not in page


def queries_for(client) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(INDEX).status_code == 200
    return len(captured)


def test_the_index_costs_the_same_queries_for_one_team_as_for_many(superuser, team, agent):
    client = logged_in(superuser)
    busy_day(team, agent)
    few = queries_for(client)
    for index in range(6):
        extra = team_get_or_create(slug=f"team{index}", name=f"Team {index}")
        busy_day(extra, make_agent(extra, "bot", policy_set(team=extra, slug="p", document=POLICY)))
    assert queries_for(client) == few


def test_staff_of_no_team_are_told_who_gives_access(superuser, db):
    nobody = make_staff("nobody", group=None, teams=[])
    page = logged_in(nobody).get(INDEX).content.decode()
    assert "You are not staff of any team yet" in page
    assert "root@example.test" in page
    assert 'id="plangate-overview"' not in page


def test_a_key_operator_with_no_team_is_told_too(key_operator_client, superuser):
    page = key_operator_client.get(INDEX).content.decode()
    assert "You are not staff of any team yet" in page
    assert KEY_OPERATORS  # their signing keys stay in the app list
    assert "Signing keys" in page
