"""Reads of policies shared by services, views and the admin."""

from __future__ import annotations

from .models import Policy, PolicyVersion


def policy_active_version(*, policy: Policy | int) -> PolicyVersion | None:
    """The newest version: the one that admits plans now."""
    return PolicyVersion.objects.of_policy_newest_first(policy).select_related("policy").first()
