"""Members and member groups as SCIM 2.0 resources (RFC 7643), and back.

scim2-models does the protocol's work: validating what an identity provider sends in each
context, applying a PatchOp to a resource, matching a filter, writing a ListResponse or an
Error. This module says how a Member is a ``User`` and a Group a ``Group``; the writes go
through members.services, so a provisioned change is recorded as any other.

A ``User``: ``userName`` (as the provider sent it; the member's e-mail when it never did),
``emails`` (the member's e-mail is the primary one), ``displayName`` / ``name.formatted``
(the member's name), ``active``, ``externalId``, the member's role in the attribute
SCIM_ROLE_ATTRIBUTE names, and ``groups`` (read-only). Attributes Plangate has no column for
are kept as the provider sent them and returned as they were.
"""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from scim2_models import (
    Context,
    Email,
    Group,
    GroupMember,
    GroupMembership,
    InvalidValueException,
    Meta,
    Name,
    NotFoundException,
    PatchOp,
    Role,
    UniquenessException,
    User,
)
from scim2_models.path import CompareOperator, Comparison, LogicalExpr, LogicalOperator

from kernel.problems import DomainError
from members.models import Member, email_normalize
from members.services import (
    member_save,
    team_group_create,
    team_group_delete,
    team_group_members_set,
    team_group_update,
)
from teams.models import Group as MemberGroup
from teams.models import Team

from .models import ScimGroup, ScimUser

#: the attributes the mapping owns: never kept among the provider's own
_USER_OWNED = {"id", "meta", "schemas", "groups", "externalId", "userName", "active"}
ROLE_ATTRIBUTES = ("roles", "userType", "title")
WORK = Email.Type.work


def role_attribute() -> str:
    """SCIM_ROLE_ATTRIBUTE: where a user's role is: ``roles`` (the primary, else the first
    value), ``userType`` or ``title``."""
    return str(settings.SCIM_ROLE_ATTRIBUTE)


# --- users --------------------------------------------------------------------------------


def scim_members(team: Team):
    """The team's members a SCIM client sees: all but those it deleted."""
    return (
        Member.objects.filter(team=team)
        .exclude(scim__deleted=True)
        .select_related("role", "scim")
        .prefetch_related("groups")
        .order_by("pk")
    )


def rows_narrowed(rows: Any, ast: Any) -> Any:
    """``rows`` (users or groups) cut down in the database to those a filter can match,
    when its top is an equality an identity provider asks before each write (``userName``,
    ``externalId``, ``displayName``; or an ``and`` holding one). The filter itself is still
    matched on what is left, so this only saves reading the rest of the team."""
    if isinstance(ast, LogicalExpr) and ast.op == LogicalOperator.and_:
        for term in ast.terms:
            rows = rows_narrowed(rows, term)
        return rows
    if not (
        isinstance(ast, Comparison)
        and ast.op == CompareOperator.eq
        and ast.attr_path.sub_attr is None
        and isinstance(ast.value, str)
    ):
        return rows
    name, value = ast.attr_path.attr.lower(), ast.value
    if rows.model is Member:
        if name == "username":
            stored_name = Q(scim__user_name__iexact=value)
            as_email = Q(email__iexact=value) & (Q(scim__isnull=True) | Q(scim__user_name=""))
            return rows.filter(stored_name | as_email)
        if name == "externalid":
            return rows.filter(scim__external_id=value)
    elif name == "displayname":
        return rows.filter(name__iexact=value)
    elif name == "externalid":
        return rows.filter(scim__external_id=value)
    return rows


def scim_member(team: Team, user_id: str) -> Member:
    member = (
        scim_members(team).filter(pk=int(user_id)).first()
        if user_id.isdigit() and len(user_id) < 19
        else None
    )
    if member is None:
        raise NotFoundException(detail=f"No user {user_id}.")
    return member


def _stored(member: Member) -> ScimUser | None:
    try:
        return cast(ScimUser, cast(Any, member).scim)
    except ScimUser.DoesNotExist:
        return None


def user_resource(member: Member, base_url: str) -> User:
    stored = _stored(member)
    document: dict[str, Any] = dict(stored.attributes) if stored else {}
    user: User[Any] = User.model_validate(
        {"schemas": [User.__schema__], **document}, scim_ctx=Context.DEFAULT
    )
    derived_email, derived_name = (
        _email_of(user, stored.user_name if stored else ""),
        _name_of(user),
    )
    if derived_email != member.email:
        # Built, not validated: an address Django accepts for a member (a .test domain, say)
        # must not fail the whole listing because pydantic's e-mail check is stricter.
        user.emails = [Email.model_construct(value=member.email, primary=True, type=WORK)]
    if derived_name != member.name:
        user.display_name = member.name or None
        user.name = Name(formatted=member.name) if member.name else None
    user.id = str(member.pk)
    user.external_id = (stored.external_id if stored else "") or None
    user.user_name = (stored.user_name if stored else "") or member.email
    user.active = member.is_active
    _role_into(user, member.role.name if member.role else None)
    user.groups = [
        GroupMembership(value=str(group.pk), ref=None, display=group.name, type="direct")
        for group in sorted(member.groups.all(), key=lambda group: group.pk)
    ] or None
    updated = stored.updated_at if stored else member.created_at
    user.meta = Meta(
        resource_type="User",
        created=member.created_at,
        last_modified=max(updated, member.created_at),
        location=f"{base_url}/Users/{member.pk}",
    )
    return user


def _email_of(user: User, user_name: str | None) -> str:
    """The member's e-mail: ``userName`` when it is an address, else the primary e-mail
    (or the first)."""
    candidates = [user_name or user.user_name or ""]
    emails = list(user.emails or [])
    emails.sort(key=lambda email: not email.primary)
    candidates += [str(email.value or "") for email in emails]
    for candidate in candidates:
        try:
            validate_email(candidate)
        except ValidationError:
            continue
        return email_normalize(candidate)
    return ""


def _name_of(user: User) -> str:
    if user.display_name:
        return str(user.display_name)
    if user.name is not None:
        if user.name.formatted:
            return str(user.name.formatted)
        parts = [user.name.given_name, user.name.family_name]
        return " ".join(str(part) for part in parts if part)
    return ""


def _role_of(user: User) -> str | None:
    attribute = role_attribute()
    if attribute == "roles":
        roles = list(user.roles or [])
        roles.sort(key=lambda role: not role.primary)
        return str(roles[0].value) if roles and roles[0].value else None
    value = getattr(user, "user_type" if attribute == "userType" else "title", None)
    return str(value) if value else None


def _role_into(user: User, role: str | None) -> None:
    attribute = role_attribute()
    if attribute == "roles":
        # The provider's entries are served as it sent them while the role they name (the
        # primary, else the first) is the member's; a role set in the console since comes
        # first, as the primary value.
        entries = list(user.roles or [])
        if _role_of(user) != role:
            for item in entries:
                item.primary = None
            entries = [item for item in entries if item.value != role]
            if role:
                entries.insert(0, Role(value=role, primary=True))
        user.roles = entries or None
    elif attribute == "userType":
        user.user_type = role
    else:
        user.title = role


def _member_fields(user: User) -> dict[str, Any]:
    if user.active is None:
        raise InvalidValueException(detail="active is required: is this person active?")
    email = _email_of(user, user.user_name)
    if not email:
        raise InvalidValueException(
            detail="userName or an e-mail must be an e-mail address: Plangate's members "
            "are people known by their e-mail."
        )
    name = _name_of(user)
    if len(name) > 200:
        raise InvalidValueException(detail="displayName: at most 200 characters")
    role = _role_of(user)
    if role is not None and len(role) > 64:
        raise InvalidValueException(detail=f"{role_attribute()}: a role name is at most 64")
    return {"email": email, "name": name, "role": role or ""}


def _attributes_kept(user: User) -> dict[str, Any]:
    dumped = user.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    return {key: value for key, value in dumped.items() if key not in _USER_OWNED}


def _domain_to_scim(error: DomainError) -> Exception:
    """A members.services refusal as the SCIM error a provider understands."""
    details = "; ".join(f"{item.path}: {item.detail}" for item in error.errors) or error.detail
    if any(item.path == "email" and "already" in item.detail for item in error.errors):
        return UniquenessException(detail=details)
    return InvalidValueException(detail=details)


def scim_user_create(*, team: Team, user: User) -> Member:
    fields = _member_fields(user)
    with transaction.atomic():
        existing = Member.objects.for_email(team, fields["email"]).select_related("scim").first()
        stored = _stored(existing) if existing is not None else None
        if existing is not None and not (stored is not None and stored.deleted):
            raise UniquenessException(
                detail=f"{fields['email']} is already a member of the team (userName)."
            )
        try:
            member = member_save(
                team=team,
                member=existing,
                email=fields["email"],
                name=fields["name"],
                role=fields["role"],
                is_active=bool(user.active),
                groups=[] if existing is not None else None,
            )
        except DomainError as error:
            raise _domain_to_scim(error) from None
        _keep(member, user)
    return member


def scim_user_replace(*, member: Member, user: User) -> Member:
    fields = _member_fields(user)
    with transaction.atomic():
        try:
            member = member_save(
                team=member.team,
                member=member,
                email=fields["email"],
                name=fields["name"],
                role=fields["role"],
                is_active=bool(user.active),
            )
        except DomainError as error:
            raise _domain_to_scim(error) from None
        _keep(member, user)
    return member


def scim_user_patch(*, member: Member, patch: PatchOp[User], base_url: str) -> Member:
    resource = user_resource(member, base_url)
    before = resource.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    patch.patch(resource)
    if resource.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE) == before:
        return member
    return scim_user_replace(member=member, user=resource)


def scim_user_delete(*, member: Member) -> None:
    """The provider deleted the user: the member is disabled (their running plans stop
    within the team's revocation bound) and kept for their plans and trail, and SCIM no
    longer serves it until the provider creates it again."""
    with transaction.atomic():
        if member.is_active:
            member_save(team=member.team, member=member, email=member.email, is_active=False)
        ScimUser.objects.update_or_create(
            member=member, defaults={"deleted": True, "updated_at": timezone.now()}
        )


def _keep(member: Member, user: User) -> None:
    ScimUser.objects.update_or_create(
        member=member,
        defaults={
            "user_name": user.user_name or "",
            "external_id": user.external_id or "",
            "attributes": _attributes_kept(user),
            "deleted": False,
            "updated_at": timezone.now(),
        },
    )
    member.refresh_from_db()


# --- groups -------------------------------------------------------------------------------


def scim_groups(team: Team):
    return (
        MemberGroup.objects.filter(team=team)
        .select_related("scim", "team")
        .prefetch_related("members")
        .order_by("pk")
    )


def scim_group(team: Team, group_id: str) -> MemberGroup:
    group = (
        scim_groups(team).filter(pk=int(group_id)).first()
        if group_id.isdigit() and len(group_id) < 19
        else None
    )
    if group is None:
        raise NotFoundException(detail=f"No group {group_id}.")
    return group


def _group_stored(group: MemberGroup) -> ScimGroup | None:
    try:
        return cast(ScimGroup, cast(Any, group).scim)
    except ScimGroup.DoesNotExist:
        return None


def group_resource(group: MemberGroup, base_url: str) -> Group:
    stored = _group_stored(group)
    members = sorted(group.members.all(), key=lambda member: member.pk)
    # A group typed into the console has no SCIM row: it is as old as its team says.
    created = stored.created_at if stored else group.team.created_at
    displays = stored.member_displays if stored else {}
    return Group(
        id=str(group.pk),
        external_id=(stored.external_id if stored else "") or None,
        display_name=group.name,
        members=[
            GroupMember(
                value=str(member.pk),
                ref=cast(Any, f"{base_url}/Users/{member.pk}"),
                display=displays.get(str(member.pk)) or member.email,
                type="User",
            )
            for member in members
        ]
        or None,
        meta=Meta(
            resource_type="Group",
            created=created,
            last_modified=stored.updated_at if stored else created,
            location=f"{base_url}/Groups/{group.pk}",
        ),
    )


def _group_members(team: Team, group: Group) -> list[Member]:
    wanted = [str(item.value or "") for item in group.members or []]
    ids = [int(value) for value in wanted if value.isdigit() and len(value) < 19]
    found = list(scim_members(team).filter(pk__in=ids)) if ids else []
    if len(found) != len(set(wanted)):
        missing = sorted(set(wanted) - {str(member.pk) for member in found})
        raise InvalidValueException(detail=f"members: no user {', '.join(missing)} in the team")
    return found


def _group_name(group: Group) -> str:
    name = str(group.display_name or "").strip()
    if not name:
        raise InvalidValueException(detail="displayName is required")
    if len(name) > 64:
        raise InvalidValueException(detail="displayName: a group name is at most 64 characters")
    return name


def scim_group_create(*, team: Team, group: Group) -> MemberGroup:
    name = _group_name(group)
    with transaction.atomic():
        members = _group_members(team, group)
        if MemberGroup.objects.filter(team=team, name=name).exists():
            raise UniquenessException(detail=f"the team already has a group {name!r}")
        try:
            created = team_group_create(team=team, name=name)
        except DomainError as error:
            raise _domain_to_scim(error) from None
        team_group_members_set(group=created, members=members)
        _keep_group(created, group)
    return created


def scim_group_replace(*, row: MemberGroup, group: Group) -> MemberGroup:
    name = _group_name(group)
    with transaction.atomic():
        members = _group_members(row.team, group)
        if MemberGroup.objects.filter(team=row.team_id, name=name).exclude(pk=row.pk).exists():
            raise UniquenessException(detail=f"the team already has a group {name!r}")
        try:
            team_group_update(group=row, name=name)
        except DomainError as error:
            raise _domain_to_scim(error) from None
        team_group_members_set(group=row, members=members)
        _keep_group(row, group)
    return row


def scim_group_patch(*, row: MemberGroup, patch: PatchOp[Group], base_url: str) -> MemberGroup:
    resource = group_resource(row, base_url)
    before = resource.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE)
    patch.patch(resource)
    if resource.model_dump(scim_ctx=Context.RESOURCE_QUERY_RESPONSE) == before:
        return row
    return scim_group_replace(row=row, group=resource)


def scim_group_delete(*, row: MemberGroup) -> None:
    team_group_delete(group=row)


def _keep_group(row: MemberGroup, group: Group) -> None:
    ScimGroup.objects.update_or_create(
        group=row,
        defaults={
            "external_id": group.external_id or "",
            "member_displays": {
                str(item.value): str(item.display)
                for item in group.members or []
                if item.display and item.value
            },
            "updated_at": timezone.now(),
        },
    )
    row.refresh_from_db()
