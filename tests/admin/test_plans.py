"""The plan page reads well for a person (steps, planned against actual, the ACP plan the
agent showed, tokens), and revoking a plan makes its next refresh answer 410."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.urls import reverse
from django.utils import timezone

from guard.decisions import Decision
from kernel.problems import Code
from plans.admin_display import acp_message_html
from plans.models import Plan, PlanDisplayUpdate, PlanEvent
from tests.conftest import plan_document
from tests.plans.decision_rows import decisions_bulk_create
from tests.plans.helpers import assert_problem


def plan_page(client, plan) -> str:
    response = client.get(reverse("admin:plans_plan_change", args=[plan.pk]))
    assert response.status_code == 200
    return response.content.decode()


def record_events(plan, *events) -> None:
    now = timezone.now()
    decisions_bulk_create(
        PlanEvent(plan=plan, occurred_at=now + timedelta(seconds=index), **event)
        for index, event in enumerate(events)
    )


def test_the_plan_page_shows_steps_hash_policy_version_and_tokens(auditor_client, agent, plan):
    html = plan_page(auditor_client, plan)
    assert "Summarise open issues" in html
    assert plan.hash in html
    assert "alice@acme.dev" in html
    version_url = reverse("admin:policies_policyversion_change", args=[plan.policy_version_id])
    assert f'href="{version_url}"' in html
    assert "<code>github_list_issues</code>" in html
    assert "<code>repo</code> = <code>&quot;acme/public-app&quot;</code>" in html
    assert "0 / 3" in html and "0 / 20" in html  # maxCalls, default filled in
    token = plan.tokens.get()
    assert token.kid[:12] in html
    assert "engineer" in html and "platform" in html


def test_planned_against_actual_counts_allowed_calls_and_lists_blocked_ones(auditor_client, agent):
    document = plan_document(
        steps=[
            {"tool": "github_list_issues", "maxCalls": 3, "required": True},
            {"tool": "github_get_issue", "required": True},
        ]
    )
    from plans.services import plan_issue

    plan = plan_issue(agent=agent.agent, document=document).plan
    record_events(
        plan,
        {"tool": "github_list_issues", "decision": Decision.ALLOWED, "step": 0},
        {"tool": "github_list_issues", "decision": Decision.ALLOWED, "step": 0},
        {
            "tool": "github_delete_repo",
            "decision": Decision.NOT_IN_PLAN,
            "reason": "<b>no step</b>",
        },
        {"tool": "github_list_issues", "decision": Decision.MAX_CALLS_EXCEEDED, "step": 0},
    )

    html = plan_page(auditor_client, plan)

    assert "2 / 3" in html
    assert "0 / 20" in html
    assert "required · ran" in html
    assert "required · not run" in html
    assert "Blocked attempts (2)" in html
    assert "github_delete_repo" in html and Decision.MAX_CALLS_EXCEEDED in html
    assert "&lt;b&gt;no step&lt;/b&gt;" in html and "<b>no step</b>" not in html


def test_revoking_a_plan_makes_its_refresh_answer_410(team_admin_client, team_admin, agent, issued):
    plan = issued.plan
    confirm = team_admin_client.get(reverse("admin:plans_plan_revoke_plans", args=[plan.pk]))
    assert confirm.status_code == 200
    assert "Yes, revoke" in confirm.content.decode()

    response = team_admin_client.post(
        reverse("admin:plans_plan_changelist"),
        {
            "action": "revoke_plans",
            "_selected_action": [plan.pk],
            "post": "yes",
            "next": reverse("admin:plans_plan_change", args=[plan.pk]),
        },
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("admin:plans_plan_change", args=[plan.pk])
    plan.refresh_from_db()
    assert plan.status == Plan.Status.REVOKED
    refresh = agent.client.post(
        f"/v1/plans/{plan.pk}/refresh", {"token": issued.token}, format="json"
    )
    assert_problem(refresh, 410, Code.PLAN_REVOKED)
    entry = LogEntry.objects.get(user=team_admin, object_id=plan.pk)
    assert entry.action_flag == CHANGE
    assert Code.PLAN_REVOKED in entry.get_change_message()
    assert "Revoke plan" not in plan_page(team_admin_client, plan)


def test_the_plan_list_filters_and_searches(auditor_client, plan, agent):
    url = reverse("admin:plans_plan_changelist")
    for query in (
        {"q": plan.pk},
        {"q": plan.hash},
        {"q": plan.pk.lower()},
        {"q": " ALICE@acme.dev "},
        {"q": "Summarise"},
        {"member_email": "ALICE@acme.dev"},
        {"status__exact": "active"},
        {"agent": agent.agent.pk},
        {"created_at__gte": (timezone.now() - timedelta(days=1)).isoformat()},
    ):
        html = auditor_client.get(url, query).content.decode()
        assert plan.pk in html, query
    for query in (
        {"q": "nothing-like-this"},
        # An e-mail is matched whole, through its index, not as a substring.
        {"q": "alice@acme"},
        {"member_email": "bob@acme.dev"},
        {"status__exact": "revoked"},
    ):
        html = auditor_client.get(url, query).content.decode()
        assert plan.pk not in html, query


# --- the ACP plan the agent showed ---------------------------------------------------------

ENTRIES = [
    {"content": "List open issues in acme/public-app", "priority": "high", "status": "completed"},
    {"content": "Read <script>alert(1)</script>", "priority": "medium", "status": "in_progress"},
    {"content": "Custom one", "priority": "_urgent", "status": "_paused"},
]

ACP_MESSAGES = {
    "items in a JSON-RPC envelope": {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s1",
            "update": {
                "sessionUpdate": "plan_update",
                "plan": {"type": "items", "planId": "01PLAN", "entries": ENTRIES},
            },
        },
    },
    "items as params": {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "01PLAN", "entries": ENTRIES},
        },
    },
    "markdown": {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "markdown",
                "planId": "01PLAN",
                "content": "# Plan\n<img src=x onerror=alert(1)>\n- [x] list issues",
            },
        },
    },
    "file": {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "plan_update",
            "plan": {"type": "file", "planId": "01PLAN", "uri": "file:///tmp/plan.md"},
        },
    },
    "v1 plan": {"sessionId": "s1", "update": {"sessionUpdate": "plan", "entries": ENTRIES[:2]}},
    "plan_removed": {
        "sessionId": "s1",
        "update": {"sessionUpdate": "plan_removed", "planId": "01PLAN"},
    },
    "unknown plan type": {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "plan_update",
            "plan": {"type": "_gantt", "planId": "p", "x": 1},
        },
    },
    "unknown update": {"sessionId": "s1", "update": {"sessionUpdate": "usage_update", "used": 5}},
}

MALFORMED = {
    "entries not a list": {"update": {"sessionUpdate": "plan", "entries": "<b>x</b>"}},
    "entry not an object": {"update": {"sessionUpdate": "plan", "entries": [1, None, "<i>"]}},
    "entry without content": {"update": {"sessionUpdate": "plan", "entries": [{"status": 3}]}},
    "plan not an object": {"update": {"sessionUpdate": "plan_update", "plan": ["items"]}},
    "markdown not a string": {
        "update": {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "content": 7}}
    },
    "items without entries": {
        "update": {"sessionUpdate": "plan_update", "plan": {"type": "items"}}
    },
    "update not an object": {"sessionId": "s1", "update": "plan"},
    "no sessionUpdate": {"hello": "<script>"},
    "a list": ["<script>alert(1)</script>"],
    "a string": "<script>alert(1)</script>",
    "null": None,
    "status is an object": {
        "update": {"sessionUpdate": "plan", "entries": [{"content": "c", "status": {"a": 1}}]}
    },
}


@pytest.mark.parametrize("variant", list(ACP_MESSAGES))
def test_every_acp_variant_renders_on_the_plan_page(auditor_client, plan, variant):
    PlanDisplayUpdate.objects.create(plan=plan, message=ACP_MESSAGES[variant])
    html = plan_page(auditor_client, plan)
    assert "What the agent showed its user" in html
    assert "<script>alert(1)</script>" not in html
    assert "<img src=x" not in html


def test_items_render_as_a_table_with_priorities_and_statuses():
    html = acp_message_html(ACP_MESSAGES["items in a JSON-RPC envelope"])
    assert "List open issues in acme/public-app" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert ">completed<" in html and ">in progress<" in html and ">_paused<" in html
    assert "01PLAN" in html


def test_markdown_is_shown_as_escaped_preformatted_text():
    html = acp_message_html(ACP_MESSAGES["markdown"])
    assert '<pre class="plangate-pre"># Plan\n&lt;img src=x onerror=alert(1)&gt;' in html


def test_file_v1_removed_and_unknown_variants_read_as_such():
    assert "file:///tmp/plan.md" in acp_message_html(ACP_MESSAGES["file"])
    assert "Read &lt;script&gt;" in acp_message_html(ACP_MESSAGES["v1 plan"])
    assert "removed the plan" in acp_message_html(ACP_MESSAGES["plan_removed"])
    unknown = acp_message_html(ACP_MESSAGES["unknown plan type"])
    assert "_gantt" in unknown and "shown as sent" in unknown
    assert "usage_update" in acp_message_html(ACP_MESSAGES["unknown update"])


@pytest.mark.parametrize("variant", list(MALFORMED))
def test_malformed_acp_messages_never_break_the_page(auditor_client, plan, variant):
    html = acp_message_html(MALFORMED[variant])
    assert "<script>" not in html and "<b>x</b>" not in html and "<i>" not in html
    if MALFORMED[variant] is None:
        return  # a JSON null cannot be stored: the column is NOT NULL
    PlanDisplayUpdate.objects.create(plan=plan, message=MALFORMED[variant])
    assert "What the agent showed its user" in plan_page(auditor_client, plan)


def test_the_latest_acp_update_is_the_one_shown(auditor_client, plan):
    PlanDisplayUpdate.objects.create(plan=plan, message=ACP_MESSAGES["v1 plan"])
    PlanDisplayUpdate.objects.create(plan=plan, message=ACP_MESSAGES["plan_removed"])
    html = plan_page(auditor_client, plan)
    assert "removed the plan" in html
    assert "The latest of 2 ACP plan updates" in html


def test_after_a_plan_removed_the_last_plan_the_user_saw_is_shown(auditor_client, plan):
    PlanDisplayUpdate.objects.create(plan=plan, message=ACP_MESSAGES["file"])
    PlanDisplayUpdate.objects.create(plan=plan, message=ACP_MESSAGES["items as params"])
    PlanDisplayUpdate.objects.create(plan=plan, message=ACP_MESSAGES["plan_removed"])

    html = plan_page(auditor_client, plan)

    assert "removed the plan" in html
    assert "What the user saw last" in html
    assert "List open issues in acme/public-app" in html
    assert "file:///tmp/plan.md" not in html
