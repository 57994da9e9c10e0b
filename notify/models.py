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


class WebhookDelivery(models.Model):
    """One attempt (``attempt`` 1, 2, ...) of one notification (``delivery_id``, the same
    across its attempts and sent as ``X-Plangate-Delivery`` so a receiver can drop repeats)."""

    team_path: ClassVar[str] = "webhook__team"

    webhook = models.ForeignKey(TeamWebhook, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.UUIDField(default=uuid.uuid4, db_index=True)
    plan_id = models.CharField(max_length=26, db_index=True)
    event = models.CharField(max_length=64)
    attempt = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    sent_at = models.DateTimeField(default=timezone.now)
    next_retry_at = models.DateTimeField(
        null=True, blank=True, help_text="when the next attempt is due; empty: no more"
    )

    class Meta:
        ordering = ["-sent_at", "-id"]
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
