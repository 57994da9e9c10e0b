"""Issuance and refresh make a small, fixed number of queries, whatever the plan's size or
the member's groups (counts, not timings: `make bench` measures time)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from members.services import member_upsert
from tests.conftest import plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES

# The API key read with the address's failed authentications (one statement: kernel.bearer,
# members.services.api_key_read; two before); the API key's rate-limit counter incremented
# (kernel/ratelimit.py, with the counters in the database); one read of what signing needs
# (the member with their role and groups, the policy version, the active signing key:
# plans.selectors.signing_context_read, which replaced four queries); three inserts (the
# plan, its token, and its audit record: plans.records) and the savepoint pair of the
# transaction (pytest-django runs each test inside a transaction).
ISSUE_QUERIES = 8
# Refresh reads the plan with its member's e-mail and flag (plans.selectors.plan_for_signing),
# then one read of what signing needs with the key the token names (the member by id), and
# the plan's status under lock, instead of inserting the plan. (13 before: the plan's
# five-table read, the token's key, the group names, the policy version, the active key;
# 10 before the key and the failed authentications were read in one statement.)
REFRESH_QUERIES = 9


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
    FOR UPDATE in the refresh's transaction (plans.services, compiled once)."""
    issued = warmed.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()

    with CaptureQueriesContext(connection) as captured:
        response = warmed.client.post(
            f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
        )

    assert response.status_code == 200, response.content
    locked = [query["sql"] for query in captured if query["sql"].endswith("FOR UPDATE")]
    assert len(locked) == 1 and '"status"' in locked[0]
