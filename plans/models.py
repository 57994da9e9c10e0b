"""Issued plans, the tokens signed for them, and the keys that sign."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone

from members.models import new_ulid


class SigningKey(models.Model):
    class State(models.TextChoices):
        NEXT = "next", "next (published, not yet signing)"
        ACTIVE = "active", "active (signing)"
        RETIRED = "retired", "retired (verifies old tokens)"
        REVOKED = "revoked", "revoked (withdrawn at once)"

    kid = models.CharField(max_length=64, primary_key=True, help_text="RFC 7638 thumbprint")
    state = models.CharField(max_length=10, choices=State.choices, db_index=True)
    public_key = models.CharField(max_length=64, help_text="raw Ed25519 public key, base64url")
    private_key_encrypted = models.TextField(help_text="Fernet token of the raw private key")
    created_at = models.DateTimeField(default=timezone.now)
    activated_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["state"], condition=Q(state="active"), name="unique_active_signing_key"
            ),
            models.UniqueConstraint(
                fields=["state"], condition=Q(state="next"), name="unique_next_signing_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kid[:12]}… ({self.state})"


class Plan(models.Model):
    team_path: ClassVar[str] = "team"

    class Status(models.TextChoices):
        ACTIVE = "active"
        EXPIRED = "expired"
        REVOKED = "revoked"
        #: the agent ended it after every required step ran
        COMPLETED = "completed"
        #: the agent ended it before that
        ENDED = "ended"
        #: the agent's guard refused the token it was given (``end_reason`` says why)
        TOKEN_REFUSED = "token_refused", "token refused by the guard"
        #: a policy's review rule sent it to a person; nothing is signed until they approve
        PENDING_APPROVAL = "pending_approval", "awaiting approval"
        #: a person denied it (``approval_reason`` says why); it never gets a token
        APPROVAL_DENIED = "approval_denied", "approval denied"
        #: nobody decided within the team's approval window
        APPROVAL_EXPIRED = "approval_expired", "approval expired"

    class Approval(models.TextChoices):
        """Whether a person had to approve the plan, and what came of it. Kept when the
        status moves on (an approved plan that is revoked was still approved)."""

        NOT_REQUIRED = "", "not required"
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"

    id = models.CharField(primary_key=True, max_length=26, default=new_ulid, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="plans")
    agent = models.ForeignKey("members.Agent", on_delete=models.PROTECT, related_name="plans")
    member = models.ForeignKey("members.Member", on_delete=models.PROTECT, related_name="plans")
    goal = models.CharField(max_length=1000)
    document = models.JSONField(help_text="the plan with defaults filled in")
    hash = models.CharField(max_length=64, db_index=True)
    policy_version = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="plans"
    )
    role = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 (null: no role)
    groups = models.JSONField(default=list)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.ACTIVE, db_index=True
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    expires_at = models.DateTimeField(help_text="absolute end of the plan, across refreshes")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=254, blank=True, help_text="who revoked it")
    revoke_reason = models.TextField(blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=500, blank=True)
    decisions_lost = models.PositiveIntegerField(
        default=0, help_text="guard decisions the agent could not deliver (its queue was full)"
    )
    #: the guard decisions of this plan before this moment were removed by the team's
    #: retention (plans.retention); null: none were
    decisions_removed_before = models.DateTimeField(null=True, blank=True)
    approval = models.CharField(
        max_length=10, choices=Approval.choices, default=Approval.NOT_REQUIRED, blank=True
    )
    #: the steps review rules sent to a person: [{"step", "tool", "rule": {"index",
    #: "description"}}], as the policy asked when the plan was declared
    review = models.JSONField(default=list, blank=True)
    approval_deadline = models.DateTimeField(null=True, blank=True)
    approval_decided_at = models.DateTimeField(null=True, blank=True)
    #: the e-mail of the person who approved or denied
    approval_by = models.CharField(max_length=254, blank=True, db_index=True)
    approval_reason = models.TextField(blank=True)
    #: the plan this one was delegated from (a child plan for a sub-agent); null for a plan
    #: an agent declared itself
    parent = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="children"
    )
    #: the RFC 8693 ``act`` chain signed into a child's tokens: who delegated to whom
    act = models.JSONField(null=True, blank=True)
    #: what a child plan reserved of its parent's allowance at delegation:
    #: {"calls": {"<parent step index>": n}, "budgets": {"<parent budget id>": "<amount>"}}
    reserved = models.JSONField(default=dict, blank=True)
    #: the RFC 7638 thumbprint of the key its tokens are bound to (``cnf.jkt``); "" unbound
    jkt = models.CharField(max_length=43, blank=True, default="")
    #: the plan's index in its team's token status list (``status.status_list.idx``)
    status_idx = models.PositiveIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "-created_at"], name="plan_team_recent")]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "status_idx"],
                condition=models.Q(status_idx__isnull=False),
                name="unique_status_idx_per_team",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.goal[:40]}"

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at <= (now or timezone.now())


class PlanToken(models.Model):
    """One row per signature. The token string itself is a bearer credential: never stored."""

    team_path: ClassVar[str] = "plan__team"

    class Kind(models.TextChoices):
        ISSUE = "issue"
        REFRESH = "refresh"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="tokens")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    kid = models.CharField(max_length=64, db_index=True)
    issued_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    policy_version = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="tokens"
    )
    role = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 (null: no role)
    groups = models.JSONField(default=list)

    class Meta:
        ordering = ["plan", "issued_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.issued_at:%Y-%m-%d %H:%M:%S}"


class PlanEventBatch(models.Model):
    """One batch of the guard's decision log, as received. Stored once per (plan, stream,
    seq), so a batch the guard sends again (its answer was lost) stores nothing twice; a
    missing number in a stream is a batch the guard gave up on, whose decisions it
    reported as `lost` in a later batch."""

    team_path: ClassVar[str] = "plan__team"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="event_batches")
    #: the reporter's random id; "" for a guard that numbers no batches (before 0.2)
    stream = models.CharField(max_length=64, blank=True)
    #: the batch's number in its stream for this plan: 1, 2, 3...
    seq = models.PositiveBigIntegerField(null=True, blank=True)
    received_at = models.DateTimeField(default=timezone.now)
    events = models.PositiveIntegerField(default=0)
    display_updates = models.PositiveIntegerField(default=0)
    lost = models.PositiveIntegerField(
        default=0, help_text="decisions the guard reported it could not deliver"
    )
    #: how the guard ended the plan in this batch: completed, ended, token_refused, or ""
    end_outcome = models.CharField(max_length=16, blank=True)
    arguments_stored = models.BooleanField(default=False)

    class Credential(models.TextChoices):
        API_KEY = "api_key", "the agent's API key"
        PLAN_TOKEN = "plan_token", "the plan's intent token (the API key was refused)"

    #: what the batch was sent with (plans.event_credentials)
    credential = models.CharField(
        max_length=16, choices=Credential.choices, default=Credential.API_KEY
    )

    class Meta:
        ordering = ["plan", "received_at", "id"]
        constraints = [
            # NULLs are distinct: batches of an older guard (no stream, no seq) never clash.
            models.UniqueConstraint(
                fields=["plan", "stream", "seq"], name="unique_event_batch_per_stream"
            ),
        ]

    def __str__(self) -> str:
        return f"batch {self.stream[:8]}/{self.seq}" if self.seq else "batch"


class PlanEvent(models.Model):
    """A decision the agent's guard reported: what happened next to what was planned."""

    team_path: ClassVar[str] = "plan__team"

    #: indexed by ``plan_event_timeline``, which leads with it
    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="events", db_index=False)
    batch = models.ForeignKey(
        PlanEventBatch, on_delete=models.CASCADE, related_name="plan_events", null=True
    )
    occurred_at = models.DateTimeField(db_index=True)
    received_at = models.DateTimeField(auto_now_add=True)
    tool = models.CharField(max_length=64)
    decision = models.CharField(max_length=32, db_index=True)
    step = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="index of the plan step, from 0 (people read it + 1)"
    )
    reason = models.CharField(max_length=500, blank=True)
    #: the policy rule that decided: its index in the policy's rules (from 0), None for the
    #: policy default; with an empty description, the policy was not consulted
    rule_index = models.PositiveSmallIntegerField(null=True, blank=True)
    rule_description = models.CharField(max_length=200, blank=True)
    policy_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="the version the token in force carried"
    )
    #: the policy version the decision was made under, resolved by the server from the
    #: plan's tokens when the decision arrived (plans.decided_under, the rule's one home);
    #: the auditor's pages filter, show and export it; indexed by ``plan_event_version``
    decided_under = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    args_digest = models.CharField(max_length=64, blank=True)
    args = models.JSONField(null=True, blank=True, help_text="only when the team logs arguments")
    #: what an allowed call counted against each budget of a version-2 plan: {budget id:
    #: amount}; null when no budget covers its step. Kept whatever the team's argument
    #: logging, as it is the plan's own accounting (plans.admin_display.budget_reports).
    amounts = models.JSONField(
        null=True, blank=True, help_text="budget id -> amount this allowed call counted"
    )

    class Meta:
        ordering = ["plan", "occurred_at", "id"]
        indexes = [
            # A plan's decisions in time order (its page, its timeline's first and last
            # rows, the decisions list searched by plan id), and any lookup by plan.
            models.Index(fields=["plan", "occurred_at", "id"], name="plan_event_timeline"),
            # The decisions made under one policy version, in the list's order (read
            # backwards): the version filter reads a page from it.
            models.Index(fields=["decided_under", "occurred_at", "id"], name="plan_event_version"),
        ]

    def __str__(self) -> str:
        return f"{self.tool}: {self.decision}"


class PlanDisplayUpdate(models.Model):
    """An Agent Client Protocol plan update the agent showed its user, kept as sent."""

    team_path: ClassVar[str] = "plan__team"

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="display_updates")
    occurred_at = models.DateTimeField(null=True, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    message = models.JSONField()

    class Meta:
        ordering = ["plan", "received_at", "id"]

    def __str__(self) -> str:
        return f"ACP update {self.received_at:%Y-%m-%d %H:%M:%S}"


class ShadowDifference(models.Model):
    """Where the policy version tried in shadow (``Policy.shadow_version``) would have
    answered otherwise than the active one, which decided: a declaration or refresh it would
    have refused or admitted, a call it would have blocked or allowed (docs/decisions/0076).
    The policy page counts them over the last day; nothing here was enforced."""

    team_path: ClassVar[str] = "team"

    class Kind(models.TextChoices):
        #: the active version admitted the declaration or refresh; the shadow would refuse
        REFUSED = "shadow_refused", "would refuse"
        #: the active version refused it; the shadow would admit it
        ADMITTED = "shadow_admitted", "would admit"
        #: the guard allowed the call; under the shadow it would be blocked
        BLOCKED = "shadow_blocked", "would block"
        #: the guard blocked the call by the active policy; the shadow would allow it
        ALLOWED = "shadow_allowed", "would allow"

    class Request(models.TextChoices):
        DECLARATION = "declaration", "declaration"
        REFRESH = "refresh", "refresh"
        CALL = "call", "call"

    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    shadow_version = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="+"
    )
    #: the enforced version that answered (None: unknown, as for a guard's version the
    #: server no longer has)
    active_version = models.ForeignKey(
        "policies.PolicyVersion", on_delete=models.PROTECT, related_name="+", null=True
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    request = models.CharField(max_length=16, choices=Request.choices)
    at = models.DateTimeField(default=timezone.now)
    #: the plan (empty for a refused declaration, which made none)
    plan_id = models.CharField(max_length=26, blank=True)
    agent_id = models.CharField(max_length=26, blank=True)
    #: the call's tool, or for a declaration or refresh the first step's tool the two
    #: versions answer differently
    tool = models.CharField(max_length=64, blank=True)
    step = models.PositiveSmallIntegerField(null=True, blank=True, help_text="from 0")
    #: what the active version answered (``allowed``, ``policy_denied``...)
    code = models.CharField(max_length=64)
    #: what the shadow version would have answered
    shadow_code = models.CharField(max_length=64)
    #: the shadow version's rule that decided: {"index": n | None, "description": "..."}
    rule = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["shadow_version", "kind", "at"], name="shadow_difference_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.tool}"
