"""Who is told that a plan awaits a person's approval, and how each telling went.

* ``TeamWebhook``: a team's one webhook (URL, secret, on/off). The secret must be readable
  to sign each request, so it is stored as a Fernet token under KEY_ENCRYPTION_KEY (the
  signing keys' machinery, ``plans.keys.encryption``): a database dump alone reveals none.
* ``WebhookDelivery``: one row per attempt to deliver one notification, so the admin shows
  every try, its answer and when the next one is due.
* ``ApprovalRequest``: the approval queue, a proxy of ``plans.Plan`` in this app, which
  carries the permission to decide (``notify.decide_approval``; docs/decisions/0037).
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from plans.models import Plan


class TeamWebhook(models.Model):
    team_path: ClassVar[str] = "team"

    team = models.OneToOneField(
        "teams.Team", on_delete=models.CASCADE, related_name="approval_webhook"
    )
    url = models.URLField(
        "URL", max_length=500, help_text="Receives a signed POST when a plan awaits approval."
    )
    secret_encrypted = models.TextField(
        editable=False, help_text="Fernet token of the signing secret (KEY_ENCRYPTION_KEY)"
    )
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "approval webhook"

    def __str__(self) -> str:
        return self.url


class DeliveryAttempt(models.Model):
    """One attempt (``attempt`` 1, 2, ...) of one delivery (``delivery_id``, the same across
    its attempts): what was answered, what failed, when the next attempt is due. Approval
    webhooks and alerts are retried on the one schedule (notify.webhooks.backoff_seconds)."""

    delivery_id = models.UUIDField(default=uuid.uuid4, db_index=True)
    attempt = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    sent_at = models.DateTimeField(default=timezone.now)
    next_retry_at = models.DateTimeField(
        null=True, blank=True, help_text="when the next attempt is due; empty: no more"
    )

    class Meta:
        abstract = True
        ordering = ["-sent_at", "-id"]


class WebhookDelivery(DeliveryAttempt):
    """One attempt (``attempt`` 1, 2, ...) of one notification (``delivery_id``, the same
    across its attempts and sent as ``X-Plangate-Delivery`` so a receiver can drop repeats)."""

    team_path: ClassVar[str] = "webhook__team"

    webhook = models.ForeignKey(TeamWebhook, on_delete=models.CASCADE, related_name="deliveries")
    plan_id = models.CharField(max_length=26, db_index=True)
    event = models.CharField(max_length=64)

    class Meta(DeliveryAttempt.Meta):
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["delivery_id", "attempt"], name="unique_webhook_delivery_attempt"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.plan_id} #{self.attempt}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class ApprovalRequest(Plan):
    """The plans that await a person's approval, as the admin's approval queue. A proxy:
    the same rows as ``plans.Plan``; its permissions are this app's, so granting the queue
    needs no migration in ``plans``."""

    class Meta:
        proxy = True
        verbose_name = "approval request"
        verbose_name_plural = "approval queue"
        permissions = [("decide_approval", "Can approve or deny plans awaiting approval")]


class AlertRule(models.Model):
    """One thing a team wants to be told about (``kind``), how much of it counts
    (``threshold`` within ``window_minutes``, or ``wait_minutes``), and how it is told
    (``channels``). docs/alerts.md says what each kind watches."""

    team_path: ClassVar[str] = "team"

    class Kind(models.TextChoices):
        BLOCKED_CALLS = "blocked_calls", "blocked calls of one plan over N within a window"
        DISABLED_MEMBER_DECLARATION = (
            "disabled_member_declaration",
            "a plan declared for a disabled member",
        )
        TOKEN_REFUSED = "token_refused", "a guard refused its plan's token"
        DECISIONS_LOST = "decisions_lost", "a guard's decisions were lost"
        KEY_ROTATION_FAILED = "key_rotation_failed", "signing key rotation failed"
        APPROVAL_WAITING = "approval_waiting", "an approval waits longer than M minutes"

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "the team's signed webhook"
        EMAIL = "email", "e-mail"
        SLACK = "slack", "the team's Slack"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="alert_rules")
    kind = models.CharField(max_length=40, choices=Kind.choices)
    threshold = models.PositiveIntegerField(
        default=10, help_text="blocked calls: alert when one plan has more than this many"
    )
    window_minutes = models.PositiveIntegerField(
        default=10, help_text="blocked calls: counted over this many minutes"
    )
    wait_minutes = models.PositiveIntegerField(
        default=30, help_text="approval waiting: alert once a plan has waited this long"
    )
    dedup_minutes = models.PositiveIntegerField(
        default=60,
        help_text="the same rule and subject within this many minutes make one alert, counted",
    )
    channels = models.JSONField(default=list, help_text="webhook, email and/or slack")
    email_to = models.CharField(
        "e-mail to",
        max_length=1000,
        blank=True,
        help_text="comma-separated addresses, for the e-mail channel",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team", "kind", "id"]
        verbose_name = "alert rule"

    def __str__(self) -> str:
        return self.get_kind_display()

    def email_recipients(self) -> list[str]:
        return [address.strip() for address in self.email_to.split(",") if address.strip()]


class Alert(models.Model):
    """One alert: a rule fired for a subject (a plan, a member, the signing keys). Facts
    for the same rule and subject within the rule's dedup window add to ``count``."""

    team_path: ClassVar[str] = "team"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="alerts")
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=40, choices=AlertRule.Kind.choices)
    #: what it is about: a plan id, a member's e-mail, "signing-keys"
    subject = models.CharField(max_length=254)
    summary = models.CharField(max_length=500)
    #: the console page that explains it
    url = models.URLField("URL", max_length=500)
    details = models.JSONField(default=dict, blank=True)
    count = models.PositiveIntegerField(default=1)
    first_at = models.DateTimeField(default=timezone.now)
    last_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-first_at", "-id"]
        indexes = [models.Index(fields=["rule", "subject", "-first_at"], name="alert_dedup")]

    def __str__(self) -> str:
        return self.summary


class AlertDelivery(DeliveryAttempt):
    """One attempt (``attempt`` 1, 2, ...) to deliver one message on one channel: an
    alert, or (``alert`` empty, ``plan_id`` set) an approval request posted to Slack.
    ``delivery_id`` is the same across the attempts of one message."""

    team_path: ClassVar[str] = "team"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    alert = models.ForeignKey(
        Alert, on_delete=models.CASCADE, related_name="deliveries", null=True, blank=True
    )
    plan_id = models.CharField(max_length=26, blank=True)
    channel = models.CharField(max_length=16, choices=AlertRule.Channel.choices)

    class Meta(DeliveryAttempt.Meta):
        verbose_name_plural = "alert deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["delivery_id", "attempt"], name="unique_alert_delivery_attempt"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} #{self.attempt}"

    @property
    def succeeded(self) -> bool:
        return not self.error and (self.status_code is None or 200 <= self.status_code < 300)


class TeamSlack(models.Model):
    """A team's Slack: the incoming webhook URL alerts and approval requests are posted to
    (a bearer secret: stored as a Fernet token under KEY_ENCRYPTION_KEY, as webhook
    secrets are)."""

    team_path: ClassVar[str] = "team"

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, related_name="slack")
    webhook_url_encrypted = models.TextField(editable=False)
    active = models.BooleanField(default=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "Slack connection"

    def __str__(self) -> str:
        return f"Slack of {self.team_id}"


class SlackUserLink(models.Model):
    """Which console user a Slack user is, for deciding approvals from Slack: Slack's
    interaction payload names the Slack user by id only (docs/alerts.md)."""

    team_path: ClassVar[str] = "team"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    slack_user_id = models.CharField(
        "Slack user id", max_length=32, help_text="U... (Slack: profile, Copy member ID)"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_links"
    )

    class Meta:
        verbose_name = "Slack user"
        constraints = [
            models.UniqueConstraint(
                fields=["team", "slack_user_id"], name="unique_slack_user_per_team"
            ),
        ]

    def __str__(self) -> str:
        return self.slack_user_id


class AlertCursor(models.Model):
    """How far the alert scan has read a team's audit trail: the last sealed ``seq`` read
    (the sealer numbers each team's records in order, so none is skipped)."""

    team_path: ClassVar[str] = "team"

    team = models.OneToOneField("teams.Team", on_delete=models.CASCADE, related_name="+")
    last_seq = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.team_id} at {self.last_seq}"
