"""Admin for published policy versions: read-only for everyone, with the diff from the
version before, each rule anchored, the simulator linked, and "Publish this version again"
for those who edit policies. The diff is the impact preview's (``document_diff_html``)."""

from __future__ import annotations

from typing import ClassVar

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions
from kernel.admin_widgets import admin_link, datetime_column
from kernel.json_format import readable_json
from policies.models import PolicyVersion
from policies.selectors import policy_active_version

from .admin_preview import document_diff_html, rules_table_html
from .admin_republish import RepublishActionMixin
from .admin_shadow import shadow_marks
from .admin_simulator import SimulatorMixin, simulator_link


@admin.register(PolicyVersion)
class PolicyVersionAdmin(
    SimulatorMixin, RepublishActionMixin, ReadOnlyPermissions, PlangateModelAdmin
):
    """Published versions: read-only for everyone, superusers included. An old one can be
    published again as the newest (``RepublishActionMixin``), by those who edit policies."""

    actions = ["publish_again", "promote_shadow", "withdraw_shadow"]
    object_actions = {
        "publish_again": "Publish this version again",
        "promote_shadow": "Promote",
        "withdraw_shadow": "Withdraw from shadow",
    }

    list_display = [
        "__str__",
        "policy",
        "number",
        "shadow",
        "short_hash",
        "comment",
        "created_by",
        "published",
    ]
    list_filter = [("policy", admin.RelatedOnlyFieldListFilter), "shadow", "created_at"]
    search_fields = ["policy__slug", "=hash", "comment", "created_by"]
    list_select_related = ["policy", "policy__team"]
    fields: ClassVar[tuple[str, ...]] = (
        "policy_link",
        "number",
        "hash",
        "comment",
        "created_by",
        "created_at",
        "neighbours",
        "simulate",
        "changes",
        "rules_listed",
        "document_pretty",
    )
    readonly_fields = fields
    show_full_result_count = False
    published = datetime_column("created_at", "published")

    @admin.display(description="hash", ordering="hash")
    def short_hash(self, version: PolicyVersion) -> str:
        return format_html('<code title="{}">{}…</code>', version.hash, version.hash[:12])

    @admin.display(description="policy")
    def policy_link(self, version: PolicyVersion) -> str:
        return admin_link(version.policy)

    def _previous(self, version: PolicyVersion) -> PolicyVersion | None:
        return (
            PolicyVersion.objects.filter(policy_id=version.policy_id, number__lt=version.number)
            .order_by("-number")
            .first()
        )

    @admin.display(description="other versions")
    def neighbours(self, version: PolicyVersion) -> str:
        previous = self._previous(version)
        following = (
            PolicyVersion.objects.filter(policy_id=version.policy_id, number__gt=version.number)
            .order_by("number")
            .first()
        )
        parts: list[str] = []
        if previous:
            parts.append(format_html("← {}", admin_link(previous, f"v{previous.number}")))
        if following:
            parts.append(format_html("{} →", admin_link(following, f"v{following.number}")))
        active = policy_active_version(policy=version.policy_id)
        if active is not None and active.pk == version.pk:
            parts.append("this is the active version")
        elif version.policy.shadow_version_id == version.pk:
            parts.append("this version is tried in shadow now")
        elif version.shadow:
            parts.append(shadow_marks(version.policy, version.policy.versions.all())[version.pk])
        return format_html_join(" · ", "{}", ((part,) for part in parts))

    @admin.display(description="simulator")
    def simulate(self, version: PolicyVersion) -> str:
        return simulator_link(version)

    @admin.display(description="changes from the version before")
    def changes(self, version: PolicyVersion) -> str:
        previous = self._previous(version)
        if previous is None:
            return "The first version."
        slug = version.policy.slug
        return document_diff_html(
            previous.document,
            version.document,
            old_label=f"{slug} v{previous.number}",
            new_label=f"{slug} v{version.number}",
        )

    @admin.display(description="rules")
    def rules_listed(self, version: PolicyVersion) -> str:
        return rules_table_html(version.document)

    @admin.display(description="document")
    def document_pretty(self, version: PolicyVersion) -> str:
        return format_html('<pre class="plangate-pre">{}</pre>', readable_json(version.document))
