"""Reads of policies shared by services, views and the admin."""

from __future__ import annotations

from django.db import connection

from .models import Policy, PolicyVersion


def policy_active_version(*, policy: Policy | int) -> PolicyVersion | None:
    """The newest version: the one that admits plans now."""
    return PolicyVersion.objects.of_policy_newest_first(policy).select_related("policy").first()


def policy_next_version_number(*, policy: Policy) -> int:
    """The number the policy's next version takes, active or shadow: one past its newest
    of either kind (call it holding the policy's row lock)."""
    newest = (
        PolicyVersion.objects.filter(policy=policy).order_by("-number").values("number").first()
    )
    return (newest["number"] if newest is not None else 0) + 1


def policy_shadow_version(*, policy: Policy) -> PolicyVersion | None:
    """The version tried in shadow beside the active one now, or None."""
    if policy.shadow_version_id is None:
        return None
    return PolicyVersion.objects.select_related("policy").get(pk=policy.shadow_version_id)


def policy_active_version_id_sql(alias: str = "newest") -> str:
    """ "A policy's active version is its newest not in shadow" in SQL, for a statement
    written by hand (plans.selectors.signing_context_read): a scalar subquery answering the
    id of the active version of the policy given as its one parameter, NULL when nothing is
    published.

    ``PolicyVersionQuerySet.of_policy_newest_first`` is the rule's home; this is its one
    SQL form (decision 0061), and tests/policies/test_active_version_sql.py holds the two
    to one answer on SQLite and PostgreSQL."""
    version = connection.ops.quote_name(PolicyVersion._meta.db_table)
    # Only the model's own table name is formatted in; the policy is a parameter.
    return (
        f"SELECT {alias}.id FROM {version} {alias} "  # noqa: S608
        f"WHERE {alias}.policy_id = %s AND NOT {alias}.shadow "
        f"ORDER BY {alias}.number DESC LIMIT 1"
    )
