"""Admin tokens: bearer credentials for one team's admin API (``/v1/admin/...``), read-only
or read-write, shown once and stored as a keyed hash (``kernel.credentials``, the format API
keys and audit tokens use too)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from kernel.credentials import CredentialFormat
from kernel.models import TeamToken

ADMIN_TOKEN_FORMAT = CredentialFormat(prefix="pgadm_", purpose=b"plangate.admin-token.v1")


class AdminToken(TeamToken):
    """A team's admin API credential. ``can_write`` False: GETs only (and the previews and
    simulations, which write nothing). ``user`` is the console user the token decides
    approvals as (the queue's rules apply to that person); a token without one cannot decide.
    """

    credential_format = ADMIN_TOKEN_FORMAT

    can_write = models.BooleanField("read and write", default=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The person the token decides approvals as; none: it cannot decide.",
    )

    class Meta(TeamToken.Meta):
        pass

    @property
    def scope(self) -> str:
        return "write" if self.can_write else "read"
