"""kernel.sql's rate-limit counter statements answer what the ORM reads of the counter, on
SQLite and PostgreSQL (decision 0061)."""

from __future__ import annotations

from kernel.models import RateLimitWindow
from kernel.sql import counter_hit, counter_hits


def orm_hits(bucket: str) -> int:
    return RateLimitWindow.objects.filter(bucket=bucket).values_list("hits", flat=True).first() or 0


def test_a_counter_counts_and_reads_as_the_orm(db):
    assert counter_hits("test:a:60:1") == orm_hits("test:a:60:1") == 0

    counts = [counter_hit("test:a:60:1", 60) for _ in range(3)]
    counter_hit("test:b:60:1", 60)

    assert counts == [1, 2, 3]
    assert counter_hits("test:a:60:1") == orm_hits("test:a:60:1") == 3
    assert counter_hits("test:b:60:1") == orm_hits("test:b:60:1") == 1
    assert RateLimitWindow.objects.get(bucket="test:a:60:1").window_end == 60
