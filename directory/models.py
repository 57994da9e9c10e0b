"""What the SCIM service provider keeps beside the members and groups it maps: each team's
SCIM tokens, and per member and group the identity provider's own view of it (its
``externalId``, its ``userName``, the attributes Plangate has no column for)."""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone

from kernel.credentials import CredentialFormat
from kernel.models import TeamToken

SCIM_TOKEN_FORMAT = CredentialFormat(prefix="pgs_", purpose=b"plangate.scim-token.v1")


class ScimToken(TeamToken):
    """An identity provider's bearer credential for one team's ``/scim/v2``: it provisions
    that team's members and member groups, and nothing else."""

    credential_format = SCIM_TOKEN_FORMAT

    class Meta(TeamToken.Meta):
        verbose_name = "SCIM token"


class ScimUser(models.Model):
    """The identity provider's view of a member. A member with none is still a SCIM user
    (one typed into the console is found by its ``userName``, its e-mail); ``deleted`` is
    a member the provider deleted: disabled, kept for its plans and trail, and no longer
    served until the provider creates it again."""

    team_path: ClassVar[str] = "member__team"

    member = models.OneToOneField(
        "members.Member", on_delete=models.CASCADE, primary_key=True, related_name="scim"
    )
    user_name = models.CharField(max_length=254, blank=True)
    external_id = models.CharField(max_length=254, blank=True)
    #: the attributes Plangate has no column for, as the provider last sent them
    attributes = models.JSONField(default=dict, blank=True)
    deleted = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "SCIM user"

    def __str__(self) -> str:
        return self.user_name or str(self.member_id)


class ScimGroup(models.Model):
    """The identity provider's view of a member group."""

    team_path: ClassVar[str] = "group__team"

    group = models.OneToOneField(
        "teams.Group", on_delete=models.CASCADE, primary_key=True, related_name="scim"
    )
    external_id = models.CharField(max_length=254, blank=True)
    #: how the provider last named each member (``members[].display``), by user id
    member_displays = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "SCIM group"

    def __str__(self) -> str:
        return str(self.group_id)
