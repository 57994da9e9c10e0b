"""Admin tokens: a team's bearer credentials for the admin API, read-only or read-write,
created in the console (superusers) or by ``manage.py create_admin_token``, shown once,
stored as a keyed hash (``kernel.credentials``), revocable. Creating and revoking one is
recorded in the team's activity log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.actors import current_actor
from audit.changes import change_append, created_changes
from guard.errors import FieldError
from kernel.credentials import credential_lookup, credential_touch
from kernel.problems import Code, DomainError
from teams.models import Team

from .models import ADMIN_TOKEN_FORMAT, AdminToken

OBJECT_TYPE = "admin token"


def admin_token_create(
    *,
    team: Team,
    name: str = "",
    can_write: bool = False,
    user: Any = None,
    created_by: str | None = None,
) -> tuple[AdminToken, str]:
    """Create an admin API token for ``team`` and return it with its plaintext, which is
    shown once and never stored. ``user``: the console user it decides approvals as."""
    if len(name) > AdminToken._meta.get_field("name").max_length:  # type: ignore[operator]
        raise DomainError(
            Code.INVALID_REQUEST,
            "The name is too long.",
            errors=[FieldError("name", "at most 200 characters")],
        )
    minted = ADMIN_TOKEN_FORMAT.mint()
    with transaction.atomic():
        token = AdminToken.objects.create(
            team=team,
            name=name,
            can_write=can_write,
            user=user,
            lookup_id=minted.lookup_id,
            secret_hash=minted.secret_hash,
            created_by=current_actor() if created_by is None else created_by,
        )
        change_append(
            team=team,
            object_type=OBJECT_TYPE,
            object_id=token.pk,
            name=token.prefix,
            action="created",
            changes=created_changes(
                {
                    "name": name,
                    "scope": token.scope,
                    "user": user.get_username() if user is not None else "",
                }
            ),
        )
    return token, minted.plaintext


def admin_token_revoke(*, token: AdminToken) -> bool:
    """Revoke ``token`` (its next request answers 401); False when it already was."""
    with transaction.atomic():
        revoked = AdminToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if revoked:
            change_append(
                team=token.team_id,
                object_type=OBJECT_TYPE,
                object_id=token.pk,
                name=token.prefix,
                action="revoked",
            )
    token.refresh_from_db(fields=["revoked_at"])
    return bool(revoked)


def admin_token_authenticate(plaintext: str) -> AdminToken:
    """The usable token for ``plaintext``, or DomainError ``invalid_admin_token``."""
    invalid = DomainError(
        Code.INVALID_ADMIN_TOKEN, "The admin token is missing, unknown or revoked."
    )
    token = credential_lookup(
        AdminToken.objects.usable().select_related("team", "user"), ADMIN_TOKEN_FORMAT, plaintext
    )
    if token is None:
        raise invalid
    return token


def admin_token_touch(*, token: AdminToken, now: datetime | None = None) -> None:
    credential_touch(token, now=now)


def admin_token_actor(token: AdminToken) -> str:
    """How the activity log names a change made through the admin API."""
    return f"admin token {token.prefix}" + (f" ({token.name})" if token.name else "")
