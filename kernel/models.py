"""The kernel's one table: rate-limit counters that every process shares
(kernel/ratelimit.py)."""

from __future__ import annotations

from django.db import models


class RateLimitWindow(models.Model):
    """Hits of one client against one limit in one fixed window.

    ``bucket`` names all three (``api_key:<lookup id>:<window number>``), so the counter is a
    single row found by its primary key and incremented by one upsert. ``window_end`` (Unix
    seconds) tells the sweep which rows are over.
    """

    bucket = models.CharField(primary_key=True, max_length=200)
    window_end = models.BigIntegerField(db_index=True)
    hits = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.bucket}: {self.hits}"
