"""The decisions' export is streamed from one query, whatever its length: each row's policy
version is the one stored on it (joined, never computed per row), its cells keep the CSV
injection guard, and only those who may view the decisions get it."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from guard.decisions import Decision
from plans.models import PlanToken
from plans.services import plan_issue, plan_refresh
from policies.services import policy_set
from tests.admin.conftest import logged_in, make_staff
from tests.conftest import POLICY, plan_document

EXPORT = "admin:plans_planevent_export_csv"


def post_events(agent, plan_id: str, events: list[dict], seq: int) -> None:
    body = {"stream": "e" * 32, "seq": seq, "events": events}
    response = agent.client.post(f"/v1/plans/{plan_id}/events", body, format="json")
    assert response.status_code == 202, response.content


def event(at, **more) -> dict:
    return {
        "at": at.isoformat().replace("+00:00", "Z"),
        "tool": "github_get_issue",
        "decision": Decision.ALLOWED,
        "step": 1,
        **more,
    }


@pytest.fixture
def refreshed(team, agent):
    """A plan issued under default v1 an hour ago and refreshed under v2 half an hour ago."""
    issued = plan_issue(agent=agent.agent, document=plan_document())
    plan = issued.plan
    hour_ago = timezone.now() - timedelta(hours=1)
    PlanToken.objects.filter(plan=plan).update(issued_at=hour_ago)
    policy_set(
        team=team,
        slug="default",
        document={**POLICY, "rules": [*POLICY["rules"], {"effect": "deny", "tools": ["x"]}]},
    )
    plan_refresh(agent=agent.agent, plan_id=plan.pk, token=issued.token)
    PlanToken.objects.filter(plan=plan, kind=PlanToken.Kind.REFRESH).update(
        issued_at=hour_ago + timedelta(minutes=30)
    )
    return plan, hour_ago


def export_rows(client, query: dict) -> tuple[list[list[str]], int, StreamingHttpResponse]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse(EXPORT), query)
        assert response.status_code == 200
        body = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(body))), len(captured), response


def test_the_export_costs_the_same_queries_for_3_decisions_as_for_300(
    auditor_client, agent, refreshed
):
    plan, start = refreshed
    post_events(agent, plan.pk, [event(start + timedelta(seconds=i)) for i in range(3)], 1)
    auditor_client.get(reverse(EXPORT), {"q": plan.pk})  # what a process caches, once
    few, few_queries, response = export_rows(auditor_client, {"q": plan.pk})
    later = start + timedelta(minutes=40)
    post_events(agent, plan.pk, [event(later + timedelta(seconds=i)) for i in range(297)], 2)

    many, many_queries, _ = export_rows(auditor_client, {"q": plan.pk})

    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"].startswith("text/csv")
    assert (len(few), len(many)) == (1 + 3, 1 + 300)
    assert many_queries == few_queries


def test_each_exported_row_has_the_version_it_was_made_under(auditor_client, agent, refreshed):
    plan, start = refreshed
    post_events(
        agent,
        plan.pk,
        [
            event(start + timedelta(minutes=10)),  # under the first token: v1
            event(start + timedelta(minutes=40)),  # under the refresh: v2
            event(start + timedelta(minutes=45), policyVersion=1),  # the old token, said so
        ],
        1,
    )

    rows, _, _ = export_rows(auditor_client, {"q": plan.pk})

    header, *lines = rows
    policy, version = header.index("policy"), header.index("policy_version")
    # Newest first, as the list shows them.
    assert [(line[policy], line[version]) for line in lines] == [
        ("default", "1"),
        ("default", "2"),
        ("default", "1"),
    ]


def test_a_reason_that_looks_like_a_formula_is_exported_as_text(auditor_client, agent, refreshed):
    plan, start = refreshed
    post_events(
        agent,
        plan.pk,
        [event(start, decision=Decision.NOT_IN_PLAN, step=None, reason="=HYPERLINK(1)")],
        1,
    )

    rows, _, _ = export_rows(auditor_client, {"q": plan.pk})

    assert rows[1][rows[0].index("reason")] == "'=HYPERLINK(1)"


def test_a_staff_user_who_may_not_view_decisions_gets_no_export(team, agent, refreshed):
    plan, start = refreshed
    post_events(agent, plan.pk, [event(start)], 1)
    nobody = logged_in(make_staff("nobody", group=None, teams=[team]))

    response = nobody.get(reverse(EXPORT), {"q": plan.pk})

    assert response.status_code == 403


def test_the_export_read_as_values_says_what_the_instances_say(auditor_client, agent, refreshed):
    """The decisions export reads tuples of its fields (export_from_values); the same
    columns read from model instances by ``column_value`` give the same file."""
    from kernel.admin_export import csv_lines
    from plans.admin_decisions import PlanEventAdmin
    from plans.approvals import plan_approval_columns
    from plans.models import PlanEvent

    plan, start = refreshed
    agent.agent.team.log_call_arguments = True
    agent.agent.team.save(update_fields=["log_call_arguments"])
    post_events(
        agent,
        plan.pk,
        [
            event(start + timedelta(minutes=40), argsDigest="a" * 64, args={"repo": "acme/x"}),
            event(start, decision=Decision.POLICY_DENIED, step=None, reason="-1 left"),
            event(start + timedelta(minutes=5), rule={"index": 0, "description": "=1+1"}),
        ],
        1,
    )
    # The approval's columns are annotations of the export's query (plan_approval_columns).
    instances = (
        PlanEvent.objects.select_related("plan__agent", "plan__member", "decided_under__policy")
        .annotate(**plan_approval_columns("plan__"))
        .order_by("-occurred_at", "-id")
    )

    rows, _, _ = export_rows(auditor_client, {"q": plan.pk})

    expected = list(
        csv.reader(io.StringIO("".join(csv_lines(PlanEventAdmin.export_columns, instances))))
    )
    assert rows == expected
    assert len(rows) == 4
