"""The policy version a decision was made under is resolved once, when the decision arrives,
and stored on it (PlanEvent.decided_under): held here to the answer of the per-row rule it
replaced (``old_rule``: the SQL the auditor's pages computed for every row, kept as the
oracle), for decisions that came through the intake and for those the migration resolved
(plans.decided_under, the rule's one home)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import BigIntegerField, F, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.decisions import Decision
from plans import decided_under as decided_under_module
from plans.event_intake import plan_events_record
from plans.models import Plan, PlanEvent, PlanToken
from plans.services import plan_issue, plan_refresh
from policies.models import PolicyVersion
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

# --- the oracle: the per-row rule the auditor's pages computed before the column ---------


def old_rule(queryset: QuerySet[PlanEvent]) -> QuerySet[PlanEvent]:
    """Each decision with ``old_version_id``: the token carrying the reported number that
    was in force, else the newest token carrying it, else the token in force by time, else
    the plan's own version (plans.selectors before the column, verbatim in its logic)."""
    tokens = PlanToken.objects.filter(plan_id=OuterRef("plan_id")).order_by("-issued_at", "-id")
    by_time = tokens.filter(issued_at__lte=OuterRef("occurred_at"))
    reported = tokens.filter(policy_version__number=OuterRef("policy_version"))
    reported_in_force = by_time.filter(policy_version__number=OuterRef("policy_version"))
    return queryset.annotate(
        old_version_id=Coalesce(
            Subquery(reported_in_force.values("policy_version_id")[:1]),
            Subquery(reported.values("policy_version_id")[:1]),
            Subquery(by_time.values("policy_version_id")[:1]),
            F("plan__policy_version_id"),
            output_field=BigIntegerField(),
        )
    )


def stored_and_old(plan: Plan) -> list[tuple[int, int]]:
    rows = old_rule(PlanEvent.objects.filter(plan=plan)).order_by("id")
    return list(rows.values_list("decided_under_id", "old_version_id"))


# --- a plan refreshed under a new version, then under another policy ---------------------


def edited(number: int) -> dict[str, Any]:
    """POLICY with one more rule per edit (an unchanged document publishes no version)."""
    extra = [{"effect": "deny", "tools": [f"tool_{index}"]} for index in range(number)]
    return {**POLICY, "rules": [*POLICY["rules"], *extra]}


NOW = timezone.now().replace(microsecond=0)
T0, T1, T2 = NOW - timedelta(hours=3), NOW - timedelta(hours=2), NOW - timedelta(hours=1)
MINUTE = timedelta(minutes=1)


def _last_token(plan: Plan) -> PlanToken:
    return plan.tokens.order_by("-issued_at", "-id").first()  # type: ignore[return-value]


@pytest.fixture
def refreshed_twice(team, agent, policy_version) -> dict[str, Any]:
    """A plan issued at T0 under default v1; refreshed at T1 under default v2 (a new
    version); refreshed at T2 under another policy's v1 (the agent moved to it): two
    versions numbered 1 among its tokens."""
    issued = plan_issue(agent=agent.agent, document=plan_document())
    plan = issued.plan
    PlanToken.objects.filter(pk=_last_token(plan).pk).update(issued_at=T0)
    a2 = policy_set(team=team, slug="default", document=edited(1), comment="v2")
    second = plan_refresh(agent=agent.agent, plan_id=plan.pk, token=issued.token)
    PlanToken.objects.filter(pk=_last_token(plan).pk).update(issued_at=T1)
    b1 = policy_set(team=team, slug="other", document=POLICY, comment="other v1")
    agent.agent.policy = b1.policy
    agent.agent.save(update_fields=["policy"])
    plan_refresh(agent=agent.agent, plan_id=plan.pk, token=second.token)
    PlanToken.objects.filter(pk=_last_token(plan).pk).update(issued_at=T2)
    assert sorted(plan.tokens.values_list("policy_version__number", flat=True)) == [1, 1, 2]
    return {"plan": plan, "a1": policy_version.pk, "a2": a2.pk, "b1": b1.pk}


#: (when, reported number) -> which version the decision was made under
CASES = [
    # Stamped before the first token (the agent's clock behind).
    (T0 - MINUTE, None, "a1"),  # the plan's own version
    (T0 - MINUTE, 2, "a2"),  # the newest token carrying 2
    (T0 - MINUTE, 1, "b1"),  # the newest token carrying 1
    # Under the first token.
    (T0 + MINUTE, None, "a1"),
    (T0 + MINUTE, 1, "a1"),
    (T0 + MINUTE, 2, "a2"),  # a newer token's number: that token's version
    # After the refresh under v2: a guard still holding the v1 token says so.
    (T1 + MINUTE, None, "a2"),
    (T1 + MINUTE, 1, "a1"),
    (T1 + MINUTE, 2, "a2"),
    # After the move to the other policy: its v1 is the 1 in force.
    (T2 + MINUTE, None, "b1"),
    (T2 + MINUTE, 1, "b1"),
    (T2 + MINUTE, 2, "a2"),
    # On the second a token was issued: it is in force.
    (T1, None, "a2"),
    (T2, 1, "b1"),
]


def wire(when: datetime, reported: int | None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "at": when.isoformat().replace("+00:00", "Z"),
        "tool": "github_get_issue",
        "decision": Decision.ALLOWED,
        "step": 1,
    }
    if reported is not None:
        event["policyVersion"] = reported
    return event


def test_the_intake_stores_the_version_the_old_rule_computed(agent, refreshed_twice):
    plan = refreshed_twice["plan"]
    body = {"stream": "s" * 32, "seq": 1, "events": [wire(at, number) for at, number, _ in CASES]}

    response = agent.client.post(f"/v1/plans/{plan.pk}/events", body, format="json")

    assert response.status_code == 202, response.content
    pairs = stored_and_old(plan)
    assert [stored for stored, _ in pairs] == [refreshed_twice[name] for _, _, name in CASES]
    assert all(stored == old for stored, old in pairs)


def test_each_decision_record_names_the_stored_version(agent, refreshed_twice):
    from audit.models import AuditRecord

    plan = refreshed_twice["plan"]
    body = {"stream": "r" * 32, "seq": 1, "events": [wire(at, number) for at, number, _ in CASES]}
    assert agent.client.post(f"/v1/plans/{plan.pk}/events", body, format="json").status_code == 202

    versions = {
        version.pk: (version.policy.slug, version.number)
        for version in PolicyVersion.objects.select_related("policy")
    }
    records = AuditRecord.objects.filter(plan_id=plan.pk, kind=AuditRecord.Kind.DECISION)
    recorded = list(records.order_by("id").values_list("policy", "policy_version"))
    stored = PlanEvent.objects.filter(plan=plan).order_by("id")
    assert recorded == [versions[event.decided_under_id] for event in stored]


# --- any tokens, any decisions -------------------------------------------------------------

offsets = st.integers(min_value=-5, max_value=5).map(lambda minutes: T1 + minutes * MINUTE)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    tokens=st.lists(st.tuples(offsets, st.sampled_from(["a1", "a2", "b1", "b2"])), max_size=4),
    first_at=offsets,
    events=st.lists(st.tuples(offsets, st.sampled_from([None, 1, 2])), min_size=1, max_size=12),
)
def test_any_tokens_and_decisions_resolve_as_the_old_rule(
    team, agent, versions_of_two_policies, tokens, first_at, events
):
    issued = plan_issue(agent=agent.agent, document=plan_document())
    plan = issued.plan
    PlanToken.objects.filter(plan=plan).update(issued_at=first_at)
    template = PlanToken.objects.get(plan=plan)
    for at, name in tokens:
        PlanToken.objects.create(
            plan=plan,
            kind=PlanToken.Kind.REFRESH,
            kid=template.kid,
            issued_at=at,
            expires_at=at + timedelta(minutes=15),
            policy_version_id=versions_of_two_policies[name],
        )

    carried = {
        plan.policy_version.number,
        *plan.tokens.values_list("policy_version__number", flat=True),
    }
    events = [(at, number if number in carried else None) for at, number in events]

    plan_events_record(
        agent=agent.agent,
        plan_id=plan.pk,
        batch={"stream": "h" * 32, "seq": 1, "events": [wire(at, n) for at, n in events]},
    )

    pairs = stored_and_old(plan)
    assert len(pairs) == len(events)
    assert all(stored == old for stored, old in pairs), pairs


@pytest.fixture
def versions_of_two_policies(team, policy_version) -> dict[str, int]:
    """default v1 and v2, other v1 and v2: each number twice."""
    a2 = policy_set(team=team, slug="default", document=edited(1))
    b1 = policy_set(team=team, slug="other", document=POLICY)
    b2 = policy_set(team=team, slug="other", document=edited(2))
    assert [a2.number, b1.number, b2.number] == [2, 1, 2]
    return {"a1": policy_version.pk, "a2": a2.pk, "b1": b1.pk, "b2": b2.pk}


# --- the migration resolves the decisions stored before the column -------------------------

BEFORE = [("plans", "0006_plan_event_timeline_index")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_resolves_stored_decisions_by_the_same_rule(
    agent, refreshed_twice, monkeypatch
):
    plan = refreshed_twice["plan"]
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    OldPlanEvent = old_apps.get_model("plans", "PlanEvent")
    OldPlanEvent.objects.bulk_create(
        OldPlanEvent(
            plan_id=plan.pk,
            occurred_at=at,
            tool="github_get_issue",
            decision=Decision.ALLOWED,
            policy_version=number,
        )
        for at, number, _ in CASES * 3
    )
    # Batches of 4 rows: the 42 rows take 11 batches, each its own transaction.
    monkeypatch.setattr(decided_under_module, "BACKFILL_BATCH_SIZE", 4)

    call_command("migrate", verbosity=0)

    pairs = stored_and_old(plan)
    assert [stored for stored, _ in pairs] == [refreshed_twice[n] for _, _, n in CASES * 3]
    assert all(stored == old for stored, old in pairs)
