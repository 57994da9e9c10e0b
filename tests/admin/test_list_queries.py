"""Big tables stay fast: a list page costs the same number of queries for 1 row as for 20."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from guard.decisions import Decision
from members.services import api_key_create, member_upsert
from plans.models import PlanDisplayUpdate, PlanEvent
from plans.services import plan_issue
from policies.services import policy_set
from tests.conftest import POLICY, make_agent, plan_document
from tests.plans.decision_rows import decision_create


def queries_for(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def grow(team, agent, index: int) -> None:
    email = f"person{index}@acme.dev"
    member_upsert(team=team, email=email, role=f"role{index % 3}", groups=["a", f"g{index}"])
    issued = plan_issue(agent=agent.agent, document=plan_document(user=email))
    decision_create(
        plan=issued.plan,
        occurred_at=issued.issued_at,
        tool="github_get_issue",
        decision=Decision.ALLOWED,
        step=1,
    )
    PlanDisplayUpdate.objects.create(
        plan=issued.plan, message={"update": {"sessionUpdate": "plan"}}
    )
    extra = make_agent(
        team, f"agent{index}", policy_set(team=team, slug=f"p{index}", document=POLICY)
    )
    api_key_create(agent=extra.agent)


LISTS = [
    "admin:members_member_changelist",
    "admin:members_agent_changelist",
    "admin:members_apikey_changelist",
    "admin:teams_role_changelist",
    "admin:teams_group_changelist",
    "admin:policies_policy_changelist",
    "admin:policies_policyversion_changelist",
    "admin:plans_plan_changelist",
    "admin:plans_plantoken_changelist",
    "admin:plans_planevent_changelist",
]


def test_list_pages_do_not_query_per_row(team_admin_client, team, agent):
    grow(team, agent, 0)
    few = {name: queries_for(team_admin_client, reverse(name)) for name in LISTS}
    for index in range(1, 20):
        grow(team, agent, index)
    many = {name: queries_for(team_admin_client, reverse(name)) for name in LISTS}
    assert many == few


def auditor_pages(plan) -> dict[str, str]:
    """The auditor's pages that read the biggest tables, as bench/bench_scale.py times them."""
    decisions = reverse("admin:plans_planevent_changelist")
    plans = reverse("admin:plans_plan_changelist")
    return {
        "plans": plans,
        "plans searched by id": f"{plans}?q={plan.pk}",
        "plans by agent": f"{plans}?agent={plan.agent_id}",
        "plan page": reverse("admin:plans_plan_change", args=[plan.pk]),
        "timeline": reverse("admin:plans_plan_timeline", args=[plan.pk]),
        "decisions": decisions,
        "decisions searched by plan id": f"{decisions}?q={plan.pk}",
        "decisions by policy version": f"{decisions}?policy_version={plan.policy_version_id}",
        "audit trail": reverse("admin:audit_auditrecord_changelist"),
    }


# Per page, the same whatever the number of rows: the session, the user, their permissions
# and teams, then the page's own reads. The decisions list: the filters' choices (agents,
# policy versions, recent tools), the bounded count, and the page, which joins the policy
# version each decision was made under (stored on it: 11 when a query per page resolved it).
# A plan's page and timeline read the plan with its member, agent, team and policy version
# in one query (19 and 18 when each was read apart); the timeline reads a source shorter than
# the page in one query, not three (count, first rows, last rows). The plan page adds one
# aggregate over its batches: how many decisions the plan's own token delivered (0054), and
# one read of the plans delegated from it (0070).
AUDITOR_PAGE_QUERIES = {
    "plans": 9,
    "plans searched by id": 9,
    "plans by agent": 9,
    "plan page": 16,
    "timeline": 10,
    "decisions": 10,
    "decisions searched by plan id": 10,
    "decisions by policy version": 10,
    "audit trail": 7,
}


def test_the_auditors_pages_make_a_fixed_number_of_queries(auditor_client, team, agent):
    grow(team, agent, 0)
    plan = PlanEvent.objects.get().plan
    for index in range(1, 6):
        grow(team, agent, index)
        decision_create(
            plan=plan, occurred_at=plan.created_at, tool="github_get_issue", decision="allowed"
        )
    pages = auditor_pages(plan)
    for url in pages.values():
        # Once first: what a process caches (content types, keys) is then read no more.
        auditor_client.get(url)
    counted = {name: queries_for(auditor_client, url) for name, url in pages.items()}
    assert counted == AUDITOR_PAGE_QUERIES
