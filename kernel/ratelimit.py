"""Fixed-window rate limits that hold across every process of a deployment.

Each (scope, client, window) has one counter, incremented atomically and read back in the
same step, so N concurrent requests from any number of worker processes see N distinct
counts and exactly ``limit`` of them are allowed. (Reading a history from a cache and
writing it back, as DRF's SimpleRateThrottle does, loses counts between processes, and the
default local-memory cache is not even shared.)

The counters live in the database, one upsert per hit (kernel.sql.counter_hit; a peek is
kernel.sql.counter_hits), which works the same on SQLite and PostgreSQL and needs no other
service; when the default cache is Redis (``CACHE_URL=
redis://...``) they live there instead (``SET NX`` then ``INCR``), taking the writes off the
database. Windows are aligned to multiples of the period since the Unix epoch, so
``Retry-After`` is the time to the window's end. Finished database windows are deleted by
the periodic sweep (:func:`rate_limit_windows_purge`); Redis keys expire by themselves.

Kernel module: imports no Plangate app.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from dataclasses import dataclass
from functools import lru_cache

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.core.exceptions import ImproperlyConfigured

from .models import RateLimitWindow
from .sql import counter_hit, counter_hits

_PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
_PERIODS |= {"h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_RATE = re.compile(r"\s*(\d+)\s*/\s*([a-z]+)\s*")
# Client identities that go into a bucket name verbatim; anything else is hashed, so a
# bucket stays short and holds only text every database and cache accepts.
_PLAIN_IDENT = re.compile(r"[0-9A-Za-z.:_\-\[\]%]{1,100}")
# Redis keys outlive their window by this much, for servers whose clocks differ a little.
_REDIS_GRACE_SECONDS = 60


@dataclass(frozen=True)
class Rate:
    limit: int
    period: int  # seconds


@dataclass(frozen=True)
class RateLimitResult:
    allowed: bool
    hits: int  # the client's count in this window, this hit included (for a hit)
    limit: int
    retry_after: int  # whole seconds until the window ends, at least 1


@lru_cache(maxsize=32)
def rate_parse(text: str) -> Rate:
    """``"600/min"`` -> Rate(600, 60). Periods: s/sec, m/min, h/hour, d/day."""
    match = _RATE.fullmatch(text.lower())
    if match is None or match.group(2) not in _PERIODS or int(match.group(1)) < 1:
        raise ImproperlyConfigured(
            f"rate {text!r} is not valid: use N/sec, N/min, N/hour or N/day with N >= 1"
        )
    return Rate(limit=int(match.group(1)), period=_PERIODS[match.group(2)])


def _window(rate: Rate, now: float | None) -> tuple[int, int, int]:
    """(window number, its end in Unix seconds, whole seconds left) for ``now``."""
    now = time.time() if now is None else now
    number = math.floor(now / rate.period)
    end = (number + 1) * rate.period
    return number, end, max(1, math.ceil(end - now))


def _bucket(scope: str, ident: str, rate: Rate, number: int) -> str:
    if not _PLAIN_IDENT.fullmatch(ident):
        ident = "sha256-" + hashlib.sha256(ident.encode("utf-8", "surrogatepass")).hexdigest()
    # The period is part of the name: changing the limit's period starts fresh counters.
    return f"{scope}:{ident}:{rate.period}:{number}"


def _uses_redis() -> bool:
    return isinstance(caches["default"], RedisCache)


def _redis_hit(bucket: str, seconds_left: int) -> int:
    cache = caches["default"]
    timeout = seconds_left + _REDIS_GRACE_SECONDS
    # add is SET NX and incr is INCR: both atomic. Django's incr raises ValueError when the
    # key is gone (expired between the two calls), then the next add creates it afresh.
    for _ in range(3):
        if cache.add(bucket, 1, timeout=timeout):
            return 1
        try:
            return int(cache.incr(bucket))
        except ValueError:
            continue
    raise RuntimeError(f"rate-limit counter {bucket} kept vanishing")


def _redis_peek(bucket: str) -> int:
    return int(caches["default"].get(bucket, 0))


def rate_limit_hit(
    *, scope: str, ident: str, rate: Rate, now: float | None = None
) -> RateLimitResult:
    """Count one hit of ``ident`` against ``rate``; allowed while the count is <= the limit.

    Refused hits count too (the counter only grows within a window), which keeps this one
    atomic step.
    """
    number, end, seconds_left = _window(rate, now)
    bucket = _bucket(scope, ident, rate, number)
    hits = _redis_hit(bucket, seconds_left) if _uses_redis() else counter_hit(bucket, end)
    return RateLimitResult(hits <= rate.limit, hits, rate.limit, seconds_left)


def rate_limit_peek(
    *, scope: str, ident: str, rate: Rate, now: float | None = None
) -> RateLimitResult:
    """The count so far, without counting; ``allowed`` says whether one more hit would be."""
    number, _, seconds_left = _window(rate, now)
    bucket = _bucket(scope, ident, rate, number)
    hits = _redis_peek(bucket) if _uses_redis() else counter_hits(bucket)
    return RateLimitResult(hits < rate.limit, hits, rate.limit, seconds_left)


def rate_limit_windows_purge(*, now: float | None = None) -> int:
    """Delete the database counters of windows that are over; returns how many."""
    now = time.time() if now is None else now
    deleted, _ = RateLimitWindow.objects.filter(window_end__lte=math.floor(now)).delete()
    return deleted
