"""Reads of policies shared by services, views and the admin."""

from __future__ import annotations

from .models import Policy, PolicyVersion


def policy_active_version(*, policy: Policy | int) -> PolicyVersion | None:
    """The newest version: the one that admits plans now."""
    policy_id = policy.pk if isinstance(policy, Policy) else policy
    return (
        PolicyVersion.objects.select_related("policy")
        .filter(policy_id=policy_id)
        .order_by("-number")
        .first()
    )
