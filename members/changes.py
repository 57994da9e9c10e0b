"""What the member services changed, as change records of the team's activity log
(``audit.changes`` says the shape): each object as its records show it, in words."""

from __future__ import annotations

from typing import Any

from audit.changes import (
    Changes,
    change_append,
    changes_append_to_teams,
    created_changes,
    field_changes,
)
from teams.models import Group, Role, Team

from .models import Agent, ApiKey, Member


def team_created_record(team: Team) -> None:
    """A new team's first record, in its own log."""
    change_append(
        team=team,
        object_type="team",
        object_id=team.pk,
        name=team.slug,
        action="created",
        changes=created_changes({"slug": team.slug, "name": team.name}),
    )


def member_disabled_record(member: Member) -> None:
    change_append(
        team=member.team_id,
        object_type="member",
        object_id=member.pk,
        name=member.email,
        action="disabled",
        changes={"is_active": [True, False]},
        user=member.email,
    )


def member_state(member: Member) -> dict[str, Any]:
    """A member as its change records show it."""
    return {
        "team": member.team.slug,
        "email": member.email,
        "name": member.name,
        "role": member.role.name if member.role else None,
        "groups": member.group_names(),
        "is_active": member.is_active,
    }


def member_change_record(
    member: Member, before: dict[str, Any] | None, team_before: int | None
) -> None:
    """One record of what ``member_save`` changed, none when nothing did; a member moved
    to another team is recorded in both teams' logs."""
    after = member_state(member)
    changes = field_changes(before, after) if before else created_changes(after)
    if not changes:
        return
    team_ids = {member.team_id} | ({team_before} if team_before is not None else set())
    changes_append_to_teams(
        sorted(team_ids),
        object_type="member",
        object_id=member.pk,
        name=member.email,
        action="updated" if before else "created",
        changes=changes,
        user=member.email,
    )


def named_row_created(team: Team, object_type: str, row: Role | Group) -> None:
    """A role or group that saving a member created because it was named."""
    change_append(
        team=team,
        object_type=object_type,
        object_id=row.pk,
        name=row.name,
        action="created",
        changes={"name": [None, row.name]},
    )


def agent_state(agent: Agent) -> dict[str, Any]:
    """An agent as its change records show it."""
    return {
        "name": agent.name,
        "policy": agent.policy.slug,
        "is_active": agent.is_active,
        "accepts_delegations": agent.accepts_delegations,
    }


def agent_change_record(agent: Agent, before: dict[str, Any] | None) -> None:
    after = agent_state(agent)
    changes = field_changes(before, after) if before else created_changes(after)
    if not changes:
        return
    change_append(
        team=agent.team_id,
        object_type="agent",
        object_id=agent.pk,
        name=agent.name,
        action="created" if before is None else "updated",
        changes=changes,
        agent_id=agent.pk,
        agent_name=agent.name,
        policy=agent.policy.slug,
    )


def api_key_change_record(api_key: ApiKey, action: str, changes: Changes) -> None:
    agent = api_key.agent
    change_append(
        team=agent.team_id,
        object_type="api_key",
        object_id=api_key.pk,
        name=api_key.prefix,
        action=action,
        changes=changes,
        extra={"agent": agent.name},
        agent_id=agent.pk,
        agent_name=agent.name,
    )
