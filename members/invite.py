"""Inviting a teammate to the console: one service gives a person a console role (team
admin or auditor) in some teams, in one step, with no permission list to assemble.

A console role is one of the two permission groups the data migration creates
(members/migrations/0003_admin_groups.py); the teams are ``Team.staff``, which scopes what
the role may see. A Django group grants its rights wherever the person is staff, so a
person holds one console role: inviting an auditor as a team admin makes them a team admin
of every team they are staff of, and only someone who manages all those teams may do that.

Who may invite: a superuser, to any team; a team admin (``teams.change_team``, which the
"Team admins" group holds and auditors do not), to the teams they are staff of.

A new person gets an unusable password: they choose one through a one-time link
(``set_password_path``), built with Django's password-reset tokens, which stop working
once the password is set (the token covers the password hash) or after
``PASSWORD_RESET_TIMEOUT``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group as PermissionGroup
from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import models, transaction
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from audit.changes import changes_append_to_teams, field_changes
from guard.errors import FieldError
from kernel.problems import Code, DomainError
from teams.models import Team

from .models import email_normalize

#: Django's username length: the e-mail is the username
USERNAME_MAX_LENGTH = 150
#: Django's first_name length, which holds the whole name
NAME_MAX_LENGTH = 150
#: who may invite to the teams they are staff of (held by "Team admins", not by auditors)
INVITE_PERMISSION = "teams.change_team"


class ConsoleRole(models.TextChoices):
    TEAM_ADMIN = "team_admin", "Team admin: manages members, agents, policies and plans"
    AUDITOR = "auditor", "Auditor: reads everything, changes nothing"


#: the permission group of each console role, as members/migrations/0003_admin_groups.py
#: names them
CONSOLE_ROLE_GROUPS = {ConsoleRole.TEAM_ADMIN: "Team admins", ConsoleRole.AUDITOR: "Auditors"}


@dataclass(frozen=True)
class Invitation:
    """What ``teammate_invite`` did. ``needs_password``: the person has no usable password
    yet, so the set-password link is how they get in."""

    user: User
    created: bool
    role: ConsoleRole
    teams: tuple[Team, ...]
    teams_added: tuple[Team, ...]
    needs_password: bool


def can_invite(user: Any) -> bool:
    return bool(
        user.is_active and user.is_staff and (user.is_superuser or user.has_perm(INVITE_PERMISSION))
    )


def invitable_teams(user: Any) -> QuerySet[Team]:
    """The teams ``user`` may invite to: every team for a superuser, their own for a team
    admin, none for anyone else."""
    if not can_invite(user):
        return Team.objects.none()
    if user.is_superuser:
        return Team.objects.all()
    return Team.objects.filter(staff=user)


def console_role_of(user: User) -> ConsoleRole | None:
    names = set(user.groups.values_list("name", flat=True))
    for role, group in CONSOLE_ROLE_GROUPS.items():
        if group in names:
            return role
    return None


def _refused(code: Code, path: str, detail: str) -> DomainError:
    return DomainError(code, detail, errors=[FieldError(path, detail)])


def _user_state(user: User) -> dict[str, Any]:
    """A console user as the activity log shows them."""
    return {
        "email": user.email,
        "name": user.first_name,
        "is_staff": user.is_staff,
        "is_active": user.is_active,
        "console_role": console_role_of(user),
        "teams": sorted(user.plangate_teams.values_list("slug", flat=True)),
    }


def teammate_invite(
    *,
    email: str,
    name: str,
    console_role: ConsoleRole | str,
    teams: Iterable[Team],
    invited_by: Any,
) -> Invitation:
    """Give the person with this e-mail the console role in ``teams``, creating their
    console user if there is none (username: the e-mail; no usable password).

    Teams are only added, never taken away. Refusals are DomainError naming the field:
    ``invalid_request`` for bad input, ``permission_denied`` when ``invited_by`` may not
    invite to a team, or may not change a person who has access beyond their own teams.
    Nothing is written then. The change is recorded in the log of each team the person is
    staff of afterwards.
    """
    email = email_normalize(email)
    try:
        validate_email(email)
    except ValidationError:
        raise _refused(Code.INVALID_REQUEST, "email", "Enter a valid e-mail address.") from None
    if len(email) > USERNAME_MAX_LENGTH:
        raise _refused(Code.INVALID_REQUEST, "email", "This e-mail address is too long.")
    try:
        role = ConsoleRole(console_role)
    except ValueError:
        raise _refused(
            Code.INVALID_REQUEST, "console_role", "Choose team admin or auditor."
        ) from None
    chosen = sorted(set(teams), key=lambda team: team.slug)
    if not chosen:
        raise _refused(Code.INVALID_REQUEST, "teams", "Choose at least one team.")
    allowed = set(invitable_teams(invited_by).values_list("pk", flat=True))
    strangers = [team.name for team in chosen if team.pk not in allowed]
    if strangers:
        raise _refused(
            Code.PERMISSION_DENIED,
            "teams",
            f"You may not invite to {', '.join(strangers)}: you invite to the teams you "
            "manage only.",
        )

    with transaction.atomic():
        matches = list(User.objects.select_for_update().filter(email__iexact=email)[:2])
        if len(matches) > 1:
            raise _refused(
                Code.INVALID_REQUEST,
                "email",
                f"Several console users have the e-mail {email}; a superuser sets this "
                "person up under Users.",
            )
        user = matches[0] if matches else None
        if user is None and User.objects.filter(username__iexact=email).exists():
            raise _refused(
                Code.INVALID_REQUEST,
                "email",
                f"A console user is named {email} but has another e-mail; a superuser sets "
                "this person up under Users.",
            )
        if user is not None:
            _check_may_change(user, invited_by, allowed)
        before = _user_state(user) if user is not None else {}
        created = user is None
        if user is None:
            user = User(username=email, email=email)
            user.set_unusable_password()
        if name.strip():
            user.first_name = name.strip()[:NAME_MAX_LENGTH]
        user.is_staff = True
        user.is_active = True
        user.save()
        groups = PermissionGroup.objects.filter(name__in=CONSOLE_ROLE_GROUPS.values())
        user.groups.remove(*[group for group in groups if group.name != CONSOLE_ROLE_GROUPS[role]])
        user.groups.add(*[group for group in groups if group.name == CONSOLE_ROLE_GROUPS[role]])
        already = set(user.plangate_teams.values_list("pk", flat=True))
        added = tuple(team for team in chosen if team.pk not in already)
        for team in added:
            team.staff.add(user)
        after = _user_state(user)
        changes = field_changes(before, after)
        if changes:
            changes_append_to_teams(
                sorted(user.plangate_teams.values_list("pk", flat=True)),
                object_type="user",
                object_id=user.pk,
                name=user.get_username(),
                action="invited" if created else "updated",
                changes=changes,
            )
    return Invitation(
        user=user,
        created=created,
        role=role,
        teams=tuple(chosen),
        teams_added=added,
        needs_password=not user.has_usable_password(),
    )


def _check_may_change(user: User, invited_by: Any, allowed: set[int]) -> None:
    """A team admin changes only people whose access lies within their own teams: the
    console role applies in every team the person is staff of."""
    if invited_by.is_superuser:
        return
    if user.pk == invited_by.pk:
        raise _refused(Code.PERMISSION_DENIED, "email", "You cannot change your own access.")
    beyond = user.is_superuser or bool(
        set(user.plangate_teams.values_list("pk", flat=True)) - allowed
    )
    if beyond:
        raise _refused(
            Code.PERMISSION_DENIED,
            "email",
            f"{user.email} has console access beyond the teams you manage; a superuser changes it.",
        )


def set_password_path(user: User) -> str:
    """The one-time path on which ``user`` chooses a password (valid until they set one,
    or for ``PASSWORD_RESET_TIMEOUT``)."""
    return reverse(
        "admin:plangate_set_password",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )


def set_password_link_expiry(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)


def password_set_record(user: User) -> None:
    """The person chose their password through the link: recorded (never its value) in
    the log of each team they are staff of."""
    team_ids = sorted(user.plangate_teams.values_list("pk", flat=True))
    if team_ids:
        changes_append_to_teams(
            team_ids,
            object_type="user",
            object_id=user.pk,
            name=user.get_username(),
            action="password set",
            changes={"password": [None, "(hidden)"]},
        )
