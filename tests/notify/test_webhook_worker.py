"""A real Celery worker sends the approvers' e-mail and delivers the approval webhook a
waiting plan queued, retrying a receiver that fails once (PostgreSQL and Redis, as in
production)."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from controlplane.celery import app
from notify.models import WebhookDelivery
from notify.webhooks import team_webhook_save
from tests.integration.processes import (
    IS_POSTGRES,
    IS_REDIS,
    NEEDS_POSTGRES,
    NEEDS_REDIS,
    forget_queue,
    process_env,
    start,
    stop,
    tail,
    unique_queue,
    wait_for,
    worker_args,
)
from tests.notify.conftest import request_approval


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_the_webhook_and_retries_a_failure(
    tmp_path, team, review_agent, approver, receiver
):
    receiver.statuses = [502]
    team_webhook_save(team=team, url=receiver.url, secret="whsec-0123456789abcdef")
    queue = unique_queue()
    log = tmp_path / "worker.log"
    worker = start(worker_args(queue), env=process_env(CELERY_TASK_DEFAULT_QUEUE=queue), log=log)
    previous_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
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
        assert delivered, f"attempts: {attempts()}, e-mailed: {emailed()}\n{tail(log)}"
    finally:
        app.conf.task_default_queue = previous_queue
        stop(worker)
        forget_queue(queue)

    assert attempts() == [(1, 502), (2, 200)]
    assert len(receiver.received) == 2
    # The worker's console e-mail backend printed the message; its record names the task.
    (record,) = emailed()
    assert record.actor == "celery notify.tasks.email_approvers"
    assert record.details["to"] == ["april@acme.dev"]
    assert "Subject: [Plangate] Approval needed: Deploy the fix" in log.read_text()
