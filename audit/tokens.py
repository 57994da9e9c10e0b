"""Audit tokens: read-only bearer credentials for one team's sealed records (the records
API), created by superusers, shown once, stored as a keyed hash (``kernel.credentials``, the
format API keys use too), revocable. Creating and revoking one is recorded in the team's
activity log."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from guard.errors import FieldError
from kernel.credentials import credential_lookup, credential_touch
from kernel.problems import Code, DomainError
from teams.models import Team

from .actors import current_actor
from .changes import change_append, created_changes
from .models import AUDIT_TOKEN_FORMAT, AuditToken


def audit_token_create(
    *, team: Team, name: str = "", created_by: str | None = None
) -> tuple[AuditToken, str]:
    """Create a read-only token for ``team``'s audit records and return it with its
    plaintext, which is shown once and never stored (``kernel.credentials``). The creation
    is recorded in the team's activity log; ``created_by`` defaults to the door's actor."""
    if len(name) > AuditToken._meta.get_field("name").max_length:  # type: ignore[operator]
        raise DomainError(
            Code.INVALID_REQUEST,
            "The name is too long.",
            errors=[FieldError("name", "at most 200 characters")],
        )
    minted = AUDIT_TOKEN_FORMAT.mint()
    with transaction.atomic():
        token = AuditToken.objects.create(
            team=team,
            name=name,
            lookup_id=minted.lookup_id,
            secret_hash=minted.secret_hash,
            created_by=current_actor() if created_by is None else created_by,
        )
        change_append(
            team=team,
            object_type="audit token",
            object_id=token.pk,
            name=token.prefix,
            action="created",
            changes=created_changes({"name": name}),
        )
    return token, minted.plaintext


def audit_token_revoke(*, token: AuditToken) -> bool:
    """Revoke ``token`` (its next request answers 401); False when it already was."""
    with transaction.atomic():
        now = timezone.now()
        revoked = AuditToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now
        )
        if revoked:
            change_append(
                team=token.team_id,
                object_type="audit token",
                object_id=token.pk,
                name=token.prefix,
                action="revoked",
            )
    token.refresh_from_db(fields=["revoked_at"])
    return bool(revoked)


def audit_token_authenticate(plaintext: str) -> AuditToken:
    """The usable token for ``plaintext``, or DomainError ``invalid_audit_token``."""
    invalid = DomainError(
        Code.INVALID_AUDIT_TOKEN, "The audit token is missing, unknown or revoked."
    )
    token = credential_lookup(
        AuditToken.objects.usable().select_related("team"), AUDIT_TOKEN_FORMAT, plaintext
    )
    if token is None:
        raise invalid
    return token


def audit_token_touch(*, token: AuditToken, now: datetime | None = None) -> None:
    """Record use at most once per interval (kernel.credentials.credential_touch): a SIEM
    polls every few seconds, and a write per poll would be a write per poll."""
    credential_touch(token, now=now)
