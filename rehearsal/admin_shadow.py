"""The policy page's shadow section: the version tried in shadow now, who published it and
when, how often over the last day it would have answered otherwise (each count a link to
those differences, ``plans.admin_shadow``), and "Promote" and "Withdraw" (the version
admin's actions, ``admin_republish``) for those who edit policies. Also how the version
history marks shadow versions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse

from kernel.admin_actions import ObjectActionsMixin
from plans.admin_shadow import shadow_difference_counts, shadow_differences_url
from plans.models import ShadowDifference
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_shadow_version
from policies.services import promoted_from


def shadow_section(request: HttpRequest, policy: Policy) -> dict[str, Any] | None:
    """The context of ``admin/policies/policy/shadow.html``, or None without a shadow."""
    shadow = policy_shadow_version(policy=policy)
    if shadow is None:
        return None
    differences_admin = admin.site.get_model_admin(ShadowDifference)
    may_list = differences_admin.has_view_permission(request)
    counts = shadow_difference_counts(shadow_version=shadow)
    rows = [
        {
            "kind": kind,
            "label": label,
            "count": counts[kind],
            "url": shadow_differences_url(shadow_version=shadow, kind=kind) if may_list else "",
        }
        for kind, label in ShadowDifference.Kind.choices
    ]
    versions_admin = admin.site.get_model_admin(PolicyVersion)
    assert isinstance(versions_admin, ObjectActionsMixin)
    back = urlencode({"next": reverse("admin:policies_policy_change", args=[policy.pk])})

    def action_url(name: str) -> str:
        url = versions_admin.object_action_url(request, shadow, name)
        return f"{url}?{back}" if url else ""

    return {
        "version": shadow,
        "version_url": reverse("admin:policies_policyversion_change", args=[shadow.pk]),
        "rows": rows,
        "all_url": shadow_differences_url(shadow_version=shadow) if may_list else "",
        "promote_url": action_url("promote_shadow"),
        "withdraw_url": action_url("withdraw_shadow"),
    }


def shadow_marks(policy: Policy, versions: Iterable[PolicyVersion]) -> dict[int, str]:
    """What the version history says of each shadow version (by id): tried now, promoted
    as which version, or withdrawn (replaced by another shadow counts as withdrawn)."""
    versions = list(versions)
    promoted: dict[int, int] = {}
    for version in versions:
        source = promoted_from(version)
        if source is not None:
            promoted.setdefault(source, version.number)
    marks: dict[int, str] = {}
    for version in versions:
        if not version.shadow:
            continue
        if version.pk == policy.shadow_version_id:
            marks[version.pk] = "shadow, tried now"
        elif version.number in promoted:
            marks[version.pk] = f"shadow, promoted as v{promoted[version.number]}"
        else:
            marks[version.pk] = "shadow, withdrawn"
    return marks
