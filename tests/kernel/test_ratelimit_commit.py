"""A rate-limit hit on PostgreSQL commits without waiting for the WAL flush
(synchronous_commit off for its own one-statement transaction only): the count is exact as
before, and the setting reaches neither the session nor a caller's transaction."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from kernel.models import RateLimitWindow
from kernel.ratelimit import Rate, rate_limit_hit
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    # Outside any test transaction: the hit must be its own transaction, as in a request.
    pytest.mark.django_db(transaction=True),
]

RATE = Rate(limit=3, period=60)
NOW = 1_200.0


def _synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_hits_count_exactly_and_the_session_keeps_synchronous_commit():
    before = _synchronous_commit()

    results = [rate_limit_hit(scope="s", ident="key", rate=RATE, now=NOW) for _ in range(5)]

    assert [result.hits for result in results] == [1, 2, 3, 4, 5]
    assert [result.allowed for result in results] == [True, True, True, False, False]
    assert RateLimitWindow.objects.get().hits == 5  # committed, visible to a new read
    assert _synchronous_commit() == before


def test_a_hit_inside_a_transaction_leaves_its_commit_alone():
    before = _synchronous_commit()
    with transaction.atomic():
        result = rate_limit_hit(scope="s", ident="key", rate=RATE, now=NOW)
        inside = _synchronous_commit()

    assert result.hits == 1
    assert inside == before
    assert RateLimitWindow.objects.get().hits == 1
