"""Two people deciding on one plan at once make one decision (PostgreSQL, real commits, two
connections): the second waits for the first's row lock, then finds the plan decided."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from audit.models import AuditRecord
from kernel.problems import Code, DomainError
from plans.approvals import plan_approval_decide
from plans.models import Plan
from plans.services import plan_issue
from policies.services import policy_set
from tests.conftest import plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES, wait_for

from .approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for
from .test_refusal_after_rollback import another_backend_waits_for_a_lock

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
]


def test_a_denial_racing_an_approval_is_refused_once_the_approval_commits(agent, team):
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    plan_id = plan_issue(
        agent=agent.agent, document=plan_document(steps=REVIEWED_PLAN_STEPS)
    ).plan.pk
    carol, dan = approver_for(team), approver_for(team, "dan@acme.dev", "dan")
    errors: list[BaseException] = []

    def deny() -> None:
        try:
            plan_approval_decide(
                plan=Plan.objects.get(pk=plan_id), by_user=dan, approve=False, reason="no"
            )
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        # Carol's decision holds the row; Dan's waits for it inside plan_approval_decide.
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        thread = threading.Thread(target=deny, daemon=True)
        thread.start()
        assert wait_for(another_backend_waits_for_a_lock, timeout=120)
        plan_approval_decide(plan=plan, by_user=carol, approve=True)
    thread.join(timeout=120)

    assert len(errors) == 1 and isinstance(errors[0], DomainError), errors
    assert errors[0].code == Code.APPROVAL_NOT_PENDING
    plan = Plan.objects.get(pk=plan_id)
    assert (plan.approval, plan.approval_by) == (Plan.Approval.APPROVED, "carol@acme.dev")
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.APPROVAL_DECIDED).count() == 1
