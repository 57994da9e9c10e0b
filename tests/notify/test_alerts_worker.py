"""A real Celery worker and beat (PostgreSQL and Redis, as in production) find a lost
decision in the audit trail, raise the team's alert and deliver it to a local webhook
receiver, retrying the receiver's 500."""

from __future__ import annotations

import json

from controlplane.celery import app
from notify.alerts import alert_rule_save
from notify.models import Alert, AlertDelivery, AlertRule
from notify.webhooks import team_webhook_save
from tests.integration.processes import REAL_WORKER_MARKS, running_worker, wait_for
from tests.notify.test_alerts import STREAM, declare

pytestmark = [*REAL_WORKER_MARKS]


def test_beat_and_a_worker_raise_and_deliver_an_alert_retrying_a_failure(
    tmp_path, team, agent, receiver
):
    receiver.statuses = [500]
    team_webhook_save(team=team, url=receiver.url, secret="whsec-0123456789abcdef")
    alert_rule_save(
        rule=AlertRule(team=team, kind=AlertRule.Kind.DECISIONS_LOST, channels=["webhook"])
    )
    plan_id = declare(agent).json()["id"]
    response = agent.client.post(
        f"/v1/plans/{plan_id}/events",
        {"stream": STREAM, "seq": 1, "events": [], "lost": 3},
        format="json",
    )
    assert response.status_code == 202, response.content

    def attempts() -> list[tuple[int, int | None]]:
        return list(AlertDelivery.objects.order_by("attempt").values_list("attempt", "status_code"))

    previous_queue = app.conf.task_default_queue
    try:
        with running_worker(
            tmp_path, beat=True, AUDIT_SEAL_SECONDS="1", ALERT_SCAN_SECONDS="1"
        ) as worker:
            app.conf.task_default_queue = worker.queue
            delivered = wait_for(lambda: len(attempts()) >= 2, timeout=90, interval=0.5)
            assert delivered, f"attempts: {attempts()}\n{worker.tail()}"
    finally:
        app.conf.task_default_queue = previous_queue

    assert attempts() == [(1, 500), (2, 200)]
    (alert,) = Alert.objects.all()
    assert (alert.subject, alert.kind) == (plan_id, "decisions_lost")
    bodies = [json.loads(request.body) for request in receiver.received]
    assert [body["alert"]["id"] for body in bodies] == [alert.pk, alert.pk]
    assert bodies[0]["alert"]["url"].endswith(f"/admin/plans/plan/{plan_id}/change/")
