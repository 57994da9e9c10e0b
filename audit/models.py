"""The audit trail: one append-only journal of everything that happened in a team.

Each record is self-contained: it keeps the names and numbers it is about (agent id and
name, the member's e-mail, the plan id, the policy slug and version) as plain values, not
foreign keys, so that deleting or renaming a row elsewhere never changes what the trail
says, and so that its hash covers what an auditor reads.

Records are written unsealed (``seq``, ``prev_hash`` and ``hash`` empty) by the request
that caused them, so appending never waits for other writers of the team. The sealer
(``audit.services.records_seal``, run by the worker every few seconds) then numbers each
team's new records in order and chains them: ``hash`` is the SHA-256 of the record's
canonical JSON (RFC 8785), which includes ``prev_hash``, the hash of the record before it.
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kernel.credentials import CredentialFormat
from kernel.models import TeamToken


class AuditRecordQuerySet(models.QuerySet["AuditRecord"]):
    def sealed(self) -> AuditRecordQuerySet:
        return self.filter(seq__isnull=False)

    def unsealed(self) -> AuditRecordQuerySet:
        return self.filter(seq__isnull=True)

    def redacted(self) -> AuditRecordQuerySet:
        """Records whose content retention removed (AuditRecord.is_redacted)."""
        return self.filter(redacted_at__isnull=False)

    def whole(self) -> AuditRecordQuerySet:
        """Records that still hold their content."""
        return self.filter(redacted_at__isnull=True)


class AuditRecord(models.Model):
    team_path: ClassVar[str] = "team"

    class Kind(models.TextChoices):
        PLAN_ISSUED = "plan_issued", "plan issued"
        PLAN_REFUSED = "plan_refused", "plan refused"
        TOKEN_REFRESHED = "token_refreshed", "token refreshed"
        REFRESH_REFUSED = "refresh_refused", "refresh refused"
        DECISION = "decision", "guard decision"
        DECISIONS_LOST = "decisions_lost", "decisions not delivered"
        PLAN_ENDED = "plan_ended", "plan ended"
        PLAN_REVOKED = "plan_revoked", "plan revoked"
        CHANGE = "change", "admin or operator change"
        APPROVAL_REQUESTED = "approval_requested", "approval requested"
        APPROVAL_DECIDED = "approval_decided", "approval decided"
        APPROVAL_EXPIRED = "approval_expired", "approval expired"
        #: approvers were told (an e-mail, a webhook attempt): appended by notify/
        APPROVAL_NOTIFIED = "approval_notified", "approvers notified"
        #: an agent delegated part of its plan (``plan_id``) to a child plan
        PLAN_DELEGATED = "plan_delegated", "plan delegated"

    team = models.ForeignKey("teams.Team", on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    #: who acted: a person's e-mail or username, ``manage.py <command>``, ``agent:<id>``
    actor = models.CharField(max_length=254, blank=True)
    agent_id = models.CharField(max_length=26, null=True, blank=True)  # noqa: DJ001 (null: no agent)
    agent_name = models.CharField(max_length=200, blank=True)
    #: the member's e-mail, or the user exactly as a refused plan gave it
    user = models.CharField(max_length=254, blank=True)
    plan_id = models.CharField(max_length=26, blank=True)
    plan_hash = models.CharField(max_length=64, blank=True)
    policy = models.CharField(max_length=64, blank=True, help_text="the policy's slug")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    code = models.CharField(max_length=64, blank=True)
    #: the policy rule that decided: {"index": n, "description": "..."} (index from 0,
    #: as in the policy document's `rules`)
    rule = models.JSONField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    #: the version of the hashed document's format (audit.chain.record_document): 1 for the
    #: records written before it was kept, whose hash covers no ``format``; from 2 on the
    #: hash covers it (RECORD_FORMAT)
    format = models.PositiveSmallIntegerField(default=2)

    # The chain, filled in by the sealer.
    seq = models.PositiveBigIntegerField(null=True, blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64, blank=True)
    sealed_at = models.DateTimeField(null=True, blank=True)
    #: set when retention removed the record's content (audit.retention): the record keeps
    #: its place in the chain (team, seq, kind, at, prev_hash, hash), nothing else
    redacted_at = models.DateTimeField(null=True, blank=True)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        ordering = ["team", "seq", "id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "seq"], name="unique_audit_seq_per_team"),
        ]
        indexes = [
            models.Index(fields=["team", "kind", "-at"], name="audit_team_kind_recent"),
            models.Index(fields=["plan_id"], name="audit_plan", condition=~Q(plan_id="")),
            models.Index(
                fields=["team", "id"], name="audit_unsealed", condition=Q(seq__isnull=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.at:%Y-%m-%d %H:%M:%S}"

    def is_redacted(self) -> bool:
        """Retention removed the record's content (audit.retention): it keeps its place in
        the chain, and its hash can no longer be recomputed from what it holds."""
        return self.redacted_at is not None


class RefusedAttempt(AuditRecord):
    """The refused declarations and refreshes of the trail, as a list of their own in the
    admin (a proxy: the same rows, filtered by kind)."""

    KINDS = (AuditRecord.Kind.PLAN_REFUSED, AuditRecord.Kind.REFRESH_REFUSED)

    class Meta:
        proxy = True
        verbose_name = "refused attempt"


class ActivityRecord(AuditRecord):
    """The admin and operator changes of the trail (kind ``change``), as a list of their own
    in the admin (a proxy: the same rows, filtered by kind)."""

    KINDS = (AuditRecord.Kind.CHANGE,)

    class Meta:
        proxy = True
        verbose_name = "activity"
        verbose_name_plural = "activity"


class UnattributedRefusal(models.Model):
    """Refusals that no agent can be named for (no, unknown or revoked API key): counted per
    day and code, not stored one by one, since anyone on the network can send them."""

    day = models.DateField()
    code = models.CharField(max_length=64)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-day", "code"]
        constraints = [
            models.UniqueConstraint(fields=["day", "code"], name="unique_unattributed_refusal")
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.code}: {self.count}"


class AuditChainHead(models.Model):
    """Where a team's chain ends: the last sealed record's ``seq`` and ``hash``.

    Only the sealer writes it, holding its row lock (``select_for_update``) while it numbers
    and chains the team's new records, so two sealers never fork a chain; appending records
    never touches it. ``verify_audit`` compares it with the records, which is how a deleted
    tail shows.
    """

    team_path: ClassVar[str] = "team"

    team = models.OneToOneField(
        "teams.Team", on_delete=models.PROTECT, primary_key=True, related_name="+"
    )
    last_seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "audit chain head"

    def __str__(self) -> str:
        return f"team {self.team_id}: seq {self.last_seq}"


AUDIT_TOKEN_FORMAT = CredentialFormat(prefix="pga_", purpose=b"plangate.audit-token.v1")


class AuditToken(TeamToken):
    """A read-only bearer credential for one team's sealed audit records (the records API),
    created by a superuser. Only a keyed hash of the secret is kept (``kernel.credentials``,
    as for API keys); the plaintext is shown once."""

    credential_format = AUDIT_TOKEN_FORMAT

    class Meta(TeamToken.Meta):
        pass


class AuditExportCursor(models.Model):
    """How far the OTLP log export (audit.otlp_export) has shipped a team's sealed records:
    the last ``seq`` a collector accepted. Only the export task writes it, after a
    collector's success; a failed export leaves it, so the next run sends the same records
    again (at least once)."""

    team_path: ClassVar[str] = "team"

    team = models.OneToOneField(
        "teams.Team", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    last_seq = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "audit export cursor"

    def __str__(self) -> str:
        return f"team {self.team_id}: exported up to seq {self.last_seq}"
