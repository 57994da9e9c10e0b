"""Admin of the approval notifications: the team's webhook (its secret typed in, never
shown again) and every delivery attempt. The approval queue is ``notify.admin_queue``,
imported here so autodiscovery registers it."""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from kernel.admin_base import PlangateModelAdmin, ReadOnlyPermissions
from kernel.admin_forms import ServiceModelForm, ServiceSavedAdmin
from kernel.admin_widgets import datetime_column

from . import admin_queue  # noqa: F401  (registers the approval queue)
from .alerts import alert_rule_save
from .models import (
    Alert,
    AlertDelivery,
    AlertRule,
    SlackUserLink,
    TeamSlack,
    TeamWebhook,
    WebhookDelivery,
)
from .signing import SIGNATURE_HEADER, TIMESTAMP_HEADER
from .slack import team_slack_save
from .webhooks import WEBHOOK_SECRET_MAX_LENGTH, team_webhook_save


class TeamWebhookForm(ServiceModelForm):
    url = forms.URLField(label="URL", max_length=500, assume_scheme="https")
    secret = forms.CharField(
        required=False,
        max_length=WEBHOOK_SECRET_MAX_LENGTH,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            f"Requests carry {SIGNATURE_HEADER}: sha256=HMAC-SHA256(secret, "
            f'"&lt;{TIMESTAMP_HEADER}&gt;.&lt;body&gt;"). Stored encrypted and never shown '
            "again; leave empty to keep the current one."
        ),
    )

    class Meta:
        model = TeamWebhook
        fields = ["team", "url", "active"]

    def save_through_service(self) -> Model:
        data = self.cleaned_data
        team = data["team"] if self.instance._state.adding else self.instance.team
        return team_webhook_save(
            team=team, url=data["url"], secret=data.get("secret", ""), active=data["active"]
        )


@admin.register(TeamWebhook)
class TeamWebhookAdmin(ServiceSavedAdmin, PlangateModelAdmin):
    form = TeamWebhookForm
    list_display = ["url", "team", "active", "last_attempt", "updated"]
    list_select_related = ["team"]
    updated = datetime_column("updated_at", "updated")

    def get_fields(self, request, obj=None):
        return ["team", "url", "secret", "active"] + (["deliveries_link"] if obj else [])

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A webhook stays with its team; the deliveries link is drawn, not edited.
        return ["team", "deliveries_link"] if obj else []

    @admin.display(description="last attempt")
    def last_attempt(self, webhook: TeamWebhook) -> str:
        delivery = webhook.deliveries.order_by("-sent_at", "-id").first()
        return _outcome(delivery) if delivery else "—"

    @admin.display(description="deliveries")
    def deliveries_link(self, webhook: TeamWebhook) -> str:
        url = (
            reverse("admin:notify_webhookdelivery_changelist") + f"?webhook__id__exact={webhook.pk}"
        )
        return format_html('<a href="{}">Every attempt</a>', url)


def _outcome(delivery: WebhookDelivery) -> str:
    if delivery.succeeded:
        return f"delivered ({delivery.status_code})"
    return delivery.error or "failed"


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Every attempt to deliver a notification: what the receiver answered, and when the
    next attempt is due."""

    list_display = [
        "sent",
        "plan_link",
        "event",
        "attempt",
        "outcome",
        "next_retry",
        "delivery_id",
    ]
    list_filter = ["event", "status_code", ("webhook", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["=plan_id", "=delivery_id"]
    search_help_text = "Search by plan id or delivery id (X-Plangate-Delivery)."
    list_select_related = ["webhook__team"]
    show_full_result_count = False
    fields: ClassVar[tuple[str, ...]] = (
        "webhook",
        "plan_link",
        "event",
        "delivery_id",
        "attempt",
        "sent_at",
        "status_code",
        "error",
        "next_retry_at",
    )
    readonly_fields = fields
    sent = datetime_column("sent_at", "sent")
    next_retry = datetime_column("next_retry_at", "next attempt")

    @admin.display(description="plan", ordering="plan_id")
    def plan_link(self, delivery: WebhookDelivery) -> str:
        # By id, without loading the plan: one query for the whole page.
        url = reverse("admin:plans_plan_change", args=[quote(delivery.plan_id)])
        return format_html('<a href="{}"><code>{}</code></a>', url, delivery.plan_id)

    @admin.display(description="outcome", ordering="status_code")
    def outcome(self, delivery: WebhookDelivery) -> str:
        return _outcome(delivery)


# --- alerts -------------------------------------------------------------------------


class AlertRuleForm(ServiceModelForm):
    channels = forms.MultipleChoiceField(
        choices=AlertRule.Channel.choices,
        widget=forms.CheckboxSelectMultiple,
        help_text="Webhook and Slack use the team's webhook and Slack connection.",
    )

    class Meta:
        model = AlertRule
        fields = [
            "team",
            "kind",
            "threshold",
            "window_minutes",
            "wait_minutes",
            "dedup_minutes",
            "channels",
            "email_to",
            "enabled",
        ]

    def save_through_service(self) -> Model:
        rule = self.instance
        for name, value in self.cleaned_data.items():
            setattr(rule, name, list(value) if name == "channels" else value)
        return alert_rule_save(rule=rule)


@admin.register(AlertRule)
class AlertRuleAdmin(ServiceSavedAdmin, PlangateModelAdmin):
    """A team's alert rules, edited by its team admins (scoped to their teams)."""

    form = AlertRuleForm
    list_display = ["kind", "team", "channel_list", "enabled", "alerts_link"]
    list_filter = ["kind", "enabled"]
    list_select_related = ["team"]

    @admin.display(description="channels")
    def channel_list(self, rule: AlertRule) -> str:
        return ", ".join(rule.channels)

    @admin.display(description="alerts")
    def alerts_link(self, rule: AlertRule) -> str:
        url = reverse("admin:notify_alert_changelist") + f"?rule__id__exact={rule.pk}"
        return format_html('<a href="{}">Alerts</a>', url)


class AlertDeliveryInline(admin.TabularInline):
    model = AlertDelivery
    fields: ClassVar[tuple[str, ...]] = (
        "channel",
        "attempt",
        "sent_at",
        "status_code",
        "error",
        "next_retry_at",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ["sent_at", "id"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Alert)
class AlertAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Every alert raised, how often it was seen within its dedup window, and each
    attempt to deliver it."""

    list_display = ["first", "kind", "summary", "count", "delivery_status", "explained"]
    list_filter = ["kind", ("rule", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["=subject"]
    search_help_text = "Search by subject: a plan id, a member's e-mail, signing-keys."
    list_select_related = ["team"]
    fields: ClassVar[tuple[str, ...]] = (
        "team",
        "rule",
        "kind",
        "subject",
        "summary",
        "explained",
        "count",
        "first_at",
        "last_at",
        "details",
    )
    readonly_fields = fields
    inlines = [AlertDeliveryInline]
    first = datetime_column("first_at", "first seen")

    @admin.display(description="page that explains it")
    def explained(self, alert: Alert) -> str:
        return format_html('<a href="{}">Open</a>', alert.url)

    @admin.display(description="deliveries")
    def delivery_status(self, alert: Alert) -> str:
        latest: dict[str, AlertDelivery] = {}
        for delivery in alert.deliveries.order_by("sent_at", "id"):
            latest[delivery.delivery_id.hex] = delivery
        if not latest:
            return "—"
        return "; ".join(
            f"{d.channel}: {_alert_outcome(d)} (attempt {d.attempt})" for d in latest.values()
        )


def _alert_outcome(delivery: AlertDelivery) -> str:
    if delivery.succeeded:
        return "delivered"
    if delivery.next_retry_at is not None:
        return f"{delivery.error}, retrying"
    return delivery.error or "failed"


@admin.register(AlertDelivery)
class AlertDeliveryAdmin(ReadOnlyPermissions, PlangateModelAdmin):
    """Every attempt to deliver an alert or a Slack approval request."""

    list_display = ["sent", "channel", "alert", "plan_id", "attempt", "outcome", "next_retry"]
    list_filter = ["channel", "status_code"]
    search_fields = ["=plan_id", "=delivery_id"]
    list_select_related = ["alert", "team"]
    show_full_result_count = False
    fields: ClassVar[tuple[str, ...]] = (
        "team",
        "alert",
        "plan_id",
        "channel",
        "delivery_id",
        "attempt",
        "sent_at",
        "status_code",
        "error",
        "next_retry_at",
    )
    readonly_fields = fields
    sent = datetime_column("sent_at", "sent")
    next_retry = datetime_column("next_retry_at", "next attempt")

    @admin.display(description="outcome", ordering="status_code")
    def outcome(self, delivery: AlertDelivery) -> str:
        return _alert_outcome(delivery)


class TeamSlackForm(ServiceModelForm):
    webhook_url = forms.CharField(
        label="Incoming webhook URL",
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=(
            "https://hooks.slack.com/services/... from your Slack app's Incoming Webhooks."
            " Stored encrypted and never shown again; leave empty to keep the current one."
        ),
    )

    class Meta:
        model = TeamSlack
        fields = ["team", "active"]

    def save_through_service(self) -> Model:
        data = self.cleaned_data
        team = data["team"] if self.instance._state.adding else self.instance.team
        return team_slack_save(
            team=team, webhook_url=data.get("webhook_url", ""), active=data["active"]
        )


@admin.register(TeamSlack)
class TeamSlackAdmin(ServiceSavedAdmin, PlangateModelAdmin):
    form = TeamSlackForm
    list_display = ["team", "active", "updated"]
    list_select_related = ["team"]
    updated = datetime_column("updated_at", "updated")

    def get_fields(self, request, obj=None):
        return ["team", "webhook_url", "active"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["team"] if obj else []


@admin.register(SlackUserLink)
class SlackUserLinkAdmin(PlangateModelAdmin):
    """Which console user decides when a Slack user presses Approve or Deny."""

    list_display = ["slack_user_id", "user", "team"]
    list_select_related = ["team", "user"]
    search_fields = ["=slack_user_id"]
    raw_id_fields = ["user"]
    fields = ["team", "slack_user_id", "user"]
