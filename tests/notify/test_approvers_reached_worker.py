"""A real Celery worker e-mails the superusers about a plan whose member is the team's only
approver (PostgreSQL and Redis, as in production; docs/decisions/0057)."""

from __future__ import annotations

from django.contrib.auth.models import User

from audit.models import AuditRecord
from controlplane.celery import app
from tests.admin.conftest import PASSWORD
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for
from tests.notify.conftest import request_approval

pytestmark = [*REAL_WORKER_MARKS]


def test_a_real_worker_emails_the_superusers_when_the_member_is_the_only_approver(
    tmp_path, team, review_agent, alice_approver
):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    previous_queue = app.conf.task_default_queue
    try:
        with running_worker(tmp_path) as worker:
            app.conf.task_default_queue = worker.queue
            # Committed at once (a transactional test): the signal queues the task to Redis.
            plan = request_approval(review_agent)

            def emailed() -> list[AuditRecord]:
                return list(
                    AuditRecord.objects.filter(
                        plan_id=plan.pk,
                        kind=AuditRecord.Kind.APPROVAL_NOTIFIED,
                        details__channel="email",
                    )
                )

            assert wait_for(lambda: bool(emailed()), timeout=90, interval=0.5), worker.tail()
    finally:
        app.conf.task_default_queue = previous_queue

    (record,) = emailed()
    assert record.actor == "celery notify.tasks.email_approvers"
    assert record.details == {
        "channel": "email",
        "to": ["root@example.test"],
        "reach": "superusers",
    }
    output = worker.output()
    assert "Subject: [Plangate] Approval needed: Deploy the fix" in output
    assert "To: root@example.test" in output
    assert "You are asked as a superuser" in output
