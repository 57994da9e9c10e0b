"""The team, and the roles and groups its members hold and its policies name.

The bottom app of the domain: members, policies, plans and the audit trail all belong to a
team, and this app imports none of them (docs/decisions/0062). Its tables keep the names
they had when these models lived in ``members`` (``members_team``, ``members_role``,
``members_group``), so moving them changed no table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

#: How long after a revocation or a disabling a running agent may go on (seconds): a team's
#: ``revocation_bound_seconds`` (docs/decisions/0032).
REVOCATION_BOUND_DEFAULT = 15
REVOCATION_BOUND_MIN = 1
REVOCATION_BOUND_MAX = 60


#: How long a team's guard decisions and refused attempts are kept (days): a team's
#: ``retention_days`` (docs/decisions/0044).
RETENTION_DAYS_DEFAULT = 400
RETENTION_DAYS_MIN = 1
RETENTION_DAYS_MAX = 3650


def running_agents_stop_within(bounds: Iterable[int | None]) -> str:
    """The admin's words for when a revocation or a disabling reaches running agents, from
    the bounds of the teams it touches (the longest; the default when none is known)."""
    longest = max((bound for bound in bounds if bound is not None), default=None)
    return f"running agents stop within {longest or REVOCATION_BOUND_DEFAULT} s"


class Team(models.Model):
    #: how a row reaches its team, read by the admin's scoping
    #: (kernel.admin_scoping.scope_to_teams); "" is the team itself
    team_path: ClassVar[str] = ""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    log_call_arguments = models.BooleanField(
        default=False,
        help_text="Guards report call arguments in full instead of a digest.",
    )
    revocation_bound_seconds = models.PositiveSmallIntegerField(
        "revocation bound (seconds)",
        default=REVOCATION_BOUND_DEFAULT,
        validators=[
            MinValueValidator(REVOCATION_BOUND_MIN),
            MaxValueValidator(REVOCATION_BOUND_MAX),
        ],
        help_text=(
            "Running agents stop within this many seconds of a plan's revocation, a member's"
            " or agent's disabling, or a signing key's revocation: their guards poll the"
            " status feed twice as often."
        ),
    )
    approval_window_seconds = models.PositiveIntegerField(
        "approval window (seconds)",
        default=3600,
        validators=[MinValueValidator(60), MaxValueValidator(7 * 24 * 3600)],
        help_text=(
            "How long a plan that a policy's review rule sent to a person waits for a"
            " decision; nobody deciding within it expires the request."
        ),
    )
    retention_days = models.PositiveIntegerField(
        "retention (days)",
        default=RETENTION_DAYS_DEFAULT,
        validators=[MinValueValidator(RETENTION_DAYS_MIN), MaxValueValidator(RETENTION_DAYS_MAX)],
        help_text=(
            "Guard decisions and refused attempts older than this many days are removed by"
            " the worker, after the retention export hook has had them; the audit trail"
            " keeps their place in its chain and records each removal."
        ),
    )
    require_token_binding = models.BooleanField(
        default=False,
        help_text=(
            "Every plan's token is bound to its guard's key (DPoP, RFC 9449): a declaration"
            " without a proof of that key is refused, and a copied token and API key are"
            " useless from another process."
        ),
    )
    #: the next index handed out in the team's token status list (plans.status_list)
    status_list_next = models.PositiveIntegerField(default=0, editable=False)
    staff = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="plangate_teams",
        help_text="Admin users who manage this team in the console.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "members_team"
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=Q(revocation_bound_seconds__gte=REVOCATION_BOUND_MIN)
                & Q(revocation_bound_seconds__lte=REVOCATION_BOUND_MAX),
                name="team_revocation_bound_range",
            ),
            models.CheckConstraint(
                condition=Q(retention_days__gte=RETENTION_DAYS_MIN)
                & Q(retention_days__lte=RETENTION_DAYS_MAX),
                name="team_retention_days_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.slug


class Role(models.Model):
    team_path: ClassVar[str] = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="roles")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        db_table = "members_role"
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="unique_role_name_per_team"),
        ]

    def __str__(self) -> str:
        return self.name


class Group(models.Model):
    team_path: ClassVar[str] = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        db_table = "members_group"
        ordering = ["team", "name"]
        verbose_name = "member group"
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="unique_group_name_per_team"),
        ]

    def __str__(self) -> str:
        return self.name
