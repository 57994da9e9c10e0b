"""Audit tokens: read-only bearer credentials for one team's sealed records (the records
API), created by superusers, shown once, stored as a keyed hash (``kernel.credentials``, the
format API keys use too), revocable. Creating and revoking one is recorded in the team's
activity log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from guard.errors import FieldError
from kernel.credentials import credential_lookup, credential_touch
from kernel.models import TeamToken
from kernel.problems import Code, DomainError
from teams.models import Team

from .actors import current_actor
from .changes import change_append, created_changes
from .models import AuditToken

#: the longest name a team token may have
TOKEN_NAME_MAX = 200


def team_token_create(
    model: type[TeamToken],
    *,
    team: Team,
    object_type: str,
    name: str = "",
    created_by: str | None = None,
    shown: dict[str, Any] | None = None,
    **fields: Any,
) -> tuple[Any, str]:
    """Create a team token of ``model`` (an audit, admin API or SCIM token) and return it
    with its plaintext, which is shown once and never stored (``kernel.credentials``). The
    creation is recorded in the team's activity log as ``object_type``, with ``name`` and
    what ``shown`` adds; ``created_by`` defaults to the door's actor."""
    if len(name) > TOKEN_NAME_MAX:
        raise DomainError(
            Code.INVALID_REQUEST,
            "The name is too long.",
            errors=[FieldError("name", f"at most {TOKEN_NAME_MAX} characters")],
        )
    minted = model.credential_format.mint()
    with transaction.atomic():
        token = model.objects.create(
            team=team,
            name=name,
            lookup_id=minted.lookup_id,
            secret_hash=minted.secret_hash,
            created_by=current_actor() if created_by is None else created_by,
            **fields,
        )
        change_append(
            team=team,
            object_type=object_type,
            object_id=token.pk,
            name=token.prefix,
            action="created",
            changes=created_changes({"name": name, **(shown or {})}),
        )
    return token, minted.plaintext


def team_token_revoke(token: TeamToken, *, object_type: str) -> bool:
    """Revoke ``token`` (its next request answers 401); False when it already was."""
    with transaction.atomic():
        revoked = (
            type(token)
            .objects.filter(pk=token.pk, revoked_at__isnull=True)
            .update(revoked_at=timezone.now())
        )
        if revoked:
            change_append(
                team=token.team_id,
                object_type=object_type,
                object_id=token.pk,
                name=token.prefix,
                action="revoked",
            )
    token.refresh_from_db(fields=["revoked_at"])
    return bool(revoked)


def team_token_find(model: type[TeamToken], plaintext: str, *related: str) -> Any:
    """The usable token of ``model`` that ``plaintext`` is, or None."""
    return credential_lookup(
        model.objects.usable().select_related("team", *related),
        model.credential_format,
        plaintext,
    )


def audit_token_create(
    *, team: Team, name: str = "", created_by: str | None = None
) -> tuple[AuditToken, str]:
    """A read-only token for ``team``'s audit records (``team_token_create``)."""
    return team_token_create(
        AuditToken, team=team, object_type="audit token", name=name, created_by=created_by
    )


def audit_token_revoke(*, token: AuditToken) -> bool:
    return team_token_revoke(token, object_type="audit token")


def audit_token_authenticate(plaintext: str) -> AuditToken:
    """The usable token for ``plaintext``, or DomainError ``invalid_audit_token``."""
    token = team_token_find(AuditToken, plaintext)
    if token is None:
        raise DomainError(
            Code.INVALID_AUDIT_TOKEN, "The audit token is missing, unknown or revoked."
        )
    return token


def audit_token_touch(*, token: AuditToken, now: datetime | None = None) -> None:
    """Record use at most once per interval (kernel.credentials.credential_touch): a SIEM
    polls every few seconds, and a write per poll would be a write per poll."""
    credential_touch(token, now=now)
