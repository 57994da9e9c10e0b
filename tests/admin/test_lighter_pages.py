"""The auditor's pages draw less per request: 50 rows a page, links built without a URL
resolution per row, no plan document read for a list row, the plan page's newest blocked
calls with a link to all of them (decision 0050). Asserted on the pages and the SQL, never
on timings (``bench/bench_scale.py`` measures those)."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_script_prefix
from django.urls import reverse
from django.utils import timezone

from guard.decisions import Decision
from kernel.admin_base import LONG_LIST_PER_PAGE, change_url
from plans.admin_display import BLOCKED_SHOWN
from plans.models import PlanEvent
from plans.services import plan_issue
from tests.conftest import plan_document
from tests.plans.decision_rows import decisions_bulk_create


def get(client, url: str, query: dict[str, str] | None = None) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, query or {})
    assert response.status_code == 200
    return response.content.decode(), [entry["sql"] for entry in captured.captured_queries]


@pytest.mark.parametrize(
    ("app_label", "model_name", "pk"),
    [
        ("plans", "plan", "01JDZQ7Q6Y4T3N9V2K8M5X1R0A"),
        ("policies", "policyversion", 42),
        ("plans", "planevent", 7),
        # What the admin's quote() escapes, and what reverse() percent-encodes after it.
        ("plans", "signingkey", "a/b_c:d?e#f %g"),
        ("plans", "signingkey", "clé été"),
    ],
)
def test_a_change_url_is_what_reverse_answers(app_label, model_name, pk):
    from django.contrib.admin.utils import quote

    expected = reverse(f"admin:{app_label}_{model_name}_change", args=[quote(pk)])
    assert change_url(app_label, model_name, pk) == expected
    with override_script_prefix("/console/"):
        prefixed = reverse(f"admin:{app_label}_{model_name}_change", args=[quote(pk)])
        assert prefixed.startswith("/console/")
        assert change_url(app_label, model_name, pk) == prefixed
    assert change_url(app_label, model_name, pk) == expected


def test_the_plans_list_shows_50_plans_a_page_each_linked_to_its_page(auditor_client, agent):
    plans = [
        plan_issue(agent=agent.agent, document=plan_document(goal=f"goal {index}")).plan
        for index in range(LONG_LIST_PER_PAGE + 1)
    ]
    url = reverse("admin:plans_plan_changelist")
    first, _ = get(auditor_client, url)
    second, _ = get(auditor_client, url, {"p": "2"})

    assert LONG_LIST_PER_PAGE == 50
    linked = lambda html: set(re.findall(r'href="/admin/plans/plan/([0-9A-Z]{26})/change/', html))  # noqa: E731
    assert len(linked(first)) == 50 and len(linked(second)) == 1
    assert linked(first) | linked(second) == {plan.pk for plan in plans}
    assert re.search(r"\b51\s+\w*\s*plans\b", first.split('class="paginator"')[1]), first[-3000:]
    # Each row links to its plan as the admin's reverse() does.
    assert f'href="{reverse("admin:plans_plan_change", args=[plans[-1].pk])}"' in first


def test_a_plans_list_row_reads_no_document_but_the_export_does(auditor_client, agent):
    issued = plan_issue(
        agent=agent.agent, document=plan_document(steps=[{"tool": "send_email"}])
    ).plan
    url = reverse("admin:plans_plan_changelist")
    html, sqls = get(auditor_client, url)

    rows = [sql for sql in sqls if '"plans_plan"."goal"' in sql]
    assert len(rows) == 1, sqls
    assert '"plans_plan"."document"' not in rows[0]
    assert '"policies_policyversion"."document"' not in rows[0]
    assert issued.pk in html
    version = issued.policy_version
    version_url = reverse("admin:policies_policyversion_change", args=[version.pk])
    assert f'<a href="{version_url}">{version.policy.slug} v{version.number}</a>' in html
    assert '<option value="send_email">' in html  # the suggestions still read the steps

    response = auditor_client.get(reverse("admin:plans_plan_export_csv"))
    exported = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row["tools"] for row in exported] == ['["send_email"]']


def test_the_audit_trail_shows_50_records_a_page_and_links_plans(superuser_client, agent):
    from audit.models import AuditRecord

    plans = [
        plan_issue(agent=agent.agent, document=plan_document()).plan
        for _ in range(LONG_LIST_PER_PAGE + 1)
    ]
    total = AuditRecord.objects.count()
    assert total > LONG_LIST_PER_PAGE
    html, _ = get(superuser_client, reverse("admin:audit_auditrecord_changelist"))

    rows = re.findall(r'<tr[^>]*>\s*<td class="action-checkbox">|<th class="field-when">', html)
    assert len(rows) == LONG_LIST_PER_PAGE
    newest = plans[-1]
    plan_url = reverse("admin:plans_plan_change", args=[newest.pk])
    assert f'<a href="{plan_url}"><code>{newest.pk}</code></a>' in html


def test_the_plan_page_lists_the_newest_blocked_calls_and_links_every_one(auditor_client, plan):
    now = timezone.now()
    decisions_bulk_create(
        PlanEvent(
            plan=plan,
            occurred_at=now,
            tool="github_delete_repo",
            decision=Decision.NOT_IN_PLAN,
            step=None,
        )
        for _ in range(BLOCKED_SHOWN + 10)
    )
    html, _ = get(auditor_client, reverse("admin:plans_plan_change", args=[plan.pk]))

    blocked = html.split('id="blocked"')[1].split('id="acp"')[0]
    shown = re.findall(r'href="(/admin/plans/planevent/\d+/change/)"', blocked)
    assert len(shown) == BLOCKED_SHOWN == 50
    newest = PlanEvent.objects.filter(plan=plan).order_by("-occurred_at", "-id")[:BLOCKED_SHOWN]
    assert shown == [reverse("admin:plans_planevent_change", args=[e.pk]) for e in newest]
    assert f"Blocked attempts ({BLOCKED_SHOWN + 10})" in html
    link = re.search(r'all 60 are in the <a href="([^"]+)" id="blocked-all">', blocked)
    assert link is not None
    listed, _ = get(auditor_client, link.group(1).replace("&amp;", "&"))
    assert re.search(r"\b60\s+plan events", listed), listed[-2000:]


def test_the_tokens_list_links_each_plan_and_shows_50_a_page(auditor_client, agent):
    plans = [
        plan_issue(agent=agent.agent, document=plan_document()).plan
        for _ in range(LONG_LIST_PER_PAGE + 1)
    ]
    url = reverse("admin:plans_plantoken_changelist")
    html, _ = get(auditor_client, url)

    plan_links = re.findall(r'<a href="/admin/plans/plan/([0-9A-Z]{26})/change/">\1</a>', html)
    assert len(plan_links) == LONG_LIST_PER_PAGE
    assert set(plan_links) < {plan.pk for plan in plans}
    second, _ = get(auditor_client, url, {"p": "2"})
    assert len(re.findall(r'<a href="/admin/plans/plan/([0-9A-Z]{26})/change/">', second)) == 1


def test_a_filtered_lists_row_links_carry_its_filters_back(auditor_client, agent):
    from urllib.parse import urlencode

    issued = plan_issue(agent=agent.agent, document=plan_document()).plan
    filters = {"status__exact": "active", "agent": str(agent.agent.pk)}
    html, _ = get(auditor_client, reverse("admin:plans_plan_changelist"), filters)

    # What Django's add_preserved_filters writes: back to the list with these filters.
    carried = urlencode({"_changelist_filters": urlencode(filters)})
    change = reverse("admin:plans_plan_change", args=[issued.pk])
    assert f'href="{change}?{carried}"' in html
    unfiltered, _ = get(auditor_client, reverse("admin:plans_plan_changelist"))
    assert f'href="{change}"' in unfiltered
