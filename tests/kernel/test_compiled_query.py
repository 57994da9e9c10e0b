"""kernel.compiled_query.CompiledQuery answers as the ORM answers: the same instance, its
select_related relations and every field's value (datetimes with their zone, booleans,
JSON, nullable foreign keys), on SQLite and on PostgreSQL; and it caches only the SQL, so a
key revoked between two calls is refused at the second."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import models
from django.utils import timezone

from kernel.compiled_query import CompiledQuery
from kernel.models import RateLimitWindow
from kernel.problems import DomainError
from members.models import API_KEY_FORMAT, ApiKey, Member
from members.services import (
    _USABLE_KEY_AND_FAILURES,
    _usable_key_and_failures_queryset,
    _usable_key_queryset,
    api_key_authenticate,
    api_key_create,
    api_key_read,
    api_key_revoke,
    api_key_verify,
)
from policies.models import PolicyVersion
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES

USABLE_KEY = CompiledQuery(_usable_key_queryset, text=("lookup_id",), datetimes=("now",))
MEMBER_BY_EMAIL = CompiledQuery(
    lambda email: Member.objects.select_related("team", "role").filter(email=email).order_by(),
    text=("email",),
)
VERSION_WITH_POLICY = CompiledQuery(
    lambda policy_slug: (
        PolicyVersion.objects.select_related("policy__team")
        .filter(policy__slug=policy_slug)
        .order_by("-number")
    ),
    text=("policy_slug",),
)


def fields(obj: models.Model | None) -> list[tuple[str, Any, type]] | None:
    """Every concrete field's value and its type (so that 1 == True cannot pass)."""
    if obj is None:
        return None
    return [
        (field.attname, getattr(obj, field.attname), type(getattr(obj, field.attname)))
        for field in obj._meta.concrete_fields
    ]


def assert_same_key(compiled: ApiKey, orm: ApiKey) -> None:
    assert fields(compiled) == fields(orm)
    assert fields(compiled.agent) == fields(orm.agent)
    assert fields(compiled.agent.team) == fields(orm.agent.team)
    assert fields(compiled.agent.policy) == fields(orm.agent.policy)
    # The relations are set, as select_related sets them: reading them costs no query.
    assert compiled.agent.team.pk == orm.agent.team_id
    assert compiled._state.db == orm._state.db and not compiled._state.adding


def the_orm_key(lookup_id: str, now) -> ApiKey:
    return (
        ApiKey.objects.usable(now)
        .select_related("agent", "agent__team", "agent__policy")
        .get(lookup_id=lookup_id)
    )


def check_instances_answer_as_the_orm(agent) -> None:
    now = timezone.now()
    key, _ = api_key_create(agent=agent.agent, name="with expiry", expires_at=now + timedelta(1))
    team = agent.agent.team
    team.log_call_arguments = True
    team.save()
    fixture_key = ApiKey.objects.get(agent=agent.agent, expires_at__isnull=True)
    for lookup_id in [key.lookup_id, fixture_key.lookup_id]:
        compiled = USABLE_KEY.instance(lookup_id=lookup_id, now=now)
        orm = the_orm_key(lookup_id, now)
        assert_same_key(compiled, orm)
        assert compiled.created_at.tzinfo is not None
        assert compiled.agent.team.log_call_arguments is True
    assert USABLE_KEY.instance(lookup_id="nosuchkey", now=now) is None
    # Past its expiry the same key is not usable: the value of `now` is the call's.
    assert USABLE_KEY.instance(lookup_id=key.lookup_id, now=now + timedelta(2)) is None

    # A nullable foreign key, empty and set; a JSON document.
    for member in Member.objects.all():
        compiled_member = MEMBER_BY_EMAIL.instance(email=member.email)
        orm_member = Member.objects.select_related("team", "role").get(pk=member.pk)
        assert fields(compiled_member) == fields(orm_member)
        assert fields(compiled_member.team) == fields(orm_member.team)
        assert fields(compiled_member.role) == fields(orm_member.role)
    assert Member.objects.filter(role__isnull=True).exists()
    version = VERSION_WITH_POLICY.instance(policy_slug="default")
    orm_version = (
        PolicyVersion.objects.select_related("policy__team")
        .filter(policy__slug="default")
        .order_by("-number")
        .first()
    )
    assert fields(version) == fields(orm_version)
    assert isinstance(version.document, dict) and version.document == orm_version.document
    assert fields(version.policy) == fields(orm_version.policy)
    assert fields(version.policy.team) == fields(orm_version.policy.team)


def test_instances_answer_as_the_orm(agent, disabled_member):
    check_instances_answer_as_the_orm(agent)


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
def test_instances_answer_as_the_orm_on_postgresql(agent, disabled_member):
    check_instances_answer_as_the_orm(agent)


def test_a_key_revoked_between_two_calls_is_refused_at_the_second(agent):
    api_key_authenticate(agent.api_key)  # compiled and cached now
    key = ApiKey.objects.get(agent=agent.agent)

    api_key_revoke(api_key=key)

    with pytest.raises(DomainError) as refused:
        api_key_authenticate(agent.api_key)
    assert refused.value.code == "invalid_api_key"
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None


def test_a_wrong_secret_an_unknown_and_an_expired_key_are_refused(agent):
    key = ApiKey.objects.get(agent=agent.agent)
    lookup_id, secret = API_KEY_FORMAT.parse(agent.api_key)
    wrong_secret = agent.api_key[: -len(secret)] + ("A" if secret[0] != "A" else "B") + secret[1:]
    unknown = agent.api_key.replace(lookup_id, "Z" * len(lookup_id))
    assert api_key_authenticate(agent.api_key).pk == key.pk

    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    for plaintext in [agent.api_key, wrong_secret, unknown]:
        with pytest.raises(DomainError) as refused:
            api_key_authenticate(plaintext)
        assert refused.value.code == "invalid_api_key"


def test_authentication_is_one_query_with_its_relations(agent, django_assert_num_queries):
    api_key_authenticate(agent.api_key)
    with django_assert_num_queries(1):
        key = api_key_authenticate(agent.api_key)
        assert key.agent.team.slug == "default" and key.agent.policy.slug == "default"


def test_a_value_the_query_transforms_cannot_be_cached(db):
    pattern = CompiledQuery(
        lambda name: Member.objects.filter(name__icontains=name), text=("name",)
    )
    with pytest.raises(ValueError, match="not found as parameters"):
        pattern.row(name="Al")


def test_the_key_with_the_address_failures_answers_as_the_orm(agent):
    """members.services reads the key and the address's failed authentications in one
    statement: the count (or None when the window has no counter) is the ORM's."""
    key = ApiKey.objects.get(agent=agent.agent)
    RateLimitWindow.objects.create(bucket="auth_failure:203.0.113.7:60:1", window_end=60, hits=2)
    now = timezone.now()

    for bucket, hits in (("auth_failure:203.0.113.7:60:1", 2), ("auth_failure:other:60:1", None)):
        values = {"lookup_id": key.lookup_id, "now": now, "failure_bucket": bucket}
        cached = _USABLE_KEY_AND_FAILURES.instance(**values)
        orm = _usable_key_and_failures_queryset(**values).first()

        assert cached.pk == orm.pk == key.pk
        assert cached.address_failures == orm.address_failures == hits
        assert fields(cached) == fields(orm)


def test_a_read_key_is_refused_for_a_wrong_secret(agent):
    """api_key_read finds the key by its lookup id; api_key_verify still checks the secret."""
    lookup_id, _ = API_KEY_FORMAT.parse(agent.api_key)

    read = api_key_read(f"pg_{lookup_id}_{'x' * 43}", failure_bucket="auth_failure:a:60:1")

    assert read is not None and read.api_key is not None and read.address_failures is None
    with pytest.raises(DomainError) as refused:
        api_key_verify(read.api_key, read.secret)
    assert refused.value.code == "invalid_api_key"
    assert api_key_read("not a key", failure_bucket="auth_failure:a:60:1") is None
