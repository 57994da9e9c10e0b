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
from .models import TeamWebhook, WebhookDelivery
from .signing import SIGNATURE_HEADER, TIMESTAMP_HEADER
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
