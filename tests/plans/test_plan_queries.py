"""Issuance and refresh make a small, fixed number of queries, whatever the plan's size or
the member's groups (counts, not timings: `make bench` measures time)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from kernel.sql import row_read, statement
from members.services import member_upsert
from plans.models import Plan
from plans.services import _plan_status_locked, plan_revoke
from tests.conftest import plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES

# The failed-authentication budget of the client's address peeked (kernel/ratelimit.py, with
# the counters in the database); the API key read with its agent, team and policy
# (members.services.api_key_authenticate); the API key's rate-limit counter incremented; one
# read of what signing needs (the member with their role and groups, the policy version,
# the active signing key: plans.selectors.signing_context_read, which replaced four
# queries); three inserts (the plan, its token, and its audit record: plans.records) and the
# savepoint pair of the transaction (pytest-django runs each test inside a transaction);
# and the plan's index in its team's status list, taken by one UPDATE ... RETURNING
# (plans.status_list.status_idx_allocate, decision 0068).
# (8 while the key and the budget were read in one statement; decision 0061 split them.)
ISSUE_QUERIES = 10
# Refresh reads the plan with its member's e-mail and flag (plans.selectors.plan_for_signing),
# then one read of what signing needs with the key the token names (the member by id), and
# the plan's status under lock, instead of inserting the plan. (13 before: the plan's
# five-table read, the token's key, the group names, the policy version, the active key;
# 9 while the key and the failed authentications were read in one statement.) Plus the
# plan's DPoP binding (plans.dpop.dpop_require_for_plan_id: one primary-key read of its jkt).
REFRESH_QUERIES = 11


def many_steps(count: int) -> list[dict]:
    return [
        {"tool": f"github_tool_{index}", "args": {"repo": {"eq": "acme/app"}}}
        for index in range(count)
    ]


@pytest.fixture
def warmed(agent):
    """One plan issued first: signing keys exist and the key's last use is recorded, so the
    counted requests do neither."""
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201
    cache.clear()
    return agent


@pytest.mark.parametrize("steps", [1, 2, 50])
def test_issuance_queries_do_not_grow_with_the_plan(warmed, team, django_assert_num_queries, steps):
    member_upsert(team=team, email="alice@acme.dev", groups=[f"g{n}" for n in range(8)])
    plan = plan_document(steps=many_steps(steps))

    with django_assert_num_queries(ISSUE_QUERIES):
        response = warmed.client.post("/v1/plans", {"plan": plan}, format="json")

    assert response.status_code == 201, response.content


def test_refresh_queries(warmed, django_assert_num_queries):
    issued = warmed.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()

    with django_assert_num_queries(REFRESH_QUERIES):
        response = warmed.client.post(
            f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
        )

    assert response.status_code == 200, response.content


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
def test_refresh_reads_the_plans_status_under_a_row_lock(warmed):
    """A revocation that lands while a refresh signs must win: the status is re-read
    FOR UPDATE in the refresh's transaction (plans.services)."""
    issued = warmed.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()

    with CaptureQueriesContext(connection) as captured:
        response = warmed.client.post(
            f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
        )

    assert response.status_code == 200, response.content
    locked = [query["sql"] for query in captured if query["sql"].endswith("FOR UPDATE")]
    assert len(locked) == 1 and '"status"' in locked[0]


def test_the_status_read_under_lock_answers_as_the_orm(warmed):
    """The refresh's hand-built status read (plans.services._plan_status_locked, decision
    0061) answers what the ORM's select_for_update read answers, for an active, a revoked
    and a missing plan, on SQLite and PostgreSQL."""
    issued = warmed.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    sql = statement("plans.plan_status_locked", _plan_status_locked)

    def both(plan_id: str):
        with transaction.atomic():
            orm = list(Plan.objects.select_for_update().filter(pk=plan_id).values_list("status"))
            hand_built = row_read(sql, [plan_id])
        assert hand_built == (orm[0] if orm else None)
        return hand_built

    assert both(issued["id"]) == ("active",)
    plan_revoke(plan=Plan.objects.get(pk=issued["id"]), by="test")
    assert both(issued["id"]) == ("revoked",)
    assert both("0" * 26) is None
