"""Rate limits: the fixed-window counters (database and Redis stores), the limit per API key,
and the limit on failed authentications per client address.

Worker processes sharing the counters are tested with real gunicorn in
tests/integration/test_rate_limit_processes.py.
"""

from __future__ import annotations

import secrets
import time

import pytest
import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from kernel.models import RateLimitWindow
from kernel.problems import Code
from kernel.ratelimit import (
    Rate,
    rate_limit_hit,
    rate_limit_peek,
    rate_limit_windows_purge,
    rate_parse,
)
from members.authentication import AUTH_FAILURE_SCOPE
from members.models import ApiKey
from members.services import api_key_revoke
from plans.models import Plan
from plans.tasks import expire_plans
from tests.conftest import plan_document
from tests.integration.processes import IS_REDIS, NEEDS_REDIS
from tests.plans.helpers import assert_problem

UNKNOWN_PLAN = "/v1/plans/01J0000000000000000000000Z"
ADDRESS = "203.0.113.7"
OTHER_ADDRESS = "198.51.100.2"
# A window starts at every multiple of the period since the epoch: 1,200 s starts one.
MINUTE_START = 1_200.0


def unknown_key() -> str:
    return f"pg_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}"


@pytest.fixture(
    params=[
        "database",
        pytest.param(
            "redis",
            marks=[pytest.mark.redis, pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)],
        ),
    ]
)
def store(request, db):
    """Counters in the test database (no Redis cache), or in a real Redis."""
    if request.param == "database":
        yield "database"
        return
    prefix = f"test-rate-{secrets.token_hex(4)}"
    redis_cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": settings.CELERY_BROKER_URL,
        "KEY_PREFIX": prefix,
    }
    with override_settings(CACHES={"default": redis_cache}):
        yield "redis"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    for key in client.scan_iter(match=f"{prefix}:*"):
        client.delete(key)


def hits(count: int, *, ident: str = "key-1", rate: Rate, now: float, scope: str = "test"):
    return [rate_limit_hit(scope=scope, ident=ident, rate=rate, now=now) for _ in range(count)]


# --- rates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("600/min", Rate(600, 60)),
        ("30/m", Rate(30, 60)),
        ("5/sec", Rate(5, 1)),
        ("1000/hour", Rate(1000, 3600)),
        ("2/day", Rate(2, 86400)),
        (" 7 / MIN ", Rate(7, 60)),
    ],
)
def test_a_rate_is_a_count_per_period(text, expected):
    assert rate_parse(text) == expected


@pytest.mark.parametrize("text", ["", "600", "0/min", "-1/min", "10/fortnight", "ten/min", "1/"])
def test_a_malformed_rate_is_refused(text):
    with pytest.raises(ImproperlyConfigured):
        rate_parse(text)


# --- the counters ----------------------------------------------------------------------------


def test_exactly_the_limit_is_allowed_in_a_window(store):
    results = hits(5, rate=Rate(3, 60), now=MINUTE_START + 10)

    assert [result.allowed for result in results] == [True, True, True, False, False]
    assert [result.hits for result in results] == [1, 2, 3, 4, 5]
    if store == "database":
        assert RateLimitWindow.objects.get().hits == 5


def test_the_next_window_starts_a_fresh_count(store):
    rate = Rate(2, 60)
    hits(3, rate=rate, now=MINUTE_START)
    last_moment = rate_limit_hit(scope="test", ident="key-1", rate=rate, now=MINUTE_START + 59.9)
    next_window = hits(3, rate=rate, now=MINUTE_START + 60)

    assert not last_moment.allowed
    assert [result.allowed for result in next_window] == [True, True, False]
    assert next_window[0].hits == 1


@pytest.mark.parametrize(
    ("offset", "retry_after"),
    [(0.0, 60), (0.2, 60), (1.0, 59), (30.5, 30), (59.0, 1), (59.999, 1)],
)
def test_retry_after_is_the_time_left_in_the_window_rounded_up(store, offset, retry_after):
    rate = Rate(1, 60)
    hits(1, rate=rate, now=MINUTE_START)
    refused = rate_limit_hit(scope="test", ident="key-1", rate=rate, now=MINUTE_START + offset)

    assert not refused.allowed
    assert refused.retry_after == retry_after
    assert rate_limit_peek(
        scope="test", ident="key-1", rate=rate, now=MINUTE_START + offset
    ).retry_after == (retry_after)


def test_separate_clients_and_scopes_count_apart(store):
    rate = Rate(2, 60)
    now = MINUTE_START + 5
    hits(3, ident="key-1", rate=rate, now=now)

    assert [r.allowed for r in hits(2, ident="key-2", rate=rate, now=now)] == [True, True]
    assert hits(1, ident="key-1", scope="other", rate=rate, now=now)[0].hits == 1
    # The same limit per hour is another counter than per minute.
    assert hits(1, ident="key-1", rate=Rate(2, 3600), now=now)[0].hits == 1


def test_peek_reads_without_counting(store):
    rate = Rate(2, 60)
    now = MINUTE_START + 5
    before = rate_limit_peek(scope="test", ident="key-1", rate=rate, now=now)
    hits(1, rate=rate, now=now)
    during = [rate_limit_peek(scope="test", ident="key-1", rate=rate, now=now) for _ in range(3)]
    hits(1, rate=rate, now=now)
    after = rate_limit_peek(scope="test", ident="key-1", rate=rate, now=now)

    assert (before.hits, before.allowed) == (0, True)
    assert [(p.hits, p.allowed) for p in during] == [(1, True)] * 3
    assert (after.hits, after.allowed) == (2, False)


def test_any_client_identity_gets_a_short_bucket_of_its_own(store):
    rate = Rate(1, 60)
    odd = ["x" * 1_000, "a\x00b", "spaces and ünïcode", "x" * 999 + "y"]
    results = [
        rate_limit_hit(scope="test", ident=ident, rate=rate, now=MINUTE_START) for ident in odd
    ]

    assert [result.hits for result in results] == [1, 1, 1, 1]
    if store == "database":
        buckets = list(RateLimitWindow.objects.values_list("bucket", flat=True))
        assert len(buckets) == 4
        assert all(len(bucket) <= 200 and "\x00" not in bucket for bucket in buckets)


def test_the_sweep_deletes_finished_windows_only(db):
    rate = Rate(5, 60)
    hits(2, ident="old", rate=rate, now=MINUTE_START + 1)
    hits(1, ident="current", rate=rate, now=MINUTE_START + 61)

    assert rate_limit_windows_purge(now=MINUTE_START + 59) == 0
    assert rate_limit_windows_purge(now=MINUTE_START + 60) == 1
    assert [row.bucket.split(":")[1] for row in RateLimitWindow.objects.all()] == ["current"]
    assert (
        rate_limit_peek(scope="test", ident="current", rate=rate, now=MINUTE_START + 61).hits == 1
    )


def test_the_periodic_plan_sweep_also_deletes_finished_windows(db):
    hits(1, ident="long-over", rate=Rate(5, 60), now=MINUTE_START)
    hits(1, ident="current", rate=Rate(5, 86400), now=time.time())

    expire_plans()

    assert [row.bucket.split(":")[1] for row in RateLimitWindow.objects.all()] == ["current"]


# --- the limit per API key -------------------------------------------------------------------


@override_settings(PLANGATE_RATE_LIMIT="3/day")  # a day: no window ends during the test
def test_an_api_key_over_its_limit_gets_429_problem_json_with_retry_after(agent, other_agent):
    statuses = [agent.client.get(UNKNOWN_PLAN).status_code for _ in range(3)]
    refused = agent.client.get(UNKNOWN_PLAN)

    assert statuses == [404, 404, 404]
    body = assert_problem(refused, 429, Code.THROTTLED)
    assert 1 <= int(refused["Retry-After"]) <= 86400
    assert refused["Retry-After"] in body["detail"]
    # Another key has a count of its own.
    assert other_agent.client.get(UNKNOWN_PLAN).status_code == 404
    lookup_id = agent.api_key.removeprefix("pg_").split("_")[0]
    assert RateLimitWindow.objects.get(bucket__startswith=f"api_key:{lookup_id}:").hits == 4


@override_settings(PLANGATE_RATE_LIMIT="1/day")
def test_a_throttled_declaration_writes_no_plan(agent):
    assert (
        agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").status_code == 201
    )

    refused = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")

    assert_problem(refused, 429, Code.THROTTLED)
    assert Plan.objects.count() == 1


# --- failed authentication per address -------------------------------------------------------


def get_with_key(client, api_key: str, address: str = ADDRESS, **headers):
    return client.get(
        UNKNOWN_PLAN, HTTP_AUTHORIZATION=f"Bearer {api_key}", REMOTE_ADDR=address, **headers
    )


@override_settings(PLANGATE_AUTH_FAILURE_LIMIT="3/day")
def test_an_address_over_its_failure_limit_gets_429_even_with_a_valid_key(agent, anonymous_client):
    failures = [get_with_key(anonymous_client, unknown_key()) for _ in range(3)]
    over = get_with_key(anonymous_client, unknown_key())
    valid_from_there = get_with_key(anonymous_client, agent.api_key)
    valid_elsewhere = get_with_key(anonymous_client, agent.api_key, OTHER_ADDRESS)
    wrong_elsewhere = get_with_key(anonymous_client, unknown_key(), OTHER_ADDRESS)

    for response in failures:
        assert_problem(response, 401, Code.INVALID_API_KEY)
    assert_problem(over, 429, Code.THROTTLED)
    assert 1 <= int(over["Retry-After"]) <= 86400
    assert "WWW-Authenticate" not in over
    assert_problem(valid_from_there, 429, Code.THROTTLED)
    assert valid_elsewhere.status_code == 404
    assert_problem(wrong_elsewhere, 401, Code.INVALID_API_KEY)
    counter = RateLimitWindow.objects.get(bucket__startswith=f"{AUTH_FAILURE_SCOPE}:{ADDRESS}:")
    # The three 401s; from then on the address was refused before a key was looked at.
    assert counter.hits == 3


@override_settings(PLANGATE_AUTH_FAILURE_LIMIT="2/day")
def test_every_kind_of_bad_credential_counts_as_a_failure(agent, anonymous_client):
    api_key_revoke(api_key=ApiKey.objects.get(agent=agent.agent))
    first = anonymous_client.get(
        UNKNOWN_PLAN, HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz", REMOTE_ADDR=ADDRESS
    )
    second = get_with_key(anonymous_client, agent.api_key)  # revoked
    third = get_with_key(anonymous_client, "not-a-key")

    assert [first.status_code, second.status_code] == [401, 401]
    assert_problem(third, 429, Code.THROTTLED)


@override_settings(PLANGATE_AUTH_FAILURE_LIMIT="2/day", PLANGATE_RATE_LIMIT="100/day")
def test_successes_and_missing_credentials_do_not_count_as_failures(agent, anonymous_client):
    successes = [get_with_key(anonymous_client, agent.api_key).status_code for _ in range(5)]
    missing = [anonymous_client.get(UNKNOWN_PLAN, REMOTE_ADDR=ADDRESS) for _ in range(5)]
    failures = [get_with_key(anonymous_client, unknown_key()).status_code for _ in range(3)]

    assert successes == [404] * 5
    for response in missing:
        assert_problem(response, 401, Code.INVALID_API_KEY)
    assert failures == [401, 401, 429]


@override_settings(PLANGATE_AUTH_FAILURE_LIMIT="2/day")
def test_a_forged_forwarded_for_header_does_not_give_a_fresh_limit(db, anonymous_client):
    # With no trusted proxy (PLANGATE_NUM_PROXIES=0) X-Forwarded-For is the client's own text.
    statuses = [
        get_with_key(
            anonymous_client, unknown_key(), HTTP_X_FORWARDED_FOR=f"192.0.2.{number}"
        ).status_code
        for number in range(4)
    ]

    assert statuses == [401, 401, 429, 429]
