"""members.services.api_key_authenticate reads the key by its lookup id in one statement
built once per process (kernel.sql, decision 0061) and answers what the ORM answers: the same
key, agent, team and policy, with every value of the same type, on SQLite and PostgreSQL.
Only the value of each call is read: a key revoked or expired between two calls is refused
at the second."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import models
from django.utils import timezone

from kernel.problems import DomainError
from members.models import API_KEY_FORMAT, ApiKey
from members.services import api_key_authenticate, api_key_create, api_key_revoke


def fields(obj: models.Model) -> list[tuple[str, Any, type]]:
    """Every concrete field's value and its type (so that 1 == True cannot pass); a field
    the read left deferred is loaded here, and must then be the ORM's too."""
    return [
        (field.attname, getattr(obj, field.attname), type(getattr(obj, field.attname)))
        for field in obj._meta.concrete_fields
    ]


def the_orm_key(lookup_id: str) -> ApiKey:
    return (
        ApiKey.objects.usable(timezone.now())
        .select_related("agent", "agent__team", "agent__policy")
        .get(lookup_id=lookup_id)
    )


def test_the_key_its_agent_team_and_policy_are_the_orms(agent):
    team = agent.agent.team
    team.log_call_arguments = True
    team.save()
    expiring, plaintext = api_key_create(
        agent=agent.agent, name="with expiry", expires_at=timezone.now() + timedelta(days=1)
    )

    keys = [(agent.api_key, API_KEY_FORMAT.parse(agent.api_key)[0])]
    keys.append((plaintext, expiring.lookup_id))
    for text, lookup_id in keys:
        read = api_key_authenticate(text)
        orm = the_orm_key(lookup_id)
        assert fields(read) == fields(orm)
        assert fields(read.agent) == fields(orm.agent)
        assert fields(read.agent.team) == fields(orm.agent.team)
        assert fields(read.agent.policy) == fields(orm.agent.policy)
        assert read._state.db == orm._state.db and not read._state.adding
        assert read.agent.team.log_call_arguments is True


def test_authentication_is_one_query_with_what_requests_read(agent, django_assert_num_queries):
    api_key_authenticate(agent.api_key)
    with django_assert_num_queries(1):
        key = api_key_authenticate(agent.api_key)
        agent_row, team = key.agent, key.agent.team
        assert (agent_row.is_active, agent_row.team_id, agent_row.policy_id) == (
            True,
            team.pk,
            key.agent.policy.pk,
        )
        assert team.slug == "default" and key.agent.policy.slug == "default"
        assert isinstance(team.log_call_arguments, bool)
        assert team.revocation_bound_seconds > 0 and key.last_used_at is None


def test_a_key_revoked_between_two_calls_is_refused_at_the_second(agent):
    api_key_authenticate(agent.api_key)  # the statement is built and cached now
    key = ApiKey.objects.get(agent=agent.agent)

    api_key_revoke(api_key=key)

    with pytest.raises(DomainError) as refused:
        api_key_authenticate(agent.api_key)
    assert refused.value.code == "invalid_api_key"


def test_a_wrong_secret_an_unknown_a_malformed_and_an_expired_key_are_refused(agent):
    key = ApiKey.objects.get(agent=agent.agent)
    lookup_id, secret = API_KEY_FORMAT.parse(agent.api_key)
    wrong_secret = agent.api_key[: -len(secret)] + ("A" if secret[0] != "A" else "B") + secret[1:]
    unknown = agent.api_key.replace(lookup_id, "0" * len(lookup_id))
    assert api_key_authenticate(agent.api_key).pk == key.pk
    for plaintext in [wrong_secret, unknown, "not a key", f"pg_{lookup_id}_"]:
        with pytest.raises(DomainError) as refused:
            api_key_authenticate(plaintext)
        assert refused.value.code == "invalid_api_key"

    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(DomainError) as refused:
        api_key_authenticate(agent.api_key)
    assert refused.value.code == "invalid_api_key"
