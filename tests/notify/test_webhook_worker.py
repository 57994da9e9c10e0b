"""A real Celery worker sends the approvers' e-mail and delivers the approval webhook a
waiting plan queued, retrying a receiver that fails once (PostgreSQL and Redis, as in
production)."""

from __future__ import annotations

from audit.models import AuditRecord
from controlplane.celery import app
from notify.models import WebhookDelivery
from notify.webhooks import team_webhook_save
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for
from tests.notify.conftest import request_approval

pytestmark = [*REAL_WORKER_MARKS]


def test_a_real_worker_delivers_the_webhook_and_retries_a_failure(
    tmp_path, team, review_agent, approver, receiver
):
    receiver.statuses = [502]
    team_webhook_save(team=team, url=receiver.url, secret="whsec-0123456789abcdef")
    previous_queue = app.conf.task_default_queue
    try:
        with running_worker(tmp_path) as worker:
            app.conf.task_default_queue = worker.queue
            # Committed at once (a transactional test): the signal queues the task to Redis.
            plan = request_approval(review_agent)

            def attempts() -> list[tuple[int, int | None]]:
                return list(
                    WebhookDelivery.objects.filter(plan_id=plan.pk)
                    .order_by("attempt")
                    .values_list("attempt", "status_code")
                )

            def emailed() -> list[AuditRecord]:
                return list(
                    AuditRecord.objects.filter(
                        plan_id=plan.pk,
                        kind=AuditRecord.Kind.APPROVAL_NOTIFIED,
                        details__channel="email",
                    )
                )

            delivered = wait_for(
                lambda: len(attempts()) >= 2 and bool(emailed()), timeout=90, interval=0.5
            )
            assert delivered, f"attempts: {attempts()}, e-mailed: {emailed()}\n{worker.tail()}"
    finally:
        app.conf.task_default_queue = previous_queue

    assert attempts() == [(1, 502), (2, 200)]
    assert len(receiver.received) == 2
    # The worker's console e-mail backend printed the message; its record names the task.
    (record,) = emailed()
    assert record.actor == "celery notify.tasks.email_approvers"
    assert record.details["to"] == ["april@acme.dev"]
    assert "Subject: [Plangate] Approval needed: Deploy the fix" in worker.output()
