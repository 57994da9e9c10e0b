"""Who belongs to a team: members, agents and their API keys (the team, its roles and groups
are in ``teams``)."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal, Self

from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone
from ulid import ULID

from kernel.credentials import CredentialFormat
from teams.models import Group, Role, Team

#: ``pg_<lookup id>_<secret>``: the shown-once, hashed format audit tokens share
#: (kernel.credentials); the label keys the hash, so changing it voids every key.
API_KEY_FORMAT = CredentialFormat(prefix="pg_", purpose=b"plangate.api-key.v1")


def new_ulid() -> str:
    return str(ULID())


def email_normalize(email: str) -> str:
    """The form a member's e-mail is stored and matched in: trimmed and lowercased, so a
    plan's user matches case-insensitively."""
    return email.strip().lower()


def email_case_lookalike(email: str) -> str | None:
    """The first character of ``email`` that lowercasing turns into another character's
    small letter rather than its own (U+212A KELVIN SIGN into ``k``, U+212B ANGSTROM SIGN
    into ``å``), else None: matched through ``email_normalize`` alone, such a text would
    pass for a member's address it only looks like. Six characters in all of Unicode do
    (tests/members/test_member_email.py walks every one); a letter's capital never does.
    """
    for character in email:
        small = character.lower()
        if small != character and small.upper() != character.upper():
            return character
    return None


class MemberQuerySet(models.QuerySet["Member"]):
    def for_email(self, team: Team | int, email: str) -> Self:
        """The team's member with this e-mail (in any case), as a queryset: add
        ``select_for_update()`` or ``select_related()``, then ``get()`` or ``first()``."""
        # LOWER(email) is the expression the (team, lower(email)) unique index holds, so the
        # lookup is an index probe on SQLite and PostgreSQL alike (iexact is not).
        team_id = team.pk if isinstance(team, Team) else team
        return self.alias(email_lower=Lower("email")).filter(
            team_id=team_id, email_lower=email_normalize(email)
        )


class Member(models.Model):
    """A person an agent may act for. E-mail is stored lowercased: matching is case-insensitive."""

    team_path: ClassVar[str] = "team"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="members")
    email = models.EmailField(max_length=254)
    name = models.CharField(max_length=200, blank=True)
    role = models.ForeignKey(
        Role, on_delete=models.SET_NULL, null=True, blank=True, related_name="members"
    )
    groups = models.ManyToManyField(Group, blank=True, related_name="members")
    is_active = models.BooleanField("active", default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MemberQuerySet.as_manager()

    class Meta:
        ordering = ["team", "email"]
        constraints = [
            models.UniqueConstraint("team", Lower("email"), name="unique_member_email_per_team"),
        ]

    def __str__(self) -> str:
        return self.email

    def group_names(self) -> list[str]:
        return sorted(group.name for group in self.groups.all())


class Agent(models.Model):
    team_path: ClassVar[str] = "team"
    # DRF's IsAuthenticated reads this from request.user; an Agent is only ever there
    # because ApiKeyAuthentication put it there, as Django's User answers True.
    is_authenticated: ClassVar[bool] = True

    id = models.CharField(primary_key=True, max_length=26, default=new_ulid, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=200)
    is_active = models.BooleanField("active", default=True)
    policy = models.ForeignKey("policies.Policy", on_delete=models.PROTECT, related_name="agents")
    accepts_delegations = models.BooleanField(
        default=False,
        help_text=(
            "Other agents of the team may delegate part of their plans to this agent"
            " (child plans); an agent may always delegate to itself."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="unique_agent_name_per_team"),
        ]

    def __str__(self) -> str:
        return self.name


ApiKeyState = Literal["active", "revoked", "expired"]


class ApiKeyQuerySet(models.QuerySet["ApiKey"]):
    """The states of a key, as filters. ``ApiKey.state`` says the same of one loaded row."""

    @staticmethod
    def usable_condition(now: datetime, *, through: str = "") -> Q:
        """Not revoked and not expired at ``now``; ``through`` reaches the keys from another
        model (``"api_keys"`` from an agent), for a filtered aggregate."""
        prefix = f"{through}__" if through else ""
        return Q(**{f"{prefix}revoked_at__isnull": True}) & (
            Q(**{f"{prefix}expires_at__isnull": True}) | Q(**{f"{prefix}expires_at__gt": now})
        )

    def usable(self, now: datetime) -> Self:
        return self.filter(self.usable_condition(now))

    def revoked(self) -> Self:
        return self.filter(revoked_at__isnull=False)

    def expired(self, now: datetime) -> Self:
        # A revoked key is "revoked" whatever its expiry: the states do not overlap.
        return self.filter(revoked_at__isnull=True, expires_at__lte=now)


class ApiKey(models.Model):
    """An agent's credential. Only a keyed hash of the secret is kept; see members.services."""

    team_path: ClassVar[str] = "agent__team"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    lookup_id = models.CharField(max_length=16, unique=True, editable=False)
    secret_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return self.prefix

    @property
    def prefix(self) -> str:
        """The visible, non-secret start of the key, enough to recognise it."""
        return API_KEY_FORMAT.visible_prefix(self.lookup_id)

    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def state(self, now: datetime | None = None) -> ApiKeyState:
        """This row's state, by the same conditions as ``ApiKeyQuerySet`` (tests hold the two
        together): revoked wins over expired."""
        if self.is_revoked():
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now or timezone.now()):
            return "expired"
        return "active"

    def is_usable(self, now: datetime | None = None) -> bool:
        return self.state(now) == "active"
