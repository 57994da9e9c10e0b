"""The auditor's lists stay fast on tables of millions of rows: an id typed in a search box
is matched exactly (an index serves it), filters offer choices read from small tables, and
a long list is counted up to a bound, then estimated, on PostgreSQL. Asserted on the SQL
Django runs and on the pages, never on timings (`bench/bench_scale.py` measures those)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditRecord
from guard.decisions import Decision
from members.models import Agent
from plans.models import PlanEvent
from plans.services import plan_issue
from tests.conftest import plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES
from tests.plans.decision_rows import decisions_bulk_create


def decide(plan, count: int, decision: str = Decision.ALLOWED) -> None:
    now = timezone.now()
    decisions_bulk_create(
        PlanEvent(plan=plan, occurred_at=now, tool="github_get_issue", decision=decision, step=0)
        for _ in range(count)
    )


def captured_get(client, url: str, query: dict[str, str] | None = None):
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, query or {})
    assert response.status_code == 200
    return response.content.decode(), [entry["sql"] for entry in captured.captured_queries]


def queries_on(sqls: list[str], table: str) -> list[str]:
    return [sql for sql in sqls if f'FROM "{table}"' in sql]


def test_a_plan_id_searched_in_the_decisions_is_matched_exactly(auditor_client, issued, agent):
    other = plan_issue(agent=agent.agent, document=plan_document())
    decide(issued.plan, 2)
    decide(other.plan, 3)
    url = reverse("admin:plans_planevent_changelist")
    # Lower case, with spaces: ULIDs are upper case, the term is put in their form.
    html, sqls = captured_get(auditor_client, url, {"q": f" {issued.plan.pk.lower()} "})
    rows = queries_on(sqls, "plans_planevent")
    assert rows, sqls
    assert any(f'"plans_planevent"."plan_id" = \'{issued.plan.pk}\'' in sql for sql in rows)
    assert not any("UPPER(" in sql or " LIKE " in sql for sql in rows), rows
    assert html.count(f"…{issued.plan.pk[-8:]}") == 2
    assert other.plan.pk[-8:] not in html


def test_a_term_of_no_id_shape_finds_no_decision(auditor_client, issued):
    decide(issued.plan, 1)
    url = reverse("admin:plans_planevent_changelist")
    html, sqls = captured_get(auditor_client, url, {"q": issued.plan.pk[:20]})
    assert issued.plan.pk[-8:] not in html
    assert not any("UPPER(" in sql for sql in queries_on(sqls, "plans_planevent"))


def test_plan_ids_hashes_and_e_mails_are_matched_exactly_in_the_plans(
    auditor_client, issued, agent
):
    url = reverse("admin:plans_plan_changelist")
    for term, condition in (
        (issued.plan.pk.lower(), f'"plans_plan"."id" = \'{issued.plan.pk}\''),
        (issued.plan.hash.upper(), f'"plans_plan"."hash" = \'{issued.plan.hash}\''),
        ("ALICE@acme.dev", '"members_member"."email" = \'alice@acme.dev\''),
    ):
        html, sqls = captured_get(auditor_client, url, {"q": term})
        listed = queries_on(sqls, "plans_plan")
        assert any(condition in sql for sql in listed), (term, listed)
        assert not any("UPPER(" in sql or " LIKE " in sql for sql in listed), listed
        assert issued.plan.pk in html, term


def test_an_audit_record_search_by_plan_id_is_exact(superuser_client, issued):
    url = reverse("admin:audit_auditrecord_changelist")
    html, sqls = captured_get(superuser_client, url, {"q": issued.plan.pk.lower()})
    listed = queries_on(sqls, "audit_auditrecord")
    assert any(f'"audit_auditrecord"."plan_id" = \'{issued.plan.pk}\'' in sql for sql in listed)
    assert not any("UPPER(" in sql for sql in listed), listed
    assert issued.plan.pk in html


def test_list_filters_read_their_choices_from_small_tables(
    auditor_client, superuser_client, issued, team
):
    """No filter lists its choices by a DISTINCT over the listed rows: the agents come from
    the agents (one that never decided anything is offered too), codes are typed."""
    decide(issued.plan, 3, Decision.POLICY_DENIED)
    idle = Agent.objects.create(team=team, name="idle-agent", policy=issued.plan.agent.policy)
    for client, name in (
        (auditor_client, "admin:plans_planevent_changelist"),
        (auditor_client, "admin:plans_plan_changelist"),
        (superuser_client, "admin:audit_auditrecord_changelist"),
    ):
        html, sqls = captured_get(client, reverse(name))
        assert not any("DISTINCT" in sql for sql in sqls), (name, sqls)
        if name != "admin:audit_auditrecord_changelist":
            assert f"agent={idle.pk}" in html, name
    # The decisions' tool suggestions read only the newest rows.
    _, sqls = captured_get(auditor_client, reverse("admin:plans_planevent_changelist"))
    tools = [sql for sql in queries_on(sqls, "plans_planevent") if '"tool" AS' in sql]
    assert tools and all(re.search(r"LIMIT \d+", sql) for sql in tools), tools


def test_filters_and_searches_of_the_decisions_still_select_the_right_rows(
    auditor_client, issued, agent
):
    other = plan_issue(agent=agent.agent, document=plan_document())
    decide(issued.plan, 2, Decision.POLICY_DENIED)
    decide(other.plan, 1)
    url = reverse("admin:plans_planevent_changelist")
    version = issued.plan.policy_version_id
    for query, expected in (
        ({"decision": "blocked"}, 2),
        ({"agent": agent.agent.pk}, 3),
        ({"policy_version": str(version)}, 3),
        ({"policy_version": str(version + 1000)}, 0),
        ({"q": other.plan.pk}, 1),
    ):
        html, _ = captured_get(auditor_client, url, query)
        assert html.count('class="plangate-badge ') == expected, query
    assert AuditRecord.objects.filter(plan_id=issued.plan.pk).exists()


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
def test_a_list_longer_than_the_bound_shows_an_estimate_on_postgresql(
    auditor_client, issued, settings
):
    settings.PLANGATE_ADMIN_EXACT_COUNT_LIMIT = 5
    decide(issued.plan, 12)
    url = reverse("admin:plans_planevent_changelist")
    html, sqls = captured_get(auditor_client, url)
    counts = [sql for sql in sqls if "COUNT(*)" in sql and "plans_planevent" in sql]
    assert counts and all("LIMIT 6" in sql for sql in counts), counts
    assert any(sql.startswith("EXPLAIN") for sql in sqls)
    assert re.search(r"about \d+\s*</span> plan events", html), html[-2000:]
    # A list within the bound is counted exactly, and says so.
    html, sqls = captured_get(auditor_client, url, {"decision": "blocked"})
    assert "about" not in html.split('class="paginator"')[1]
    assert not any(sql.startswith("EXPLAIN") for sql in sqls)


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
def test_a_list_within_the_bound_is_counted_exactly_on_postgresql(auditor_client, issued):
    decide(issued.plan, 12)
    html, sqls = captured_get(auditor_client, reverse("admin:plans_planevent_changelist"))
    assert not any(sql.startswith("EXPLAIN") for sql in sqls)
    assert re.search(r"12\s+plan events", html)
