"""GET /metrics: who may read it, and what the request path counts into it.

The counters are process-wide (prometheus_client's registry), so each test reads them
through a scrape before and after, and asserts on the difference.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from controlplane.celery import app as celery_app
from kernel import metrics
from kernel.problems import PROBLEM_CONTENT_TYPE, Code
from plans.models import PlanEvent, SigningKey
from tests.conftest import plan_document
from tests.integration.processes import IS_REDIS, NEEDS_REDIS, forget_queue, unique_queue

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "metrics-token-for-tests-0123456789"
ENABLED = override_settings(METRICS_ENABLED=True, METRICS_TOKEN=TOKEN)
STREAM = "5e1f0c2d3b4a59687766554433221100"
AT = "2026-11-30T09:00:00.250Z"


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def declare(persona, document=None):
    return persona.client.post("/v1/plans", {"plan": document or plan_document()}, format="json")


def assert_not_found(response) -> None:
    assert response.status_code == 404
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE
    assert response.json()["code"] == Code.NOT_FOUND


def test_metrics_are_not_found_while_disabled():
    assert settings.METRICS_ENABLED is False  # the default
    assert_not_found(Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))


@ENABLED
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789abcdef", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"],
    ids=["none", "wrong", "basic", "longer", "empty"],
)
def test_metrics_without_the_token_are_not_found(authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    assert_not_found(Client().get("/metrics", **headers))


@override_settings(METRICS_ENABLED=True, METRICS_TOKEN="")
def test_metrics_with_no_token_configured_are_closed_to_everyone():
    assert_not_found(Client().get("/metrics", HTTP_AUTHORIZATION="Bearer "))


def test_the_counted_endpoints_still_resolve():
    # The kernel knows them by URL name only: a renamed route must fail here, not go dark.
    assert reverse(metrics.ISSUANCE_ROUTE) == "/v1/plans"
    assert reverse(metrics.REFRESH_ROUTE, kwargs={"plan_id": "p"}) == "/v1/plans/p/refresh"
    assert reverse(metrics.EVENTS_ROUTE, kwargs={"plan_id": "p"}) == "/v1/plans/p/events"


@ENABLED
def test_issuance_and_refresh_are_counted_by_code_and_timed(agent):
    before = scrape()

    issued = declare(agent)
    denied = declare(agent, plan_document(steps=[{"tool": "shell_exec"}]))
    invalid = declare(agent, {"version": 1})
    assert (issued.status_code, denied.status_code, invalid.status_code) == (201, 403, 400)
    plan = issued.json()
    refreshed = agent.client.post(
        f"/v1/plans/{plan['id']}/refresh", {"token": plan["token"]}, format="json"
    )
    unknown = agent.client.post(
        "/v1/plans/01J0000000000000000000000Z/refresh", {"token": plan["token"]}, format="json"
    )
    assert (refreshed.status_code, unknown.status_code) == (200, 404)
    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("plangate_plan_issuance_total", code="issued") == 1
    assert delta("plangate_plan_issuance_total", code=Code.POLICY_DENIED) == 1
    assert delta("plangate_plan_issuance_total", code=invalid.json()["code"]) == 1
    assert delta("plangate_plan_issuance_duration_seconds_count") == 3
    assert delta("plangate_plan_issuance_duration_seconds_sum") > 0
    assert delta("plangate_plan_refresh_total", code="issued") == 1
    assert delta("plangate_plan_refresh_total", code=Code.PLAN_NOT_FOUND) == 1
    assert delta("plangate_plan_refresh_duration_seconds_count") == 2


@ENABLED
def test_events_received_and_decisions_lost_are_counted_once_per_batch(agent):
    plan = declare(agent).json()
    events = [
        {"at": AT, "tool": "github_list_issues", "decision": "allowed", "step": 0},
        {"at": AT, "tool": "send_email", "decision": "not_in_plan", "reason": "no step"},
    ]
    batch = {"stream": STREAM, "seq": 1, "events": events, "lost": 3}
    before = scrape()

    first = agent.client.post(f"/v1/plans/{plan['id']}/events", batch, format="json")
    again = agent.client.post(f"/v1/plans/{plan['id']}/events", batch, format="json")
    after = scrape()

    assert (first.status_code, again.json()["duplicate"]) == (202, True)
    assert PlanEvent.objects.filter(plan_id=plan["id"]).count() == 2
    received = value(after, "plangate_guard_events_received_total") - value(
        before, "plangate_guard_events_received_total"
    )
    lost = value(after, "plangate_guard_decisions_lost_total") - value(
        before, "plangate_guard_decisions_lost_total"
    )
    assert (received, lost) == (2, 3)


@ENABLED
def test_other_requests_count_nothing(agent):
    before = scrape()
    assert Client().get("/healthz").status_code == 200
    assert agent.client.get("/v1/plans/01J0000000000000000000000Z").status_code == 404
    after = scrape()

    assert {key: after[key] for key in after if key[0].startswith("plangate_plan_")} == {
        key: before[key] for key in before if key[0].startswith("plangate_plan_")
    }


@ENABLED
def test_the_signing_key_age_is_read_at_scrape(agent):
    assert declare(agent).status_code == 201  # the first signature makes the first keys
    active = SigningKey.objects.get(state=SigningKey.State.ACTIVE)
    started = active.activated_at or active.created_at
    lower = (timezone.now() - started).total_seconds()

    age = value(scrape(), "plangate_signing_key_age_seconds")

    upper = (timezone.now() - started).total_seconds()
    assert lower <= age <= upper


@ENABLED
def test_no_signing_key_leaves_the_age_out(db):
    assert not SigningKey.objects.exists()
    assert ("plangate_signing_key_age_seconds", ()) not in scrape()


@pytest.mark.redis
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
def test_the_broker_queue_depth_is_read_at_scrape(db):
    queue = unique_queue()
    try:
        with override_settings(
            METRICS_ENABLED=True, METRICS_TOKEN=TOKEN, CELERY_TASK_DEFAULT_QUEUE=queue
        ):
            empty = value(scrape(), "plangate_celery_queue_depth", queue=queue)
            for _ in range(3):
                celery_app.send_task("plans.tasks.expire_plans", queue=queue)
            waiting = value(scrape(), "plangate_celery_queue_depth", queue=queue)
    finally:
        forget_queue(queue)
    assert (empty, waiting) == (0, 3)


@override_settings(
    METRICS_ENABLED=True,
    METRICS_TOKEN=TOKEN,
    CELERY_BROKER_URL="redis://127.0.0.1:1/0",  # nothing listens on port 1
)
def test_an_unreachable_broker_leaves_the_depth_out_and_the_scrape_answers(db):
    samples = scrape()
    assert not any(name == "plangate_celery_queue_depth" for name, _labels in samples)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"METRICS_ENABLED": "true"}, "METRICS_ENABLED needs METRICS_TOKEN"),
        ({"METRICS_ENABLED": "true", "METRICS_TOKEN": "short"}, "METRICS_ENABLED needs"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT must be"),
    ],
    ids=["metrics-without-token", "metrics-short-token", "unknown-log-format"],
)
def test_unsafe_or_unknown_observability_settings_refuse_to_start(environment, message):
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        **environment,
    }
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr
