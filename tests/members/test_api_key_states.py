"""An API key's state: one rule, as QuerySet filters and as the loaded row's ``state``."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from members.models import Agent, ApiKey
from members.services import api_key_create


def _keys(agent: Agent) -> dict[str, ApiKey]:
    now = timezone.now()
    keys = {
        "plain": api_key_create(agent=agent)[0],
        "future_expiry": api_key_create(agent=agent, expires_at=now + timedelta(days=1))[0],
        "expired": api_key_create(agent=agent, expires_at=now - timedelta(seconds=1))[0],
        "revoked": api_key_create(agent=agent)[0],
        "revoked_and_expired": api_key_create(agent=agent, expires_at=now - timedelta(days=1))[0],
    }
    ApiKey.objects.filter(pk__in=[keys["revoked"].pk, keys["revoked_and_expired"].pk]).update(
        revoked_at=now - timedelta(hours=1)
    )
    return keys


def _names(keys: dict[str, ApiKey], queryset) -> set[str]:
    found = set(queryset.values_list("pk", flat=True))
    return {name for name, key in keys.items() if key.pk in found}


def test_usable_keys_are_neither_revoked_nor_expired(agent):
    keys = _keys(agent.agent)
    assert _names(keys, ApiKey.objects.usable(timezone.now())) == {"plain", "future_expiry"}


def test_revoked_wins_over_expired_and_the_states_do_not_overlap(agent):
    keys = _keys(agent.agent)
    now = timezone.now()
    assert _names(keys, ApiKey.objects.revoked()) == {"revoked", "revoked_and_expired"}
    assert _names(keys, ApiKey.objects.expired(now)) == {"expired"}


def test_the_row_state_agrees_with_the_filters(agent):
    keys = _keys(agent.agent)
    now = timezone.now()
    by_filter = {
        "active": ApiKey.objects.usable(now),
        "revoked": ApiKey.objects.revoked(),
        "expired": ApiKey.objects.expired(now),
    }
    for key in ApiKey.objects.filter(pk__in=[key.pk for key in keys.values()]):
        states = {state for state, queryset in by_filter.items() if queryset.filter(pk=key.pk)}
        assert states == {key.state(now)}
        assert key.is_usable(now) == (key.state(now) == "active")


def test_a_key_expiring_exactly_now_is_expired(agent):
    now = timezone.now()
    api_key = api_key_create(agent=agent.agent, expires_at=now)[0]
    assert not ApiKey.objects.usable(now).filter(pk=api_key.pk).exists()
    assert ApiKey.objects.expired(now).filter(pk=api_key.pk).exists()
    assert api_key.state(now) == "expired"


def test_an_agent_counts_only_its_usable_keys(agent):
    from django.db.models import Count

    from members.models import ApiKeyQuerySet

    _keys(agent.agent)
    counted = Agent.objects.annotate(
        usable=Count(
            "api_keys", filter=ApiKeyQuerySet.usable_condition(timezone.now(), through="api_keys")
        )
    ).get(pk=agent.agent.pk)
    assert counted.usable == ApiKey.objects.filter(agent=agent.agent).usable(timezone.now()).count()
    assert counted.usable == 3  # the persona's own key, "plain" and "future_expiry"
