"""Reads of policies shared by services, views and the admin."""

from __future__ import annotations

from django.db import connection

from .models import Policy, PolicyVersion


def policy_active_version(*, policy: Policy | int) -> PolicyVersion | None:
    """The newest version: the one that admits plans now."""
    return PolicyVersion.objects.of_policy_newest_first(policy).select_related("policy").first()


def policy_active_version_id_sql(alias: str = "newest") -> str:
    """ "A policy's active version is its newest" in SQL, for a statement written by hand
    (plans.selectors.signing_context_read): a scalar subquery answering the id of the active
    version of the policy given as its one parameter, NULL when nothing is published.

    ``PolicyVersionQuerySet.of_policy_newest_first`` is the rule's home; this is its one
    SQL form (decision 0061), and tests/policies/test_active_version_sql.py holds the two
    to one answer on SQLite and PostgreSQL."""
    version = connection.ops.quote_name(PolicyVersion._meta.db_table)
    # Only the model's own table name is formatted in; the policy is a parameter.
    return (
        f"SELECT {alias}.id FROM {version} {alias} "  # noqa: S608
        f"WHERE {alias}.policy_id = %s ORDER BY {alias}.number DESC LIMIT 1"
    )
