"""Policies and their immutable, numbered versions."""

from __future__ import annotations

from typing import ClassVar, Self, TypedDict

from django.db import models
from django.db.models import OuterRef, Subquery


class PolicyVersionQuerySet(models.QuerySet["PolicyVersion"]):
    def of_policy_newest_first(self, policy: Policy | int | OuterRef) -> Self:
        """The policy's enforced versions, the active one first: a policy's active version
        is its newest version not published in shadow. Every read of "the active version"
        starts here."""
        policy_id = policy.pk if isinstance(policy, Policy) else policy
        return self.filter(policy_id=policy_id, shadow=False).order_by("-number")


class ActiveVersionAnnotations(TypedDict):
    """What ``active_version_annotations`` adds to each row, for type hints."""

    active_version_id: int | None
    active_version_number: int | None


def active_version_annotations(policy_field: str = "pk") -> dict[str, Subquery]:
    """``active_version_id`` and ``active_version_number`` of the policy that ``policy_field``
    names on the annotated model (``"pk"`` on a policy, ``"policy_id"`` on an agent)."""
    newest = PolicyVersion.objects.of_policy_newest_first(OuterRef(policy_field))
    return {
        "active_version_id": Subquery(newest.values("pk")[:1]),
        "active_version_number": Subquery(newest.values("number")[:1]),
    }


class PolicyQuerySet(models.QuerySet["Policy"]):
    def with_active_version(self) -> Self:
        """Each policy with ``active_version_id`` and ``active_version_number`` (None when
        nothing is published), in the same query."""
        return self.annotate(**active_version_annotations("pk"))


class Policy(models.Model):
    team_path: ClassVar[str] = "team"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="policies")
    slug = models.SlugField(max_length=64)
    description = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: the version tried in shadow now (one published with ``shadow``): issuance, refresh
    #: and the guard decide under it beside the active version and record where it would
    #: have answered differently, enforcing only the active one. Cleared when it is
    #: withdrawn or promoted; the versions themselves are never updated.
    shadow_version = models.ForeignKey(
        "PolicyVersion",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        limit_choices_to={"shadow": True},
    )

    objects = PolicyQuerySet.as_manager()

    class Meta:
        ordering = ["team", "slug"]
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="unique_policy_slug_per_team"),
        ]

    def __str__(self) -> str:
        return self.slug


class PolicyVersion(models.Model):
    """One published document of a policy. Rows are never updated: tokens point at them."""

    team_path: ClassVar[str] = "policy__team"

    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    document = models.JSONField()
    hash = models.CharField(max_length=64)
    comment = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: published in shadow: never the active version, whatever its number (which follows
    #: the policy's others); decided under while the policy's ``shadow_version`` names it
    #: (docs/decisions/0076)
    shadow = models.BooleanField(default=False)

    objects = PolicyVersionQuerySet.as_manager()

    class Meta:
        ordering = ["policy", "-number"]
        get_latest_by = "number"
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "number"], name="unique_policy_version_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.policy.slug} v{self.number}"
