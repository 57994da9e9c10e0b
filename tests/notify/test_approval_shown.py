"""The approval (who, when, why) is on the plan's page, on each of its decisions' pages and
in the decisions' and plans' exports as ``approved_by``, ``approved_at`` and
``approval_reason``, read with the rows: no query per row (docs/decisions/0057)."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from guard.decisions import Decision
from plans.approvals import plan_approval_decide
from plans.models import Plan
from tests.admin.conftest import logged_in
from tests.notify.conftest import make_person, request_approval
from tests.plans.decision_rows import decision_create

DECISIONS_CSV = reverse("admin:plans_planevent_export_csv")
DECISIONS_JSONL = reverse("admin:plans_planevent_export_jsonl")
PLANS_CSV = reverse("admin:plans_plan_export_csv")
DECIDED_AT = datetime(2026, 11, 30, 18, 37, 32, tzinfo=UTC)


def approved_plan(review_agent, approver) -> Plan:
    plan = request_approval(review_agent)
    # A fixed moment, inside the request's window, so the page's text can be asserted.
    Plan.objects.filter(pk=plan.pk).update(
        created_at=DECIDED_AT - timedelta(minutes=5),
        approval_deadline=DECIDED_AT + timedelta(hours=1),
    )
    plan_approval_decide(
        plan=plan, by_user=approver, approve=True, reason="checked the recipient", now=DECIDED_AT
    )
    return plan


def auditor_client(team):
    return logged_in(make_person("audrey", "audrey@acme.dev", group="Auditors", teams=[team]))


def decide(plan: Plan, count: int, decision: Decision = Decision.ALLOWED) -> None:
    now = timezone.now()
    for index in range(count):
        decision_create(
            plan=plan,
            occurred_at=now + timedelta(seconds=index),
            tool="deploy",
            decision=decision,
            step=1,
        )


def csv_rows(client, url: str, query: dict) -> tuple[list[dict[str, str]], int]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, query)
        assert response.status_code == 200
        body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body))), len(captured)


def test_the_plans_page_shows_who_approved_it_when_and_why(team, review_agent, approver):
    plan = approved_plan(review_agent, approver)

    page = auditor_client(team).get(reverse("admin:plans_plan_change", args=[plan.pk]))

    html = page.content.decode()
    row = html.split('<tr id="approval">', 1)[1].split("</tr>", 1)[0]
    assert "approved</span> by april@acme.dev at 2026-11-30 18:37:32 UTC" in row
    assert "reason: checked the recipient" in row


def test_a_waiting_plans_page_links_the_approval_queue(team, review_agent, approver):
    plan = request_approval(review_agent)

    html = auditor_client(team).get(reverse("admin:plans_plan_change", args=[plan.pk]))
    row = html.content.decode().split('<tr id="approval">', 1)[1].split("</tr>", 1)[0]

    assert "pending</span> waits for a person until" in row
    assert f"/admin/notify/approvalrequest/{plan.pk}/change/" in row


def test_a_denied_plans_page_names_who_denied_it(team, review_agent, approver):
    plan = request_approval(review_agent)
    plan_approval_decide(plan=plan, by_user=approver, approve=False, reason="not on Friday")

    html = auditor_client(team).get(reverse("admin:plans_plan_change", args=[plan.pk]))
    row = html.content.decode().split('<tr id="approval">', 1)[1].split("</tr>", 1)[0]

    assert "denied</span> by april@acme.dev at" in row
    assert "reason: not on Friday" in row


def test_each_decisions_page_shows_the_plans_approval(team, review_agent, approver):
    plan = approved_plan(review_agent, approver)
    decide(plan, 1)
    event = plan.events.get()

    html = (
        auditor_client(team)
        .get(reverse("admin:plans_planevent_change", args=[event.pk]))
        .content.decode()
    )

    assert "Plan&#x27;s approval" in html
    assert "approved</span> by april@acme.dev at 2026-11-30 18:37:32 UTC" in html
    assert "reason: checked the recipient" in html


def test_the_decisions_export_has_the_approval_without_a_query_per_row(
    team, review_agent, approver
):
    approved = approved_plan(review_agent, approver)
    denied = request_approval(review_agent)
    plan_approval_decide(plan=denied, by_user=approver, approve=False, reason="no")
    decide(approved, 2)
    decide(denied, 1, decision=Decision.APPROVAL_PENDING)
    client = auditor_client(team)
    client.get(DECISIONS_CSV)  # what a process caches, once

    rows, few_queries = csv_rows(client, DECISIONS_CSV, {})
    decide(approved, 200)
    (
        many,
        many_queries,
    ) = csv_rows(client, DECISIONS_CSV, {})

    by_plan = {row["plan"]: row for row in rows}
    assert (
        by_plan[approved.pk]["approved_by"],
        by_plan[approved.pk]["approved_at"],
        by_plan[approved.pk]["approval_reason"],
    ) == ("april@acme.dev", "2026-11-30T18:37:32+00:00", "checked the recipient")
    # A denial is not an approval.
    assert (by_plan[denied.pk]["approved_by"], by_plan[denied.pk]["approved_at"]) == ("", "")
    assert len(many) == len(rows) + 200
    assert many_queries == few_queries


def test_the_decisions_json_lines_carry_the_approval(team, review_agent, approver):
    plan = approved_plan(review_agent, approver)
    decide(plan, 1)

    response = auditor_client(team).get(DECISIONS_JSONL)
    (line,) = b"".join(response.streaming_content).decode().splitlines()

    row = json.loads(line)
    assert row["approved_by"] == "april@acme.dev"
    assert row["approved_at"] == "2026-11-30T18:37:32Z"
    assert row["approval_reason"] == "checked the recipient"


def test_the_plans_export_has_the_approval(team, review_agent, approver):
    approved = approved_plan(review_agent, approver)
    waiting = request_approval(review_agent)

    rows, _ = csv_rows(auditor_client(team), PLANS_CSV, {})

    by_id = {row["id"]: row for row in rows}
    assert by_id[approved.pk]["approved_by"] == "april@acme.dev"
    assert by_id[approved.pk]["approved_at"] == "2026-11-30T18:37:32+00:00"
    assert by_id[waiting.pk]["approved_by"] == ""
