"""The admin index counts the plans awaiting approval and links the queue, and lists the
blocked calls of the day by plan, each plan once with its total (docs/decisions/0057)."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from guard.decisions import Decision
from members.services import team_get_or_create
from plans.approvals import plan_approval_decide
from plans.models import Plan, PlanEvent
from plans.services import plan_issue, plan_revoke
from policies.services import policy_set
from tests.admin.conftest import PASSWORD, logged_in
from tests.admin.test_overview import INDEX, cell
from tests.conftest import make_agent, plan_document
from tests.notify.conftest import REVIEW_POLICY, TEAM_ADMINS, make_person, request_approval
from tests.plans.decision_rows import decisions_bulk_create


def blocked_calls(plan: Plan, count: int, decision: Decision = Decision.PLAN_REVOKED) -> None:
    now = timezone.now()
    decisions_bulk_create(
        PlanEvent(plan=plan, occurred_at=now, tool="github_x", decision=decision)
        for _ in range(count)
    )


def listed_rows(client, href: str) -> int:
    html = client.get(href.replace("&amp;", "&")).content.decode()
    body = re.search(r'<table id="result_list">.*?<tbody>(.*?)</tbody>', html, re.S)
    return body.group(1).count("<tr") if body else 0


def test_the_index_counts_the_plans_awaiting_approval_and_links_the_queue(
    team, review_agent, other_review_agent, approver
):
    waiting = [request_approval(review_agent) for _ in range(3)]
    plan_approval_decide(plan=waiting[0], by_user=approver, approve=True)
    revoked = request_approval(review_agent)
    plan_revoke(plan=revoked, by="tessa", reason="not needed")
    request_approval(other_review_agent, user="olga@globex.test")  # another team's
    client = logged_in(approver)

    page = client.get(INDEX).content.decode()

    # Waiting now: two (one was approved, one revoked while it waited).
    assert cell(page, "default", "awaiting-approval") == "2"
    link = re.search(r'<td class="awaiting-approval"><a href="([^"]+)"', page)
    assert link is not None
    assert link.group(1).startswith("/admin/notify/approvalrequest/?team__exact=")
    # The link lists what it counts, and those are the waiting plans.
    assert listed_rows(client, link.group(1)) == 2
    queue = client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert waiting[1].pk in queue and waiting[2].pk in queue
    assert revoked.pk not in queue and waiting[0].pk not in queue


def test_an_auditor_sees_the_count_and_opens_the_queue(team, review_agent):
    request_approval(review_agent)
    auditor = make_person("audrey", "audrey@acme.dev", group="Auditors", teams=[team])
    client = logged_in(auditor)

    page = client.get(INDEX).content.decode()

    assert cell(page, "default", "awaiting-approval") == "1"
    link = re.search(r'<td class="awaiting-approval"><a href="([^"]+)"', page)
    assert link is not None and listed_rows(client, link.group(1)) == 1


def test_repeated_blocked_calls_of_one_plan_are_one_line_with_their_total(team, agent, member):
    team_admin_client = logged_in(
        make_person("tessa", "tessa@acme.dev", group=TEAM_ADMINS, teams=[team])
    )
    runaway = plan_issue(agent=agent.agent, document=plan_document(goal="Loop forever")).plan
    careful = plan_issue(agent=agent.agent, document=plan_document(goal="Try once")).plan
    blocked_calls(runaway, 57)
    blocked_calls(careful, 2, Decision.NOT_IN_PLAN)
    blocked_calls(careful, 1, Decision.ALLOWED)  # not blocked

    page = team_admin_client.get(INDEX).content.decode()

    assert cell(page, "default", "blocked-calls") == "59"
    row = re.search(r'<tr data-team="default">(.*?)</tr>', page, re.S)
    assert row is not None and "in 2 plans" in row.group(1)
    by_plan = re.search(
        r'<div class="plangate-blocked-plans" data-team="default">(.*?)</div>', page, re.S
    )
    assert by_plan is not None
    lines = re.findall(r'<li data-plan="([^"]+)">(.*?)</li>', by_plan.group(1), re.S)
    # One line per plan, the most blocked first, each with its total.
    assert [plan_id for plan_id, _ in lines] == [runaway.pk, careful.pk]
    assert "Loop forever" in lines[0][1] and "57 blocked calls</a>" in lines[0][1]
    assert "Try once" in lines[1][1] and "2 blocked calls</a>" in lines[1][1]
    # A line's total opens that plan's blocked calls of the day, all of them.
    total = re.search(r'<a class="blocked-total" href="([^"]+)"', lines[0][1])
    assert total is not None
    assert listed_rows(team_admin_client, total.group(1)) == 57


def test_the_blocked_plans_cost_the_same_queries_for_one_team_as_for_many(team, agent):
    client = logged_in(User.objects.create_superuser("root", "root@example.test", PASSWORD))

    def busy(team_, persona) -> None:
        reviewed = policy_set(team=team_, slug="reviewed", document=REVIEW_POLICY)
        reviewer = make_agent(team_, "deployer", reviewed)
        email = team_.members.order_by("pk").values_list("email", flat=True).first()
        request_approval(reviewer, user=email)
        for goal in ("a", "b", "c"):
            plan = plan_issue(agent=persona.agent, document=plan_document(goal=goal, user=email))
            blocked_calls(plan.plan, 3)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(INDEX).status_code == 200
        return len(captured)

    from members.services import member_upsert

    member_upsert(team=team, email="alice@acme.dev")
    busy(team, agent)
    few = queries()
    for index in range(4):
        extra = team_get_or_create(slug=f"team{index}", name=f"Team {index}")
        member_upsert(team=extra, email=f"alice{index}@acme.dev")
        version = policy_set(team=extra, slug="p", document=REVIEW_POLICY)
        busy(extra, make_agent(extra, "bot", version))
    page = client.get(INDEX).content.decode()

    assert queries() == few
    assert cell(page, "team3", "awaiting-approval") == "1"
    assert page.count('<div class="plangate-blocked-plans"') == 5
