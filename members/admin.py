"""Admin for the team: teams and members, and Django's users and permission groups with
their changes recorded in the activity log.

Agents and their API keys, roles and groups are registered by ``policies`` (its
``admin_agents`` and ``admin_references``): their pages show the policies that name them,
and ``members`` does not import ``policies`` (docs/decisions/0062).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin as AuthGroupAdmin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group as PermissionGroup
from django.db import transaction
from django.db.models import Count
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from audit.admin_changes import RecordedChangesAdmin
from kernel.admin_base import PlangateModelAdmin
from kernel.admin_forms import ServiceSavedAdmin
from kernel.admin_widgets import admin_link, datetime_column
from teams.models import REVOCATION_BOUND_DEFAULT, Team, running_agents_stop_within

from .forms import MemberForm
from .models import Member
from .services import member_disable

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class TeamTotals(TypedDict):
    """What TeamAdmin.get_queryset annotates each team with."""

    member_total: int
    agent_total: int


MEMBERS_SHOWN = 50


def _members_summary(queryset, changelist_filter: str) -> str:
    """Up to MEMBERS_SHOWN linked e-mails, and a link to all of them in the member list."""
    total = queryset.count()
    if not total:
        return "No members."
    shown = format_html_join(
        ", ",
        "{}",
        (
            (admin_link(member, member.email),)
            for member in queryset.order_by("email")[:MEMBERS_SHOWN]
        ),
    )
    url = f"{reverse('admin:members_member_changelist')}?{changelist_filter}"
    return format_html(
        '{} <br><a href="{}">See all {} in the member list</a>',
        shown,
        url,
        total,
    )


# --- teams ---------------------------------------------------------------------------------


class RevocationBoundField(forms.IntegerField):
    """The team's bound: left out or empty, it is the default (a form that predates the
    setting, say), never a missing value."""

    default = REVOCATION_BOUND_DEFAULT

    def __init__(self, **kwargs) -> None:
        super().__init__(**{**kwargs, "required": False})

    def clean(self, value):
        cleaned = super().clean(value)
        return self.default if cleaned is None else cleaned


class ApprovalWindowField(RevocationBoundField):
    """The team's approval window: left out or empty, it is the default, as the bound."""

    default = Team._meta.get_field("approval_window_seconds").get_default()


class RetentionDaysField(RevocationBoundField):
    """The team's retention period: left out or empty, it is the default, as the bound."""

    default = Team._meta.get_field("retention_days").get_default()


@admin.register(Team)
class TeamAdmin(RecordedChangesAdmin, PlangateModelAdmin):
    list_display = ["name", "slug", "member_count", "agent_count", "log_call_arguments"]
    search_fields = ["name", "slug"]
    filter_horizontal = ["staff"]
    ordering = ["slug"]
    fields = [
        "name",
        "slug",
        "log_call_arguments",
        "revocation_bound_seconds",
        "require_token_binding",
        "approval_window_seconds",
        "retention_days",
        "staff",
        "created_at",
    ]

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                member_total=Count("members", distinct=True),
                agent_total=Count("agents", distinct=True),
            )
        )

    def get_readonly_fields(self, request, obj=None):
        readonly = ["created_at"]
        if obj is not None:
            readonly.append("slug")
        if not request.user.is_superuser:
            # Who manages a team is the superuser's call: a team admin adding staff would
            # hand out access.
            readonly.append("staff")
        return readonly

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "revocation_bound_seconds":
            kwargs["form_class"] = RevocationBoundField
        if db_field.name == "approval_window_seconds":
            kwargs["form_class"] = ApprovalWindowField
        if db_field.name == "retention_days":
            kwargs["form_class"] = RetentionDaysField
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "staff":
            kwargs["queryset"] = get_user_model().objects.filter(is_staff=True)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    @admin.display(description="members", ordering="member_total")
    def member_count(self, team: WithAnnotations[Team, TeamTotals]) -> int:
        return team.member_total

    @admin.display(description="agents", ordering="agent_total")
    def agent_count(self, team: WithAnnotations[Team, TeamTotals]) -> int:
        return team.agent_total


# --- members, roles, groups ----------------------------------------------------------------


@admin.register(Member)
class MemberAdmin(ServiceSavedAdmin, PlangateModelAdmin):
    form = MemberForm
    list_display = ["email", "name", "team", "role", "group_list", "is_active", "created"]
    list_filter = [
        ("role", admin.RelatedOnlyFieldListFilter),
        ("groups", admin.RelatedOnlyFieldListFilter),
        "is_active",
        ("team", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["email", "name"]
    list_select_related = ["team", "role"]
    autocomplete_fields = ["role", "groups"]
    readonly_fields = ["created_at", "plans_link"]
    actions = ["disable_members"]
    show_full_result_count = False
    created = datetime_column("created_at", "created")

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("groups")

    def get_fields(self, request, obj=None):
        fields = ["team", "email", "name", "role", "groups", "is_active"]
        return fields + (["created_at", "plans_link"] if obj else [])

    @admin.display(description="groups")
    def group_list(self, member: Member) -> str:
        return ", ".join(member.group_names()) or "—"

    @admin.display(description="plans")
    def plans_link(self, member: Member) -> str:
        url = reverse("admin:plans_plan_changelist")
        return format_html(
            '<a href="{}?member_email={}">Plans issued for {}</a>', url, member.email, member.email
        )

    @admin.action(description="Disable selected members", permissions=["change"])
    def disable_members(self, request: HttpRequest, queryset):
        disabled = []
        bounds = []
        with transaction.atomic():
            for member in queryset.filter(is_active=True).select_related("team"):
                member_disable(team=member.team, email=member.email)
                stop = running_agents_stop_within([member.team.revocation_bound_seconds])
                self.log_change(
                    request,
                    member,
                    "Disabled by the “Disable selected members” action: no plan or refresh "
                    f"is signed for them any more, and {stop} (user_disabled).",
                )
                disabled.append(member.email)
                bounds.append(member.team.revocation_bound_seconds)
        if disabled:
            self.message_user(
                request,
                f"Disabled {len(disabled)} member(s): {', '.join(disabled)}. Their "
                f"{running_agents_stop_within(bounds)}.",
            )
        else:
            self.message_user(request, "The selected members were already disabled.", messages.INFO)


class MembersShownAdmin(RecordedChangesAdmin, PlangateModelAdmin):
    """Roles and groups: their members listed on their page, counted in the list. Saved
    without a service, so the admin records their changes (``RecordedChangesAdmin``)."""

    list_display = ["name", "team", "description", "member_count"]
    list_filter = [("team", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "description"]
    list_select_related = ["team"]
    readonly_fields = ["member_list"]
    ordering = ["team", "name"]
    member_filter = ""

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_total=Count("members", distinct=True))

    def get_fields(self, request, obj=None):
        return ["team", "name", "description"] + (["member_list"] if obj else [])

    def get_readonly_fields(self, request, obj=None):
        # Moving a role or group to another team would leave its members in the old one.
        return ["member_list"] + (["team"] if obj else [])

    @admin.display(description="members", ordering="member_total")
    def member_count(self, obj) -> int:
        return obj.member_total

    @admin.display(description="members")
    def member_list(self, obj) -> str:
        return _members_summary(obj.members.all(), f"{self.member_filter}={obj.pk}")


# --- Django's users and permission groups --------------------------------------------------


class RecordedUserAdmin(RecordedChangesAdmin, UserAdmin):
    """Django's user admin, whose changes (rights, staff status, a new password: as
    changed, never its value) are recorded in the log of each team the user manages."""

    def recorded_team_ids(self, obj) -> list[int]:
        return list(obj.plangate_teams.order_by("pk").values_list("pk", flat=True))


class RecordedPermissionGroupAdmin(RecordedChangesAdmin, AuthGroupAdmin):
    """Django's permission groups ("Team admins", "Auditors", ...) grant rights in every
    team, so a change to one is recorded in every team's log."""

    def recorded_team_ids(self, obj) -> list[int]:
        return list(Team.objects.order_by("pk").values_list("pk", flat=True))


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), RecordedUserAdmin)
admin.site.unregister(PermissionGroup)
admin.site.register(PermissionGroup, RecordedPermissionGroupAdmin)
