"""The admin's page of a version-2 plan: each step's id and the steps it comes after, each
budget's use (summed from the amounts the guard reported) against its max, and the codes
that blocked each step's calls."""

from __future__ import annotations

import hashlib
import re

import pytest
from django.test import Client
from django.urls import reverse

from guard.decisions import Decision
from plans.models import Plan, PlanEvent
from plans.services import plan_issue
from policies.services import policy_set
from tests.admin.conftest import AUDITORS, ensure_admin_groups, logged_in, make_staff
from tests.conftest import AgentPersona, make_agent

AT = "2026-11-30T09:00:00.250Z"
DIGEST = hashlib.sha256(b"{}").hexdigest()
POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [{"effect": "allow", "tools": ["orders_read", "refund", "notify"]}],
}
PLAN = {
    "version": 2,
    "goal": "Refund order A-1 after reading it",
    "user": "alice@acme.dev",
    "steps": [
        {"id": "read", "tool": "orders_read", "args": {"order": {"eq": "A-1"}}},
        {
            "id": "refund",
            "tool": "refund",
            "args": {"order": {"eq": "A-1"}},
            "after": ["read"],
            "maxCalls": 5,
            "additionalArgs": False,
        },
        {"tool": "notify", "maxCalls": 1},
    ],
    "budgets": [{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 500}],
}


@pytest.fixture
def auditor_client(team) -> Client:
    ensure_admin_groups()
    return logged_in(make_staff("audrey", group=AUDITORS, teams=[team]))


@pytest.fixture
def refunder(team, member) -> AgentPersona:
    return make_agent(team, "refunder", policy_set(team=team, slug="refunds", document=POLICY))


@pytest.fixture
def plan(refunder) -> Plan:
    return plan_issue(agent=refunder.agent, document=PLAN).plan


def event(decision: Decision, step: int | None, tool: str = "refund", **extra) -> dict:
    return {
        "at": AT,
        "tool": tool,
        "decision": decision,
        **({"step": step} if step is not None else {}),
        "argsDigest": DIGEST,
        **extra,
    }


def post_events(persona: AgentPersona, plan: Plan, *events: dict):
    return persona.client.post(
        f"/v1/plans/{plan.pk}/events", {"events": list(events)}, format="json"
    )


def plan_page(client: Client, plan: Plan) -> str:
    response = client.get(reverse("admin:plans_plan_change", args=[plan.pk]))
    assert response.status_code == 200
    return response.content.decode()


def row(html: str, row_id: str) -> str:
    match = re.search(rf'<tr id="{row_id}">(.*?)</tr>', html, re.S)
    assert match, row_id
    return match.group(1)


def test_the_amounts_an_allowed_call_counted_are_stored(refunder, plan):
    response = post_events(
        refunder,
        plan,
        event(Decision.ALLOWED, 0, tool="orders_read"),
        event(Decision.ALLOWED, 1, amounts={"refunds": 120}),
    )

    assert response.status_code == 202, response.content
    assert list(PlanEvent.objects.filter(plan=plan).values_list("amounts", flat=True)) == [
        None,
        {"refunds": 120},
    ]


@pytest.mark.parametrize(
    "amounts",
    [{"other": 1}, {"refunds": -1}, {"refunds": True}, {"refunds": "12"}],
    ids=["unknown budget", "negative", "boolean", "text"],
)
def test_amounts_the_plan_cannot_have_counted_are_refused_and_nothing_is_stored(
    refunder, plan, amounts
):
    response = post_events(refunder, plan, event(Decision.ALLOWED, 1, amounts=amounts))

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_events"
    assert not PlanEvent.objects.filter(plan=plan).exists()


def test_a_blocked_call_carries_no_amounts(refunder, plan):
    response = post_events(
        refunder, plan, event(Decision.BUDGET_EXCEEDED, 1, amounts={"refunds": 600})
    )

    assert response.status_code == 400
    assert not PlanEvent.objects.filter(plan=plan).exists()


def test_the_page_shows_order_budget_use_and_blocked_codes_per_step(auditor_client, refunder, plan):
    response = post_events(
        refunder,
        plan,
        event(Decision.OUT_OF_ORDER, 1, reason="waits for step read"),
        event(Decision.ALLOWED, 0, tool="orders_read"),
        event(Decision.ALLOWED, 1, amounts={"refunds": 120}),
        event(Decision.ALLOWED, 1, amounts={"refunds": 80.5}),
        event(Decision.BUDGET_EXCEEDED, 1, reason="refunds: 200.5 + 400 > 500"),
        event(Decision.UNEXPECTED_ARGUMENT, 1, reason="note"),
        event(Decision.OUT_OF_ORDER, 1),
    )
    assert response.status_code == 202, response.content

    html = plan_page(auditor_client, plan)

    read, refund, notify = row(html, "step-1"), row(html, "step-2"), row(html, "step-3")
    assert "<code>read</code>" in read and "1 / 20" in read
    assert "<code>refund</code>" in refund and "2 / 5" in refund
    # `after`: the step ids the step waits for; none for the others.
    assert refund.count("<code>read</code>") == 1
    assert '<td class="plangate-step-after">—</td>' in read
    assert '<td class="plangate-step-id">—</td>' in notify
    assert "no other arguments" in refund and "no other arguments" not in read
    blocked = re.search(r'<td class="plangate-step-blocked">(.*?)</td>', refund, re.S)
    assert blocked is not None
    assert re.sub(r"<[^>]+>|\s", "", blocked.group(1)) == (
        "budget_exceeded\u00d71out_of_order\u00d72unexpected_argument\u00d71"
    )
    assert '<td class="plangate-step-blocked">—</td>' in read
    budget = row(html, "budget-refunds")
    assert "<code>amount</code>" in budget and "<code>refund</code>" in budget
    assert '<span class="plangate-budget-use">200.5 / 500</span>' in budget
    assert "over budget" not in budget
    assert "Blocked attempts (4)" in html


def test_budget_use_is_summed_exactly(auditor_client, refunder, plan):
    # 0.1 + 0.2 is 0.30000000000000004 in floats; the page adds what the JSON said.
    post_events(
        refunder,
        plan,
        event(Decision.ALLOWED, 1, amounts={"refunds": 0.1}),
        event(Decision.ALLOWED, 1, amounts={"refunds": 0.2}),
    )

    budget = row(plan_page(auditor_client, plan), "budget-refunds")

    assert '<span class="plangate-budget-use">0.3 / 500</span>' in budget


def test_a_version_1_plan_shows_no_order_and_no_budgets(auditor_client, agent):
    from tests.conftest import plan_document

    plan = plan_issue(agent=agent.agent, document=plan_document()).plan

    html = plan_page(auditor_client, plan)

    assert 'id="budgets"' not in html
    assert "plangate-step-id" not in html and "plangate-step-after" not in html
    assert '<td class="plangate-step-blocked">—</td>' in row(html, "step-1")


def test_a_decisions_page_shows_what_it_counted_against_budgets(auditor_client, refunder, plan):
    post_events(
        refunder,
        plan,
        event(Decision.ALLOWED, 1, amounts={"refunds": 120}),
        event(Decision.OUT_OF_ORDER, 1),
    )
    counted, blocked = PlanEvent.objects.filter(plan=plan).order_by("decision")

    def page(decision: PlanEvent) -> str:
        url = reverse("admin:plans_planevent_change", args=[decision.pk])
        response = auditor_client.get(url)
        assert response.status_code == 200
        return response.content.decode()

    assert "<code>refunds</code>: 120" in page(counted)
    assert "<code>refunds</code>" not in page(blocked)
    assert "no budget of the plan covers" in page(blocked)
