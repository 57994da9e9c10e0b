"""SCIM tokens: an identity provider's bearer credential for one team's ``/scim/v2``,
created by a superuser (console or ``manage.py create_scim_token``), shown once, stored as
a keyed hash (``kernel.credentials``), revocable; creating and revoking one is recorded in
the team's activity log."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from audit.actors import current_actor
from audit.changes import change_append, created_changes
from guard.errors import FieldError
from kernel.credentials import credential_lookup, credential_touch
from kernel.problems import Code, DomainError
from teams.models import Team

from .models import SCIM_TOKEN_FORMAT, ScimToken

OBJECT_TYPE = "SCIM token"


def scim_token_create(*, team: Team, name: str = "") -> tuple[ScimToken, str]:
    if len(name) > 200:
        raise DomainError(
            Code.INVALID_REQUEST,
            "The name is too long.",
            errors=[FieldError("name", "at most 200 characters")],
        )
    minted = SCIM_TOKEN_FORMAT.mint()
    with transaction.atomic():
        token = ScimToken.objects.create(
            team=team,
            name=name,
            lookup_id=minted.lookup_id,
            secret_hash=minted.secret_hash,
            created_by=current_actor(),
        )
        change_append(
            team=team,
            object_type=OBJECT_TYPE,
            object_id=token.pk,
            name=token.prefix,
            action="created",
            changes=created_changes({"name": name}),
        )
    return token, minted.plaintext


def scim_token_revoke(*, token: ScimToken) -> bool:
    with transaction.atomic():
        revoked = ScimToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
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


def scim_token_authenticate(plaintext: str) -> ScimToken | None:
    return credential_lookup(
        ScimToken.objects.usable().select_related("team"), SCIM_TOKEN_FORMAT, plaintext
    )


def scim_token_touch(*, token: ScimToken) -> None:
    credential_touch(token)


def scim_actor(token: ScimToken) -> str:
    """How the activity log names a change the identity provider made."""
    return f"SCIM token {token.prefix}" + (f" ({token.name})" if token.name else "")
