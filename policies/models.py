"""Policies and their immutable, numbered versions."""

from __future__ import annotations

from django.db import models


class Policy(models.Model):
    team = models.ForeignKey("members.Team", on_delete=models.CASCADE, related_name="policies")
    slug = models.SlugField(max_length=64)
    description = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

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

    policy = models.ForeignKey(Policy, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    document = models.JSONField()
    hash = models.CharField(max_length=64)
    comment = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

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
