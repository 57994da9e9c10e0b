"""Shared reads about plans and the guard's decisions: which policy version a decision was
made under, and which plans planned a given tool. The admin's lists, pages and timeline
call these instead of rebuilding the queries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from django.db import connection
from django.db.models import (
    BigIntegerField,
    BooleanField,
    CharField,
    F,
    OuterRef,
    PositiveIntegerField,
    QuerySet,
    Subquery,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from policies.models import PolicyVersion

from .models import Plan, PlanEvent, PlanToken


class DecidedUnderAnnotations(TypedDict):
    """What ``decisions_with_policy_version`` adds to each decision, for type hints."""

    decided_under_version_id: int
    decided_under_version_number: int
    decided_under_policy_slug: str


def _tokens_of_the_plan() -> QuerySet[PlanToken]:
    """The tokens of the plan of the decision ``OuterRef`` points at, newest first."""
    return PlanToken.objects.filter(plan_id=OuterRef("plan_id")).order_by("-issued_at", "-id")


def decisions_with_policy_version(queryset: QuerySet[PlanEvent]) -> QuerySet[PlanEvent]:
    """Each decision with the policy version it was made under (``decided_under_version_id``,
    ``_number`` and ``decided_under_policy_slug``), in the same query.

    The guard reports the version number of the token it held (``policy_version``): the
    version is that of the plan's token carrying that number, the one in force at the time
    first. A decision from a guard that reported no number is counted under the token in
    force when it was made, by time; one stamped before the plan's first token (the
    agent's clock a little behind) under the version the plan was issued with.
    """
    tokens = _tokens_of_the_plan()
    by_time = tokens.filter(issued_at__lte=OuterRef("occurred_at"))
    reported = tokens.filter(policy_version__number=OuterRef("policy_version"))
    reported_in_force = by_time.filter(policy_version__number=OuterRef("policy_version"))
    version = PolicyVersion.objects.filter(pk=OuterRef("decided_under_version_id"))
    return queryset.annotate(
        decided_under_version_id=Coalesce(
            Subquery(reported_in_force.values("policy_version_id")[:1]),
            Subquery(reported.values("policy_version_id")[:1]),
            Subquery(by_time.values("policy_version_id")[:1]),
            F("plan__policy_version_id"),
            output_field=BigIntegerField(),
        )
    ).annotate(
        decided_under_version_number=Subquery(
            version.values("number")[:1], output_field=PositiveIntegerField()
        ),
        decided_under_policy_slug=Subquery(
            version.values("policy__slug")[:1], output_field=CharField()
        ),
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
