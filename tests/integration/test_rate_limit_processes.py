"""Rate limits under real gunicorn with several worker processes: exactly the limit gets
through, whichever worker answers.

On SQLite the server runs on a temporary database file (other processes cannot see the
in-memory test database), migrated and seeded through the operator commands as an operator
would; on PostgreSQL it runs on the test database. The counters live in the database, or in
Redis when ``CACHE_URL`` names one (the ``redis`` case, skipped without Redis).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis
from django.conf import settings

from kernel.problems import Code
from members.authentication import AUTH_FAILURE_SCOPE

from .processes import (
    IS_POSTGRES,
    IS_REDIS,
    NEEDS_REDIS,
    ROOT,
    process_env,
    start_gunicorn,
    stop,
    tail,
)

WORKERS = 4
CLIENTS = 16
# A plan id that is well formed and never exists: a cheap authenticated request (404).
UNKNOWN_PLAN = "/v1/plans/01J0000000000000000000000Z"
POLICY = {"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": ["read_*"]}]}
# Hour-long windows, and no burst started in a window's last seconds: a window that rolled
# over in the middle of a burst would let a second limit's worth through.
PERIOD_SECONDS = 3600
WINDOW_MARGIN_SECONDS = 30


def wait_out_window_end() -> None:
    remaining = PERIOD_SECONDS - time.time() % PERIOD_SECONDS
    if remaining < WINDOW_MARGIN_SECONDS:
        time.sleep(remaining + 1)


def manage(env: dict[str, str], *arguments: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *arguments, "--skip-checks"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"manage.py {arguments[0]}:\n{result.stdout}{result.stderr}"
    return result.stdout


def seed_agent(env: dict[str, str], folder: Path) -> str:
    """Migrate and create a member, a policy and an agent with the operator commands; returns
    the agent's API key."""
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "create_member", "alice@limits.test", "--team", "limits")
    policy_file = folder / "policy.json"
    policy_file.write_text(json.dumps(POLICY))
    manage(env, "set_policy", "limits", "--file", str(policy_file), "--team", "limits")
    created = manage(env, "create_agent", "limited", "--policy", "limits", "--team", "limits")
    return json.loads(created.strip().splitlines()[-1])["apiKey"]


def server_env(tmp_path: Path, store: str, **limits: str) -> dict[str, str]:
    """The production settings module (the test settings pin a local-memory cache), with the
    test run's secrets and database."""
    overrides = {
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PLANGATE_ENV_FILE": os.devnull,
        "LOG_LEVEL": "WARNING",
        "STATIC_ROOT": str(tmp_path),
        "CACHE_URL": settings.CELERY_BROKER_URL if store == "redis" else "locmemcache://",
        **limits,
    }
    if not IS_POSTGRES:
        overrides["DATABASE_URL"] = f"sqlite:///{tmp_path / 'limits.sqlite3'}"
    return process_env(**overrides)


@pytest.fixture
def no_address_counters(store):
    """Redis keeps counters across test runs (the database is rolled back): start and end
    without this address's failure counters."""

    def clear() -> None:
        if store == "redis":
            client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
            for key in client.scan_iter(match=f"*:{AUTH_FAILURE_SCOPE}:127.0.0.1:*"):
                client.delete(key)

    clear()
    yield
    clear()


def fire(base_url: str, api_keys: list[str]) -> list[httpx.Response]:
    """One GET of an unknown plan per key, from CLIENTS threads at once."""

    def one(api_key: str) -> httpx.Response:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            response = client.get(UNKNOWN_PLAN, headers={"Authorization": f"Bearer {api_key}"})
            response.read()
            return response

    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        return list(pool.map(one, api_keys))


def assert_throttled(response: httpx.Response) -> None:
    assert response.headers["Content-Type"].startswith("application/problem+json")
    assert response.json()["code"] == Code.THROTTLED
    assert 1 <= int(response.headers["Retry-After"]) <= PERIOD_SECONDS


STORES = [
    pytest.param("database", id="database"),
    pytest.param(
        "redis",
        id="redis",
        marks=[pytest.mark.redis, pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)],
    ),
]


@pytest.mark.parametrize("store", STORES)
@pytest.mark.django_db(transaction=True)
def test_both_limits_hold_exactly_across_worker_processes(tmp_path, store, no_address_counters):
    # One server for both limits: starting gunicorn is most of this test's time.
    env = server_env(
        tmp_path, store, PLANGATE_RATE_LIMIT="20/hour", PLANGATE_AUTH_FAILURE_LIMIT="10/hour"
    )
    api_key = seed_agent(env, tmp_path)
    # Well-formed keys that do not exist, each different: a client guessing keys.
    guesses = [f"pg_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}" for _ in range(40)]
    log = tmp_path / "gunicorn.log"
    process, base_url = start_gunicorn(env, log, workers=WORKERS)
    try:
        wait_out_window_end()
        # 100 requests with one key: exactly its 20 get through, whichever worker serves them.
        with_key = fire(base_url, [api_key] * 100)
        # 40 failed authentications from one address: 10 are answered 401, the rest 429.
        guessed = fire(base_url, guesses)
        # Over its limit, the address is refused before any key is checked, a valid one too.
        after = fire(base_url, [api_key])[0]
    finally:
        stop(process)

    statuses = [response.status_code for response in with_key]
    assert set(statuses) <= {404, 429}, (statuses, tail(log))
    assert statuses.count(404) == 20, statuses
    statuses = [response.status_code for response in guessed]
    assert set(statuses) <= {401, 429}, (statuses, tail(log))
    assert statuses.count(401) == 10, statuses
    for response in [*with_key, *guessed]:
        if response.status_code == 429:
            assert_throttled(response)
        else:
            assert response.json()["code"] in {Code.PLAN_NOT_FOUND, Code.INVALID_API_KEY}
    assert after.status_code == 429, after.text
    assert_throttled(after)
