"""Two delegations at once from one parent cannot both take its last calls (PostgreSQL,
real commits, three connections): each waits for the parent's row lock."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from kernel.problems import Code, DomainError
from plans import delegation
from plans.delegation import plan_delegate
from plans.models import Plan
from plans.services import plan_issue, plan_revoke
from tests.conftest import plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES, wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]

STEP = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 2}


def backends_waiting_for_a_lock() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_two_delegations_racing_for_the_last_calls_take_them_once(agent):
    parent = plan_issue(agent=agent.agent, document=plan_document())  # step 0: maxCalls 3
    answers: list[object] = []

    def delegate() -> None:
        try:
            answers.append(
                plan_delegate(
                    agent=agent.agent,
                    parent_id=parent.plan.pk,
                    document=plan_document(steps=[STEP]),
                )
            )
        except BaseException as exc:  # reported by the test, not lost in the thread
            answers.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=delegate, daemon=True) for _ in range(2)]
    with transaction.atomic():
        # Both delegations are past their checks and wait for the parent's row.
        Plan.objects.select_for_update().get(pk=parent.plan.pk)
        for thread in threads:
            thread.start()
        assert wait_for(lambda: backends_waiting_for_a_lock() >= 2, timeout=120)
    for thread in threads:
        thread.join(timeout=120)

    refused = [answer for answer in answers if isinstance(answer, BaseException)]
    assert len(answers) == 2 and len(refused) == 1, answers
    assert isinstance(refused[0], DomainError) and refused[0].code == Code.BUDGET_UNAVAILABLE
    children = Plan.objects.filter(parent_id=parent.plan.pk)
    assert [child.reserved["calls"] for child in children] == [{"0": 2}]


def test_a_revocation_racing_a_grandchilds_delegation_revokes_it(agent, monkeypatch):
    root = plan_issue(agent=agent.agent, document=plan_document()).plan
    child = plan_delegate(
        agent=agent.agent, parent_id=root.pk, document=plan_document(steps=[STEP])
    ).issued.plan
    holding, go = threading.Event(), threading.Event()
    reserve = delegation._reserve

    def reserve_and_wait(*args, **kwargs):
        # The delegation holds its parent's (the child's) row lock here.
        reserved = reserve(*args, **kwargs)
        holding.set()
        assert go.wait(timeout=120)
        return reserved

    monkeypatch.setattr(delegation, "_reserve", reserve_and_wait)
    answers: list[object] = []

    def run(work) -> None:
        try:
            answers.append(work())
        except BaseException as exc:  # reported by the test, not lost in the thread
            answers.append(exc)
        finally:
            connections.close_all()

    one = {**STEP, "maxCalls": 1}
    delegating = threading.Thread(
        target=run,
        args=(
            lambda: plan_delegate(
                agent=agent.agent, parent_id=child.pk, document=plan_document(steps=[one])
            ),
        ),
        daemon=True,
    )
    delegating.start()
    assert holding.wait(timeout=120)
    revoking = threading.Thread(
        target=run,
        args=(lambda: plan_revoke(plan=Plan.objects.get(pk=root.pk), by="admin"),),
        daemon=True,
    )
    revoking.start()
    assert wait_for(lambda: backends_waiting_for_a_lock() >= 1, timeout=120)
    go.set()
    for thread in (delegating, revoking):
        thread.join(timeout=120)

    assert not [answer for answer in answers if isinstance(answer, BaseException)], answers
    statuses = set(Plan.objects.values_list("status", flat=True))
    assert Plan.objects.count() == 3
    assert statuses == {Plan.Status.REVOKED}
