"""Admin pages of the audit trail: every record ("Audit trail"), the refused declarations
and refreshes ("Refused attempts"), the admin and operator changes ("Activity"), the
refusals no agent could be named for, and the audit tokens (``audit.admin_tokens``).

Records are read-only for everyone, superusers included; auditors and team admins hold
their view permissions (audit/migrations/0003_audit_view_permissions.py) and see their
teams' records only. Every list exports its current filtered rows as CSV or JSON Lines
(``kernel.admin_export``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from kernel.admin_base import (
    LONG_LIST_PER_PAGE,
    PlangateModelAdmin,
    ReadOnlyPermissions,
    change_url,
    email_search,
    ulid_search,
)
from kernel.admin_export import ExportColumns, ExportMixin
from kernel.admin_scoping import scope_to_teams, sees_several_teams
from kernel.admin_widgets import TextInputFilter
from kernel.json_format import compact_json, pretty_json
from teams.models import Team

from . import admin_tokens  # noqa: F401  (registers AuditTokenAdmin)
from .chain import record_at
from .models import ActivityRecord, AuditRecord, RefusedAttempt, UnattributedRefusal
from .ocsf import ocsf_event
from .verification import chain_report_line, chain_reports_summary, chain_verify


class KindFilter(admin.SimpleListFilter):
    """The kinds a list can hold: every kind on the trail, its own on a filtered list."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        kinds = getattr(model_admin.model, "KINDS", None) or list(AuditRecord.Kind)
        return [(kind.value, kind.label) for kind in kinds]

    def queryset(self, request, queryset):
        return queryset.filter(kind=self.value()) if self.value() else queryset


class AgentFilter(TextInputFilter):
    title = "agent"
    parameter_name = "agent"
    placeholder = "name or id"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        if not value:
            return queryset
        return queryset.filter(Q(agent_id=value) | Q(agent_name=value))


class UserFilter(TextInputFilter):
    title = "user"
    parameter_name = "user"
    placeholder = "alice@example.com"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(user__iexact=value) if value else queryset


class PolicyVersionFilter(TextInputFilter):
    title = "policy version"
    parameter_name = "policy_version"
    placeholder = "slug or slug v3"

    def queryset(self, request, queryset):
        slug, _, version = (self.value() or "").strip().partition(" v")
        if not slug:
            return queryset
        queryset = queryset.filter(policy=slug)
        return queryset.filter(policy_version=int(version)) if version.isdigit() else queryset


class CodeFilter(TextInputFilter):
    """A refusal code or a decision, typed: the list of codes present would be a DISTINCT
    over the whole trail."""

    title = "code"
    parameter_name = "code"
    placeholder = "policy_denied"

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        return queryset.filter(code=value) if value else queryset


class TeamFilter(admin.SimpleListFilter):
    """The user's teams, read from the teams (the teams present in the trail would be a
    scan of it)."""

    title = "team"
    # The parameter Django's own team filter used, so links to a filtered list still work.
    parameter_name = "team__id__exact"

    def lookups(self, request, model_admin):
        teams = scope_to_teams(Team.objects.order_by("slug"), request)
        return [(str(pk), slug) for pk, slug in teams.values_list("pk", "slug")]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(team_id=int(value)) if value and value.isdigit() else queryset


class DayFilter(admin.DateFieldListFilter):
    """The record's day (the field is named ``at``, which reads badly as "By at")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.title = "day"


#: what ``get_kind_display()`` answers, read once: Django rebuilds it from the field's
#: choices at every call, the costliest cell of a trail row
KIND_LABELS: dict[str, str] = dict(AuditRecord.Kind.choices)


def _team_slug(record: AuditRecord) -> str:
    return record.team.slug


AUDIT_RECORD_COLUMNS: ExportColumns = (
    ("seq", "seq"),
    ("id", "pk"),
    ("at", record_at),
    ("kind", "kind"),
    ("team", _team_slug),
    ("actor", "actor"),
    ("agent_id", "agent_id"),
    ("agent_name", "agent_name"),
    ("user", "user"),
    ("plan_id", "plan_id"),
    ("plan_hash", "plan_hash"),
    ("policy", "policy"),
    ("policy_version", "policy_version"),
    ("code", "code"),
    ("rule", "rule"),
    ("details", "details"),
    ("prev_hash", "prev_hash"),
    ("hash", "hash"),
    # true: retention emptied the record; its hash cannot be recomputed (audit.retention)
    ("redacted", "is_redacted"),
)


@admin.register(AuditRecord)
class AuditRecordAdmin(ExportMixin, ReadOnlyPermissions, PlangateModelAdmin):
    """Every record of the trail, newest first."""

    list_title = "Audit trail"
    # The export buttons, and "Verify chain" on the trail itself.
    change_list_template = "admin/audit/auditrecord/change_list.html"
    list_display = [
        "when",
        "kind_shown",
        "actor",
        "agent_shown",
        "user",
        "plan_link",
        "policy_shown",
        "code",
        "rule_shown",
        "chain",
        "team",
    ]
    list_filter: ClassVar[list[Any]] = [
        KindFilter,
        AgentFilter,
        UserFilter,
        CodeFilter,
        PolicyVersionFilter,
        ("at", DayFilter),
    ]
    exact_searches = (ulid_search("plan_id"), email_search("user__iexact"))
    search_help_text = "Search by plan id or user e-mail (exact)."
    list_select_related = ["team"]
    # The trail's own list never shows a record's details (its page does).
    list_deferred_fields: ClassVar[tuple[str, ...]] = ("details",)
    list_per_page = LONG_LIST_PER_PAGE
    ordering = ["-id"]
    export_columns = AUDIT_RECORD_COLUMNS
    export_filename = "audit-trail"
    # The same filtered list as OCSF events, one per line (audit.ocsf), for a SIEM's import.
    extra_json_exports = {
        "ocsf": ("Export OCSF (JSON Lines)", lambda record: ocsf_event(record, record.team.slug))
    }
    fields: ClassVar[tuple[str, ...]] = (
        "at_exact",
        "kind",
        "team",
        "actor",
        "agent_shown",
        "user",
        "plan_link",
        "plan_hash",
        "policy_shown",
        "code",
        "rule_json",
        "details_json",
        "seq",
        "prev_hash",
        "hash",
        "sealed_at",
    )
    readonly_fields = fields

    def changelist_view(self, request, extra_context=None):
        context = {"title": self.list_title, **(extra_context or {})}
        if self.model is AuditRecord:
            context["verify_chain_url"] = reverse("admin:audit_auditrecord_verify")
        return super().changelist_view(request, context)

    def get_urls(self):
        urls = super().get_urls()
        if self.model is not AuditRecord:
            return urls
        # Before the admin's own: its "<path:object_id>/" would take "verify/".
        view = self.admin_site.admin_view(self.verify_chain_view)
        return [path("verify/", view, name="audit_auditrecord_verify"), *urls]

    def verify_chain_view(self, request: HttpRequest) -> HttpResponse:
        """ "Verify chain": what ``manage.py verify_audit`` says, for the teams the user
        sees; reading the trail is all it needs."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        teams = scope_to_teams(Team.objects.order_by("slug"), request)
        reports = [chain_verify(team=team) for team in teams]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Verify the audit chain",
            "results": [(report, chain_report_line(report)) for report in reports],
            "summary": chain_reports_summary(reports) if reports else "",
            "intact": all(report.intact for report in reports),
            "changelist_url": reverse("admin:audit_auditrecord_changelist"),
        }
        return TemplateResponse(request, "admin/audit/auditrecord/verify.html", context)

    def get_list_filter(self, request: HttpRequest):
        filters = list(super().get_list_filter(request))
        # Like the team column: only for those who see several teams.
        if sees_several_teams(request):
            filters.append(TeamFilter)
        return filters

    @admin.display(description="at", ordering="at")
    def when(self, record: AuditRecord) -> str:
        return format_html(
            '<span class="plangate-nowrap" title="{}">{}</span>',
            record_at(record),
            record.at.strftime("%Y-%m-%d %H:%M:%S"),
        )

    @admin.display(description="at (UTC)")
    def at_exact(self, record: AuditRecord) -> str:
        return record_at(record)

    @admin.display(description="kind", ordering="kind")
    def kind_shown(self, record: AuditRecord) -> str:
        refused = record.kind in RefusedAttempt.KINDS
        return format_html(
            '<span class="plangate-badge {}">{}</span>',
            "bad" if refused else "muted",
            KIND_LABELS.get(record.kind, record.kind),
        )

    @admin.display(description="agent", ordering="agent_name")
    def agent_shown(self, record: AuditRecord) -> str:
        if record.agent_id is None:
            return record.agent_name or "—"
        return format_html(
            '{} <span class="plangate-quiet">#{}</span>', record.agent_name, record.agent_id
        )

    @admin.display(description="plan", ordering="plan_id")
    def plan_link(self, record: AuditRecord) -> str:
        if not record.plan_id:
            return "—"
        # The plan may be gone; the record keeps its id whatever happened to the row.
        url = change_url("plans", "plan", record.plan_id)
        return format_html('<a href="{}"><code>{}</code></a>', url, record.plan_id)

    @admin.display(description="policy version", ordering="policy")
    def policy_shown(self, record: AuditRecord) -> str:
        if not record.policy:
            return "—"
        if record.policy_version is None:
            return record.policy
        return f"{record.policy} v{record.policy_version}"

    @admin.display(description="rule")
    def rule_shown(self, record: AuditRecord) -> str:
        if not record.rule:
            return "—"
        if isinstance(record.rule, dict) and "index" in record.rule:
            description = Truncator(str(record.rule.get("description") or "")).chars(60)
            if record.rule["index"] is None:
                # The policy's default decided: its description names it, and no rule has
                # a number to show.
                return description or "—"
            return format_html("#{} {}", record.rule["index"], description)
        return Truncator(compact_json(record.rule)).chars(60)

    @admin.display(description="chain", ordering="seq")
    def chain(self, record: AuditRecord) -> str:
        if record.seq is None:
            return format_html(
                '<span class="plangate-badge warn" title="{}">unsealed</span>',
                "Not chained yet: the worker seals new records within seconds.",
            )
        return format_html(
            '<span class="plangate-badge ok" title="hash {}">sealed #{}</span>',
            record.hash,
            record.seq,
        )

    @admin.display(description="rule")
    def rule_json(self, record: AuditRecord) -> str:
        if record.rule is None:
            return "—"
        return format_html('<pre class="plangate-pre">{}</pre>', pretty_json(record.rule))

    @admin.display(description="details")
    def details_json(self, record: AuditRecord) -> str:
        return format_html('<pre class="plangate-pre">{}</pre>', pretty_json(record.details))


class FilteredKindsAdmin(AuditRecordAdmin):
    """A list of the records of some kinds only (the proxy model says which)."""

    # Their columns read the details (errors, changes).
    list_deferred_fields = ()

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        kinds = self.model.KINDS  # type: ignore[attr-defined]
        return super().get_queryset(request).filter(kind__in=kinds)


@admin.register(RefusedAttempt)
class RefusedAttemptAdmin(FilteredKindsAdmin):
    """Refused declarations and refreshes: who tried what, and why it was refused."""

    list_title = "Refused attempts"
    list_display = [
        "when",
        "kind_shown",
        "agent_shown",
        "user",
        "code",
        "policy_shown",
        "plan_link",
        "errors",
        "chain",
        "team",
    ]
    export_filename = "refused-attempts"

    @admin.display(description="errors")
    def errors(self, record: AuditRecord) -> str:
        errors = record.details.get("errors") if isinstance(record.details, dict) else None
        if not errors:
            return "—"
        text = "; ".join(
            f"{error.get('path') or '(body)'}: {error.get('detail', '')}"
            if isinstance(error, dict)
            else str(error)
            for error in errors
        )
        return Truncator(text).chars(120)


def _detail(name: str):
    def read(record: AuditRecord) -> object:
        return record.details.get(name) if isinstance(record.details, dict) else None

    return read


@admin.register(ActivityRecord)
class ActivityRecordAdmin(FilteredKindsAdmin):
    """What admins and operators changed, team-wide, with who did it."""

    list_title = "Activity"
    list_display = ["when", "actor", "action", "object_shown", "changes", "chain", "team"]
    list_filter: ClassVar[list[Any]] = [
        UserFilter,
        AgentFilter,
        PolicyVersionFilter,
        ("actor", admin.AllValuesFieldListFilter),
        ("at", DayFilter),
    ]
    exact_searches = (ulid_search("plan_id"), email_search("user__iexact"))
    search_fields = ["=actor"]
    search_help_text = "Search by plan id, user e-mail or actor (exact)."
    export_filename = "activity"
    export_columns = (
        *AUDIT_RECORD_COLUMNS[:6],
        ("object", _detail("object")),
        ("object_id", _detail("id")),
        ("name", _detail("name")),
        ("action", _detail("action")),
        ("changes", _detail("changes")),
        *AUDIT_RECORD_COLUMNS[6:],
    )

    @admin.display(description="action")
    def action(self, record: AuditRecord) -> str:
        return str(_detail("action")(record) or "—")

    @admin.display(description="object")
    def object_shown(self, record: AuditRecord) -> str:
        kind, name = _detail("object")(record), _detail("name")(record)
        return " ".join(str(part) for part in (kind, name) if part) or "—"

    @admin.display(description="changes")
    def changes(self, record: AuditRecord) -> str:
        changes = _detail("changes")(record)
        if not isinstance(changes, dict) or not changes:
            return "—"
        return Truncator(
            "; ".join(f"{field}: {compact_json(values)}" for field, values in changes.items())
        ).chars(160)


@admin.register(UnattributedRefusal)
class UnattributedRefusalAdmin(ExportMixin, ReadOnlyPermissions, PlangateModelAdmin):
    """Refusals no agent could be named for (no, unknown or revoked API key), counted per
    day and code: anyone on the network can send them, so they are not stored one by one.
    They belong to no team; every staff user with the view permission sees the counts."""

    list_display = ["day", "code", "count"]
    list_filter = ["code", ("day", admin.DateFieldListFilter)]
    ordering = ["-day", "code"]
    export_columns = (("day", "day"), ("code", "code"), ("count", "count"))
    export_filename = "unattributed-refusals"
