"""Shared reads about plans and the guard's decisions: which policy version a decision was
made under, and which plans planned a given tool. The admin's lists, pages and timeline
call these instead of rebuilding the queries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypedDict

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

from .models import Plan, PlanEvent, PlanToken

if TYPE_CHECKING:
    from policies.models import PolicyVersion


class DecidedUnderAnnotations(TypedDict):
    """What ``decisions_with_policy_version`` adds to each decision, for type hints."""

    decided_under_version_id: int
    decided_under_version_number: int
    decided_under_policy_slug: str


def _token_in_force() -> QuerySet[PlanToken]:
    """For the decision ``OuterRef`` points at: the plan's tokens signed at or before it,
    newest first. The first one is the token the guard held when it decided, and so the
    policy snapshot (``pol``) it decided with."""
    return PlanToken.objects.filter(
        plan_id=OuterRef("plan_id"), issued_at__lte=OuterRef("occurred_at")
    ).order_by("-issued_at", "-id")


def decisions_with_policy_version(queryset: QuerySet[PlanEvent]) -> QuerySet[PlanEvent]:
    """Each decision with the policy version of the token in force when it was made
    (``decided_under_version_id``, ``_number`` and ``decided_under_policy_slug``), in the
    same query. A decision stamped before the plan's first token (the agent's clock a little
    behind the server's) is counted under the version the plan was issued with."""
    in_force = _token_in_force()
    return queryset.annotate(
        decided_under_version_id=Coalesce(
            Subquery(in_force.values("policy_version_id")[:1]),
            F("plan__policy_version_id"),
            output_field=BigIntegerField(),
        ),
        decided_under_version_number=Coalesce(
            Subquery(in_force.values("policy_version__number")[:1]),
            F("plan__policy_version__number"),
            output_field=PositiveIntegerField(),
        ),
        decided_under_policy_slug=Coalesce(
            Subquery(in_force.values("policy_version__policy__slug")[:1]),
            F("plan__policy_version__policy__slug"),
            output_field=CharField(),
        ),
    )


def decision_policy_version(event: PlanEvent) -> PolicyVersion:
    """The policy version one decision was made under (see ``decisions_with_policy_version``)."""
    token = (
        PlanToken.objects.filter(plan_id=event.plan_id, issued_at__lte=event.occurred_at)
        .select_related("policy_version__policy")
        .order_by("-issued_at", "-id")
        .first()
    )
    if token is not None:
        return token.policy_version
    return event.plan.policy_version


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
