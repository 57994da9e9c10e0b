"""Admin tokens: bearer credentials for one team's admin API (``/v1/admin/...``), read-only
or read-write, shown once and stored as a keyed hash (``kernel.credentials``, the format API
keys and audit tokens use too)."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.utils import timezone

from kernel.credentials import CredentialFormat

ADMIN_TOKEN_FORMAT = CredentialFormat(prefix="pgadm_", purpose=b"plangate.admin-token.v1")


class AdminTokenQuerySet(models.QuerySet["AdminToken"]):
    def usable(self) -> AdminTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class AdminToken(models.Model):
    """A team's admin API credential. ``can_write`` False: GETs only (and the previews and
    simulations, which write nothing). ``user`` is the console user the token decides
    approvals as (the queue's rules apply to that person); a token without one cannot decide.
    """

    team_path: ClassVar[str] = "team"

    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=200, blank=True)
    can_write = models.BooleanField("read and write", default=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The person the token decides approvals as; none: it cannot decide.",
    )
    lookup_id = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.CharField(max_length=254, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = AdminTokenQuerySet.as_manager()

    # DRF's IsAuthenticated asks the authenticated "user": on the admin API, the token.
    is_authenticated = True

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.prefix

    @property
    def prefix(self) -> str:
        """The visible, non-secret start of the token, enough to recognise it."""
        return ADMIN_TOKEN_FORMAT.visible_prefix(self.lookup_id)

    @property
    def scope(self) -> str:
        return "write" if self.can_write else "read"

    def is_revoked(self) -> bool:
        return self.revoked_at is not None
