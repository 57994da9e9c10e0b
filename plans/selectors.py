"""Shared reads about plans and the guard's decisions: which policy version a decision was
made under, and which plans planned a given tool. The admin's lists, pages and timeline
call these instead of rebuilding the queries."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

from django.db import connection
from django.db.models import (
    BooleanField,
    F,
    Model,
    QuerySet,
)
from django.db.models.expressions import RawSQL

from members.models import Agent, Member, email_normalize
from policies.models import Policy, PolicyVersion
from policies.selectors import policy_active_version_id_sql
from teams.models import Group, Role, Team

from .models import Plan, PlanEvent, SigningKey


class DecidedUnderAnnotations(TypedDict):
    """What ``decisions_with_policy_version`` adds to each decision, for type hints."""

    decided_under_version_id: int
    decided_under_version_number: int
    decided_under_policy_slug: str


def decisions_with_policy_version(queryset: QuerySet[PlanEvent]) -> QuerySet[PlanEvent]:
    """Each decision with the policy version it was made under (``decided_under_version_id``,
    ``_number`` and ``decided_under_policy_slug``), in the same query: read from the
    version the server resolved and stored when the decision arrived (``decided_under``;
    the rule is plans.decided_under's), by joins on primary keys, never a rule per row."""
    return queryset.annotate(
        decided_under_version_id=F("decided_under_id"),
        decided_under_version_number=F("decided_under__number"),
        decided_under_policy_slug=F("decided_under__policy__slug"),
    )


def plans_planning_tool(queryset: QuerySet[Plan], tool: str) -> QuerySet[Plan]:
    """The plans among ``queryset`` with a step that calls exactly ``tool``.

    PostgreSQL answers with JSON containment (``@>``, which a GIN index on the document can
    serve); SQLite, which has no containment lookup, with ``json_each`` over the steps.
    Both compare the step's ``tool`` exactly, never a substring of the document.
    """
    if connection.vendor == "postgresql":
        return queryset.filter(document__contains={"steps": [{"tool": tool}]})
    # The table name is the model's own; only the tool is a parameter.
    table = Plan._meta.db_table
    planned = RawSQL(  # noqa: S611 (the tool is a bound parameter)
        f"EXISTS (SELECT 1 FROM json_each({table}.document, '$.steps') AS step "  # noqa: S608
        "WHERE json_extract(step.value, '$.tool') = %s)",
        (tool,),
        output_field=BooleanField(),
    )
    return queryset.filter(planned)


def planned_tools(plans: Iterable[dict]) -> list[str]:
    """The sorted tool names the given plan documents call."""
    tools: set[str] = set()
    for document in plans:
        steps = document.get("steps") if isinstance(document, dict) else None
        for step in steps if isinstance(steps, list) else []:
            if isinstance(step, dict) and isinstance(step.get("tool"), str):
                tools.add(step["tool"])
    return sorted(tools)


_M = TypeVar("_M", bound=Model)


# --- what a signature needs, in one read ------------------------------------------------------


@dataclass(frozen=True)
class SigningContext:
    """Everything issuance and refresh check and sign with, as the database holds it now.

    ``member`` is None when the team has no such member; ``version`` None when the agent's
    policy has published nothing; ``active_key`` None when no key is active (the signer then
    reads again, and creates the first keys on an empty database: plans.keys.active_signer).
    """

    member: Member | None
    role: str | None
    #: the member's group names, sorted
    groups: list[str]
    #: the agent's policy's active (newest) version, its ``policy`` loaded (slug)
    version: PolicyVersion | None
    #: the key that signs now: kid, state and encrypted private half only
    active_key: SigningKey | None
    #: the key ``verifying_kid`` names unless it was revoked (kid, state, public half)
    verifying_key: SigningKey | None = None
    verifying_kid: str | None = None
    #: the version of the agent's policy tried in shadow now (Policy.shadow_version)
    shadow: PolicyVersion | None = None


def _json_value(value: object) -> object:
    """A JSON column or aggregate as Python: SQLite (and Django's jsonb loader on
    PostgreSQL) answer text, psycopg parses ``json``."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _loaded(model: type[_M], **values: object) -> _M:
    """An instance of ``model`` as read from the database, with only ``values`` loaded (the
    rest deferred): Model.from_db takes them in the order of the model's fields."""
    names = [field.attname for field in model._meta.concrete_fields if field.attname in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])


_SIGNING_CONTEXT_SQL: dict[tuple[str, bool, bool], str] = {}


def _signing_context_sql(*, member_by_id: bool, verifying: bool) -> str:
    key = (connection.vendor, member_by_id, verifying)
    if key not in _SIGNING_CONTEXT_SQL:
        _SIGNING_CONTEXT_SQL[key] = _signing_context_statement(
            member_by_id=member_by_id, verifying=verifying
        )
    return _SIGNING_CONTEXT_SQL[key]


def _signing_context_statement(*, member_by_id: bool, verifying: bool) -> str:
    quote = connection.ops.quote_name
    member = quote(Member._meta.db_table)
    role = quote(Role._meta.db_table)
    member_groups = quote(Member.groups.through._meta.db_table)
    group = quote(Group._meta.db_table)
    version = quote(PolicyVersion._meta.db_table)
    policy = quote(Policy._meta.db_table)
    key = quote(SigningKey._meta.db_table)
    # json_agg on PostgreSQL, json_group_array on SQLite: the group names in one column.
    group_names = "json_agg" if connection.vendor == "postgresql" else "json_group_array"
    # LOWER(email) is what the (team, lower(email)) unique index holds: an index probe, as
    # MemberQuerySet.for_email. The active version is policies' own SQL of its rule.
    member_match = (
        "m.id = %s AND m.team_id = %s" if member_by_id else "m.team_id = %s AND LOWER(m.email) = %s"
    )
    # Only the models' own table names are formatted in; every value is a parameter.
    verifying_columns = "vk.kid, vk.state, vk.public_key " if verifying else "NULL, NULL, NULL "
    verifying_join = f" LEFT JOIN {key} vk ON vk.kid = %s AND vk.state <> %s" if verifying else ""
    return (
        "SELECT m.id, m.email, m.is_active, m.role_id, r.name, "  # noqa: S608
        f"(SELECT {group_names}(g.name) FROM {member_groups} mg "
        f"JOIN {group} g ON g.id = mg.group_id WHERE mg.member_id = m.id), "
        "v.id, v.number, v.hash, v.document, p.id, p.team_id, p.slug, p.shadow_version_id, "
        f"k.kid, k.state, k.private_key_encrypted, {verifying_columns}"
        "FROM (SELECT 1 AS one) AS request "
        f"LEFT JOIN {member} m ON {member_match} "
        f"LEFT JOIN {role} r ON r.id = m.role_id "
        f"LEFT JOIN {version} v ON v.id = ({policy_active_version_id_sql()}) "
        f"LEFT JOIN {policy} p ON p.id = v.policy_id "
        f"LEFT JOIN {key} k ON k.state = %s{verifying_join}"
    )


def signing_context_read(
    *,
    agent: Agent,
    member_email: str | None = None,
    member_id: int | None = None,
    verifying_kid: str | None = None,
) -> SigningContext:
    """The agent's team member (by ``member_email``, matched as MemberQuerySet.for_email
    matches it, or by ``member_id``) with their role and groups, the agent's active policy
    version and the active signing key, and, given ``verifying_kid``, that key unless it
    was revoked (the key a refresh token must verify with): one statement, read at every
    request, so a disabled member, a new policy version or a rotated or revoked key applies
    at the very next one.

    The ORM would take four queries, and building them cost five to ten times more than
    running this one statement (decision 0061). tests/plans/test_signing_context.py holds
    both to one answer on SQLite and PostgreSQL. The statement calls the one SQL home of
    "a policy's active version is its newest" (policies.selectors.
    policy_active_version_id_sql) and restates, in SQL, these rules of other homes:

    - a member by e-mail is ``LOWER(email)`` equal to the normalised address within the
      agent's team (``MemberQuerySet.for_email``, the (team, lower(email)) unique index);
    - a member's groups are the names of the groups of ``Member.groups``;
    - the active signing key is the one in state ``active`` (``unique_active_signing_key``);
    - a key a token names verifies unless it was revoked (``state <> 'revoked'``,
      plans.intent_tokens.signing_key_unrevoked).
    """
    if (member_email is None) == (member_id is None):
        raise TypeError("give exactly one of member_email and member_id")
    if member_id is not None:
        member_params: list[Any] = [member_id, agent.team_id]
    else:
        member_params = [agent.team_id, email_normalize(member_email or "")]
    params = [*member_params, agent.policy_id, SigningKey.State.ACTIVE]
    if verifying_kid is not None:
        params += [verifying_kid, SigningKey.State.REVOKED]
    with connection.cursor() as cursor:
        cursor.execute(
            _signing_context_sql(
                member_by_id=member_id is not None, verifying=verifying_kid is not None
            ),
            params,
        )
        row = cursor.fetchone()
    (
        member_pk, email, is_active, role_id, role_name, group_names,
        version_pk, number, version_hash, document, policy_pk, policy_team_id, slug,
        shadow_version_id, kid, state, private_key_encrypted,
        verifying_found, verifying_state, verifying_public_key,
    ) = row  # fmt: skip
    member = None
    if member_pk is not None:
        member = _loaded(
            Member,
            id=member_pk,
            team_id=agent.team_id,
            email=email,
            is_active=bool(is_active),
            role_id=role_id,
        )
    version = None
    if version_pk is not None:
        version = _loaded(
            PolicyVersion,
            id=version_pk,
            policy_id=policy_pk,
            number=number,
            hash=version_hash,
            document=_json_value(document),
        )
        version.policy = _loaded(
            Policy,
            id=policy_pk,
            team_id=policy_team_id,
            slug=slug,
            shadow_version_id=shadow_version_id,
        )
    active_key = None
    if kid is not None:
        active_key = _loaded(
            SigningKey, kid=kid, state=state, private_key_encrypted=private_key_encrypted
        )
    verifying_key = None
    if verifying_found is not None:
        verifying_key = _loaded(
            SigningKey, kid=verifying_found, state=verifying_state, public_key=verifying_public_key
        )
    names = _json_value(group_names) if member is not None else None
    groups = (
        sorted(name for name in names or [] if isinstance(name, str))
        if isinstance(names, list)
        else []
    )
    # A second statement only while a version is tried in shadow (docs/decisions/0076).
    shadow = (
        PolicyVersion.objects.select_related("policy").get(pk=shadow_version_id)
        if shadow_version_id is not None
        else None
    )
    return SigningContext(
        member=member,
        role=role_name,
        groups=groups,
        version=version,
        shadow=shadow,
        active_key=active_key,
        verifying_key=verifying_key,
        verifying_kid=verifying_kid,
    )


_PLAN_FOR_SIGNING_SQL: dict[str, str] = {}


def _plan_for_signing_sql() -> str:
    statement = _PLAN_FOR_SIGNING_SQL.get(connection.vendor)
    if statement is None:
        quote = connection.ops.quote_name
        columns = ", ".join(f"p.{quote(field.column)}" for field in Plan._meta.concrete_fields)
        # Only the models' own table and column names are formatted in.
        statement = _PLAN_FOR_SIGNING_SQL[connection.vendor] = (
            f"SELECT {columns}, m.email AS signing_member_email, "  # noqa: S608
            "m.is_active AS signing_member_is_active, "
            "t.log_call_arguments AS signing_team_log_call_arguments "
            f"FROM {quote(Plan._meta.db_table)} p "
            f"JOIN {quote(Member._meta.db_table)} m ON m.id = p.member_id "
            f"JOIN {quote(Team._meta.db_table)} t ON t.id = p.team_id "
            "WHERE p.id = %s AND p.agent_id = %s"
        )
    return statement


def plan_for_signing(*, agent: Agent, plan_id: str) -> Plan | None:
    """The agent's own plan ``plan_id`` (None for any other), with what signing it again
    reads of its member (e-mail, active) and of its team (``log_call_arguments``) loaded.

    One statement built once per process: plans.services.plan_get_for_agent answers the
    same plan through the ORM (tests/plans/test_signing_context.py holds both to one
    answer), but building that five-table query was a third of a refresh. Refresh reads
    the member's role and groups, the policy version and the key with
    ``signing_context_read``; anything else of the member or team is read on access.
    """
    found = list(Plan.objects.raw(_plan_for_signing_sql(), [plan_id, agent.pk]))
    if not found:
        return None
    plan = found[0]
    plan.member = _loaded(
        Member,
        id=plan.member_id,
        team_id=plan.team_id,
        email=getattr(plan, "signing_member_email"),  # noqa: B009 (a column of the statement)
        is_active=bool(getattr(plan, "signing_member_is_active")),  # noqa: B009
    )
    plan.team = _loaded(
        Team,
        id=plan.team_id,
        log_call_arguments=bool(getattr(plan, "signing_team_log_call_arguments")),  # noqa: B009
    )
    return plan
