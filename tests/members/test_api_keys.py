"""API keys: shown once, stored as a keyed hash, revocable, last use written sparingly."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from kernel.problems import Code, DomainError
from members.models import ApiKey
from members.services import api_key_authenticate, api_key_create, api_key_revoke, api_key_touch


def test_the_plaintext_is_returned_once_and_only_a_hash_is_stored(agent):
    api_key, plaintext = api_key_create(agent=agent.agent, name="ci")

    stored = ApiKey.objects.get(pk=api_key.pk)
    secret = plaintext.rsplit("_", 1)[1]
    assert plaintext.startswith(f"pg_{stored.lookup_id}_")
    assert secret not in stored.secret_hash
    assert len(stored.secret_hash) == 64
    assert api_key_authenticate(plaintext) == stored


def test_two_keys_never_share_a_lookup_id_or_a_secret(agent):
    keys = [api_key_create(agent=agent.agent)[1] for _ in range(20)]

    assert len({key.split("_")[1] for key in keys}) == 20
    assert len(set(keys)) == 20


@pytest.mark.parametrize(
    "mangle", [str.upper, lambda k: k[:-1], lambda k: k + "x", lambda k: k[3:]]
)
def test_any_change_to_the_key_is_refused(agent, mangle):
    with pytest.raises(DomainError) as raised:
        api_key_authenticate(mangle(agent.api_key))

    assert raised.value.code == Code.INVALID_API_KEY


def test_revoked_and_expired_keys_are_refused(agent):
    revoked, revoked_plaintext = api_key_create(agent=agent.agent)
    api_key_revoke(api_key=revoked)
    _, expired_plaintext = api_key_create(
        agent=agent.agent, expires_at=timezone.now() - timedelta(minutes=1)
    )

    for plaintext in (revoked_plaintext, expired_plaintext):
        with pytest.raises(DomainError):
            api_key_authenticate(plaintext)


def test_last_use_is_written_once_per_interval(agent, settings):
    settings.PLANGATE_API_KEY_TOUCH_INTERVAL = 300
    api_key = ApiKey.objects.get(agent=agent.agent)
    now = timezone.now()

    api_key_touch(api_key=api_key, now=now)
    with CaptureQueriesContext(connection) as soon_after:
        api_key_touch(api_key=api_key, now=now + timedelta(seconds=10))
    api_key_touch(api_key=api_key, now=now + timedelta(seconds=301))

    assert len(soon_after.captured_queries) == 0
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == now + timedelta(seconds=301)


# Autocommit, as in a real request: the write being tested runs outside any transaction.
@pytest.mark.django_db(transaction=True)
def test_a_database_failure_recording_last_use_does_not_fail_a_stored_plan(agent):
    """The last-use write comes after the plan is committed: losing it must not answer an
    error for a plan that exists (the agent would retry and declare it twice)."""
    from django.db import OperationalError

    from plans.models import Plan
    from tests.conftest import PLAN

    def fail_api_key_updates(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("UPDATE") and "apikey" in sql.lower():
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(fail_api_key_updates):
        response = agent.client.post("/v1/plans", {"plan": PLAN}, format="json")

    assert response.status_code == 201, response.content
    assert Plan.objects.filter(id=response.json()["id"]).exists()
    assert ApiKey.objects.get(agent=agent.agent).last_used_at is None
