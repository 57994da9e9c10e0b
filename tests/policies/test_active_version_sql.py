"""policies.selectors.policy_active_version_id_sql, the SQL form of "a policy's active version
is its newest", answers what the ORM rule answers (policy_active_version), whatever order
the versions were written in, on SQLite and PostgreSQL (decision 0061)."""

from __future__ import annotations

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version, policy_active_version_id_sql
from teams.models import Team


def sql_answer(policy_id: int) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(policy_active_version_id_sql(), [policy_id])
        row = cursor.fetchone()
    return None if row is None else row[0]


def orm_answer(policy_id: int) -> int | None:
    version = policy_active_version(policy=policy_id)
    return None if version is None else version.pk


class ActiveVersionSqlTests(TestCase):
    @settings(max_examples=25)
    @given(st.lists(st.lists(st.integers(1, 50), unique=True, max_size=5), min_size=1, max_size=3))
    def test_the_sql_picks_the_orms_version(self, numbers_per_policy: list[list[int]]) -> None:
        team = Team.objects.create(slug="t", name="T")
        policies = []
        for index, numbers in enumerate(numbers_per_policy):
            policy = Policy.objects.create(team=team, slug=f"p{index}")
            for number in numbers:  # written in any order, not only oldest first
                PolicyVersion.objects.create(
                    policy=policy, number=number, document={}, hash=f"{number:064d}"
                )
            policies.append(policy)

        for policy, numbers in zip(policies, numbers_per_policy, strict=True):
            assert sql_answer(policy.pk) == orm_answer(policy.pk)
            expected = None if not numbers else max(numbers)
            active = policy_active_version(policy=policy.pk)
            assert (None if active is None else active.number) == expected
        assert sql_answer(-1) is None


pytestmark = pytest.mark.django_db
