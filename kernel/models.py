"""The kernel's one table: rate-limit counters that every process shares
(kernel/ratelimit.py)."""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone

from .credentials import CredentialFormat


class RateLimitWindow(models.Model):
    """Hits of one client against one limit in one fixed window.

    ``bucket`` names all three (``api_key:<lookup id>:<window number>``), so the counter is a
    single row found by its primary key and incremented by one upsert. ``window_end`` (Unix
    seconds) tells the sweep which rows are over.
    """

    bucket = models.CharField(primary_key=True, max_length=200)
    window_end = models.BigIntegerField(db_index=True)
    hits = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.bucket}: {self.hits}"


class TeamTokenQuerySet(models.QuerySet):
    def usable(self) -> TeamTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class TeamToken(models.Model):
    """A team's bearer credential kept as a keyed hash (kernel.credentials), shown once and
    revocable: audit tokens, admin API tokens, SCIM tokens. A concrete model names its
    ``credential_format``. ``is_authenticated``: DRF's IsAuthenticated asks the
    authenticated "user", which on these doors is the token."""

    team_path: ClassVar[str] = "team"
    credential_format: ClassVar[CredentialFormat]

    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200, blank=True)
    lookup_id = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.CharField(max_length=254, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = TeamTokenQuerySet.as_manager()

    is_authenticated = True

    class Meta:
        abstract = True
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.prefix

    @property
    def prefix(self) -> str:
        """The visible, non-secret start of the token, enough to recognise it."""
        return self.credential_format.visible_prefix(self.lookup_id)

    def is_revoked(self) -> bool:
        return self.revoked_at is not None
