"""Writes for teams, members, agents and API keys. Views, admin and commands call these."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import validate_slug
from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone

from audit.changes import change_append, created_changes, field_changes
from guard.errors import FieldError
from kernel.credentials import credential_touch
from kernel.problems import Code, DomainError
from kernel.sql import related_columns, related_instance, statement
from teams.models import Group, Role, Team

from .changes import (
    agent_change_record,
    agent_state,
    api_key_change_record,
    member_change_record,
    member_disabled_record,
    member_state,
    named_row_created,
    team_created_record,
)
from .models import API_KEY_FORMAT, Agent, ApiKey, Member, email_normalize

if TYPE_CHECKING:
    from policies.models import Policy

DEFAULT_TEAM_SLUG = "default"

logger = logging.getLogger(__name__)


def team_get_or_create(*, slug: str = DEFAULT_TEAM_SLUG, name: str | None = None) -> Team:
    """The team with this slug; created (and recorded in its own activity log) if missing.
    Only a slug (letters, digits, ``-``, ``_``) makes a team: a command given a team's name
    that no team has must not make one named by it (DomainError ``invalid_request``)."""
    with transaction.atomic():
        if not Team.objects.filter(slug=slug).exists():
            try:
                validate_slug(slug)
            except ValidationError as exc:
                message = (
                    f"no team {slug!r}: no team has this slug or name, and only a slug "
                    "(letters, digits, - and _) makes a new one"
                )
                raise _refusal([FieldError("team", message)]) from exc
        team, created = Team.objects.get_or_create(
            slug=slug, defaults={"name": name or slug.title()}
        )
        if created:
            team_created_record(team)
    return team


def _refusal(errors: list[FieldError]) -> DomainError:
    return DomainError(Code.INVALID_REQUEST, "The record is not valid.", errors=errors)


def _full_clean(instance: Model, *, exclude: Iterable[str] = ()) -> None:
    """Django's field validation, as a DomainError naming each field."""
    try:
        instance.full_clean(exclude=list(exclude))
    except ValidationError as exc:
        raise _refusal(
            [
                FieldError("" if field == NON_FIELD_ERRORS else field, message)
                for field, messages in exc.message_dict.items()
                for message in messages
            ]
        ) from exc


def _not_in_team(team: Team, path: str, rows: Iterable[Role | Group | Policy]) -> list[FieldError]:
    """Role, groups and policy chosen for a row must belong to the row's team."""
    strangers = sorted(str(row) for row in rows if row.team_id != team.pk)
    if not strangers:
        return []
    return [
        FieldError(path, f"Not in team {team.slug}: {', '.join(strangers)}. Choose the team's own.")
    ]


def member_email_owner(*, team: Team, email: str, member: Member | None = None) -> Member | None:
    """The team's member, other than ``member``, who already has this e-mail (in any case):
    an e-mail is a team's only once. The admin's form links to them."""
    taken = Member.objects.for_email(team, email)
    if member is not None and member.pk is not None:
        taken = taken.exclude(pk=member.pk)
    return taken.first()


def member_email_taken_message(email: str, team: Team) -> str:
    return f"{email_normalize(email)} is already a member of {team}."


def member_save(
    *,
    team: Team,
    email: str,
    name: str | None = None,
    role: Role | str | None = None,
    groups: Iterable[Group | str] | None = None,
    is_active: bool | None = None,
    member: Member | None = None,
) -> Member:
    """Create a member (``member`` None) or update ``member``; the e-mail is stored
    normalised and may be the team's only once.

    ``role`` is a Role or a role name ("" clears it); ``groups`` are Groups or group names.
    Names missing in the team are created there; a Role or Group of another team is refused.
    None leaves a field as it is. Refusals are DomainError ``invalid_request`` naming the
    field; nothing is written then. What changed is recorded in the team's activity log.
    """
    group_list = None if groups is None else list(groups)
    errors = _not_in_team(team, "role", [role] if isinstance(role, Role) else [])
    errors += _not_in_team(team, "groups", [g for g in group_list or [] if isinstance(g, Group)])
    with transaction.atomic():
        if member_email_owner(team=team, email=email, member=member) is not None:
            errors.append(FieldError("email", member_email_taken_message(email, team)))
        if errors:
            raise _refusal(errors)
        # Read from the database: an admin form has already put its values on ``member``.
        stored = (
            Member.objects.select_related("team", "role").filter(pk=member.pk).first()
            if member is not None and member.pk is not None
            else None
        )
        before = member_state(stored) if stored is not None else None
        if member is None:
            member = Member()
        member.team = team
        member.email = email_normalize(email)
        if name is not None:
            member.name = name
        if isinstance(role, str):
            member.role = _role_named(team, role) if role else None
        elif role is not None:
            member.role = role
        if is_active is not None:
            member.is_active = is_active
        _full_clean(member, exclude=["role"])
        member.save()
        if group_list is not None:
            member.groups.set(
                [
                    group if isinstance(group, Group) else _group_named(team, group)
                    for group in group_list
                ]
            )
        member_change_record(member, before, stored.team_id if stored else None)
    return member


def _role_named(team: Team, name: str) -> Role:
    role, created = Role.objects.get_or_create(team=team, name=name)
    if created:
        named_row_created(team, "role", role)
    return role


def _group_named(team: Team, name: str) -> Group:
    group, created = Group.objects.get_or_create(team=team, name=name)
    if created:
        named_row_created(team, "group", group)
    return group


def team_role_create(*, team: Team, name: str, description: str = "") -> Role:
    """Create a role of ``team``; a name the team already has is refused at ``name``."""
    return _named_row_create(Role, "role", team=team, name=name, description=description)


def team_group_create(*, team: Team, name: str, description: str = "") -> Group:
    """Create a member group of ``team``; a name the team already has is refused."""
    return _named_row_create(Group, "group", team=team, name=name, description=description)


def team_group_update(
    *, group: Group, name: str | None = None, description: str | None = None
) -> Group:
    """Rename a member group or change its description; a name another group of the team
    has is refused. Policies name groups: a renamed group is what a policy naming the new
    name admits from now on, as the record of the change says."""
    with transaction.atomic():
        before = {"name": group.name, "description": group.description}
        if name is not None:
            name = name.strip()
            if not name:
                raise _refusal([FieldError("name", "must not be empty")])
            if Group.objects.filter(team=group.team_id, name=name).exclude(pk=group.pk).exists():
                raise _refusal([FieldError("name", f"the team already has a group {name!r}")])
            group.name = name
        if description is not None:
            group.description = description
        _full_clean(group)
        group.save()
        changes = field_changes(before, {"name": group.name, "description": group.description})
        if changes:
            change_append(
                team=group.team_id,
                object_type="group",
                object_id=group.pk,
                name=group.name,
                action="updated",
                changes=changes,
            )
    return group


def team_group_delete(*, group: Group) -> None:
    """Delete a member group: its members leave it (each change recorded as theirs)."""
    with transaction.atomic():
        for member in group.members.select_related("team", "role").order_by("pk"):
            member_save(
                team=member.team,
                member=member,
                email=member.email,
                groups=[other for other in member.groups.all() if other.pk != group.pk],
            )
        change_append(
            team=group.team_id,
            object_type="group",
            object_id=group.pk,
            name=group.name,
            action="deleted",
            changes={"name": [group.name, None]},
        )
        group.delete()


def team_group_members_set(*, group: Group, members: Iterable[Member]) -> None:
    """Make ``members`` (of the group's team) exactly the group's members; each member who
    joins or leaves is saved through ``member_save``, so their change is recorded."""
    wanted = {member.pk: member for member in members}
    with transaction.atomic():
        current = {member.pk: member for member in group.members.all()}
        for member_id in sorted(set(wanted) ^ set(current)):
            member = Member.objects.select_related("team", "role").get(pk=member_id)
            groups = [other for other in member.groups.all() if other.pk != group.pk]
            if member_id in wanted:
                groups.append(group)
            member_save(team=member.team, member=member, email=member.email, groups=groups)


def _named_row_create(
    model: type[Role] | type[Group], object_type: str, *, team: Team, name: str, description: str
) -> Any:
    name = name.strip()
    with transaction.atomic():
        if not name:
            raise _refusal([FieldError("name", "must not be empty")])
        if model.objects.filter(team=team, name=name).exists():
            raise _refusal(
                [FieldError("name", f"team {team.slug} already has a {object_type} {name!r}")]
            )
        row = model(team=team, name=name, description=description)
        _full_clean(row)
        row.save()
        named_row_created(team, object_type, row)
    return row


def member_upsert(
    *,
    team: Team,
    email: str,
    name: str | None = None,
    role: str | None = None,
    groups: Iterable[str] | None = None,
    is_active: bool | None = None,
) -> Member:
    """Create the member, or update the given fields of the one with this e-mail (matched
    case-insensitively). Missing roles and groups are created in the member's team."""
    with transaction.atomic():
        member = Member.objects.for_email(team, email).select_for_update().first()
        return member_save(
            team=team,
            email=email,
            name=name,
            role=role,
            groups=groups,
            is_active=is_active,
            member=member,
        )


def member_disable(*, team: Team, email: str) -> Member:
    with transaction.atomic():
        member = Member.objects.for_email(team, email).select_for_update().first()
        if member is None:
            raise DomainError(Code.UNKNOWN_USER, f"{email} is not a member of team {team.slug}.")
        if member.is_active:
            member.is_active = False
            member.save(update_fields=["is_active"])
            member_disabled_record(member)
    return member


def agent_require_active(*, agent: Agent) -> None:
    """DomainError ``agent_disabled`` unless the agent is active: the one refusal of a
    disabled agent, made by the API before any work and by the plan services for any
    other caller."""
    if not agent.is_active:
        raise DomainError(Code.AGENT_DISABLED, f"Agent {agent.name} is disabled.")


def _agent_save(agent: Agent) -> Agent:
    """Check the agent's team rules, then save it: its policy is its team's, and its name is
    the team's only agent of that name (also a constraint; said here with the field)."""
    errors = _not_in_team(agent.team, "policy", [agent.policy])
    if Agent.objects.filter(team_id=agent.team_id, name=agent.name).exclude(pk=agent.pk).exists():
        errors.append(
            FieldError(
                "name", f"team {agent.team.slug!r} already has an agent named {agent.name!r}"
            )
        )
    if errors:
        raise _refusal(errors)
    _full_clean(agent)
    agent.save()
    return agent


def agent_create(
    *,
    team: Team,
    name: str,
    policy: Policy,
    is_active: bool = True,
    accepts_delegations: bool = False,
) -> Agent:
    with transaction.atomic():
        agent = _agent_save(
            Agent(
                team=team,
                name=name,
                policy=policy,
                is_active=is_active,
                accepts_delegations=accepts_delegations,
            )
        )
        agent_change_record(agent, None)
    return agent


def agent_update(
    *,
    agent: Agent,
    name: str | None = None,
    policy: Policy | None = None,
    is_active: bool | None = None,
    accepts_delegations: bool | None = None,
) -> Agent:
    """Change the given fields; an agent keeps its team (its plans and keys were issued
    there)."""
    with transaction.atomic():
        # Read from the database: an admin form has already put its values on ``agent``.
        stored = Agent.objects.select_related("policy").filter(pk=agent.pk).first()
        if name is not None:
            agent.name = name
        if policy is not None:
            agent.policy = policy
        if is_active is not None:
            agent.is_active = is_active
        if accepts_delegations is not None:
            agent.accepts_delegations = accepts_delegations
        _agent_save(agent)
        agent_change_record(agent, agent_state(stored) if stored is not None else None)
    return agent


def api_key_create(
    *,
    agent: Agent,
    name: str = "",
    expires_at: datetime | None = None,
    plaintext: str | None = None,
) -> tuple[ApiKey, str]:
    """Create a key and return it with its plaintext, which is shown once and never stored
    (the activity log names it by its visible prefix).

    ``plaintext`` makes the key from a well-formed key its holder already has (`make run`'s
    demo key on a fresh database) instead of a new one; a malformed one, or one whose lookup
    id names another key, is refused (``invalid_request``).
    """
    minted = API_KEY_FORMAT.mint() if plaintext is None else API_KEY_FORMAT.adopt(plaintext)
    if minted is None:
        raise _refusal([FieldError("plaintext", "is not an API key (pg_<12 hex>_<secret>)")])
    if plaintext is not None and ApiKey.objects.filter(lookup_id=minted.lookup_id).exists():
        raise _refusal([FieldError("plaintext", "names an existing key; make a new one")])
    with transaction.atomic():
        api_key = ApiKey.objects.create(
            agent=agent,
            name=name,
            lookup_id=minted.lookup_id,
            secret_hash=minted.secret_hash,
            expires_at=expires_at,
        )
        api_key_change_record(
            api_key,
            "created",
            created_changes({"name": name, "expires_at": expires_at}),
        )
    return api_key, minted.plaintext


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke the key; revoking a revoked key changes (and records) nothing."""
    with transaction.atomic():
        revoked = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        api_key.refresh_from_db(fields=["revoked_at"])
        if revoked:
            api_key_change_record(
                api_key, "revoked", field_changes({}, {"revoked_at": api_key.revoked_at})
            )
    return api_key


def _invalid_api_key() -> DomainError:
    return DomainError(Code.INVALID_API_KEY, "The API key is missing, unknown, revoked or expired.")


def usable_key_condition(alias: str) -> str:
    """``ApiKeyQuerySet.usable_condition`` in SQL, for the statements that read a key by hand
    (its one SQL home): the key ``alias`` is neither revoked nor expired at the parameter."""
    return f"{alias}.revoked_at IS NULL AND ({alias}.expires_at IS NULL OR {alias}.expires_at > %s)"


def _policy_model() -> type[Policy]:
    # policies sits above members: its model is reached through the relation, not imported.
    return cast("type[Policy]", Agent._meta.get_field("policy").related_model)


def _usable_key_statement() -> str:
    """The usable key by its lookup id, with its agent, the agent's team and policy: what
    ``ApiKey.objects.usable(now).select_related("agent__team", "agent__policy")`` reads
    (tests/members/test_api_key_read.py holds them to one answer). Parameters: lookup id,
    now. lookup_id is unique: no ORDER BY."""
    quote = connection.ops.quote_name
    team, policy = Team, _policy_model()
    # Only the models' own table and column names are formatted in.
    return (
        f"SELECT k.*, {related_columns(Agent, 'a')}, {related_columns(team, 't')}, "  # noqa: S608
        f"{related_columns(policy, 'p')} FROM {quote(ApiKey._meta.db_table)} k "
        f"JOIN {quote(Agent._meta.db_table)} a ON a.id = k.agent_id "
        f"JOIN {quote(team._meta.db_table)} t ON t.id = a.team_id "
        f"JOIN {quote(policy._meta.db_table)} p ON p.id = a.policy_id "
        f"WHERE k.lookup_id = %s AND {usable_key_condition('k')}"
    )


def api_key_authenticate(plaintext: str) -> ApiKey:
    """The usable key for ``plaintext`` with its agent, team and policy, or DomainError
    ``invalid_api_key``: one indexed read by the lookup id, then a constant-time compare of
    the secret's hash, as DRF's TokenAuthentication and django-rest-knox read a token.

    Every API request authenticates: the read is a statement built once per process
    (kernel.sql), a third of the ORM's cost of building the same query (decision 0061)."""
    parsed = API_KEY_FORMAT.parse(plaintext)  # malformed text is refused before any query
    if parsed is None:
        raise _invalid_api_key()
    lookup_id, secret = parsed
    now = ApiKey._meta.get_field("expires_at").get_db_prep_value(timezone.now(), connection)
    sql = statement("members.usable_key", _usable_key_statement)
    # A revoked or expired key is not found, the same answer as an unknown one.
    api_key = next(iter(ApiKey.objects.raw(sql, [lookup_id, now])), None)
    if api_key is None or not API_KEY_FORMAT.matches(api_key.secret_hash, secret):
        raise _invalid_api_key()
    agent = related_instance(Agent, "a", api_key)
    agent.team = related_instance(Team, "t", api_key)
    agent.policy = related_instance(_policy_model(), "p", api_key)
    api_key.agent = agent
    return api_key


def api_key_touch(*, api_key: ApiKey, now: datetime | None = None) -> None:
    """Record use at most once per interval (kernel.credentials.credential_touch)."""
    credential_touch(api_key, now=now)
