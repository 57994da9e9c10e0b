"""A refusal raised inside the refused request's own transaction is still recorded: its
record is written after that transaction rolled back, in one of its own (PostgreSQL, real
commits, two connections)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from audit.models import AuditRecord
from kernel.problems import Code
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from tests.conftest import plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES, wait_for

from .helpers import assert_problem

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]


def another_backend_waits_for_a_lock() -> bool:
    with connection.cursor() as cursor:
        # Statistics views are a snapshot per transaction: take a fresh one each time.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0


def test_a_refresh_that_loses_the_race_to_a_revocation_is_recorded_after_its_rollback(agent):
    issued = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    answers: list = []
    errors: list[BaseException] = []

    def refresh() -> None:
        try:
            answers.append(
                agent.client.post(
                    f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
                )
            )
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        # Hold the plan's row: the refresh checks the plan, signs, then waits here for it.
        plan = Plan.objects.select_for_update().get(pk=issued["id"])
        thread = threading.Thread(target=refresh, daemon=True)
        thread.start()
        assert wait_for(another_backend_waits_for_a_lock, timeout=120)
        plan_revoke(plan=plan, by="the race")
    thread.join(timeout=120)

    assert not errors, errors
    assert_problem(answers[0], 410, Code.PLAN_REVOKED)
    assert PlanToken.objects.filter(plan_id=issued["id"]).count() == 1  # rolled back
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.REFRESH_REFUSED)
    assert (record.code, record.plan_id) == (Code.PLAN_REVOKED, issued["id"])
    assert not AuditRecord.objects.filter(kind=AuditRecord.Kind.TOKEN_REFRESHED).exists()
