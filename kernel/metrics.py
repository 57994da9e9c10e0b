"""Prometheus metrics of the request path, counted by the request middleware.

What is counted comes from the finished response, never from inside a service: the resolved
URL name says which endpoint answered, the status and the problem ``code`` say how, and an
event batch's answer (``events``, ``lost``, ``duplicate``) says what it stored. So the
services stay free of metrics code, and a refusal is counted by the same code its client
reads.

Several processes (gunicorn workers): with ``PROMETHEUS_MULTIPROC_DIR`` set in the
environment before the process starts, prometheus_client keeps every value in a memory-mapped
file per process in that folder, and a scrape adds them up (``exposition``). The folder must
be empty when the server starts (a file left by an earlier run would add its counts again).
Without it, values live in the process, which is right for one process and for tests.

The kernel imports no app: the endpoints are known here by their URL names (a test checks
that each still resolves), and what only an app can read (the signing key's age, the
queue's depth) is collected by the caller of ``exposition`` at scrape time.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.http import HttpRequest
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE_LATEST",
    "EVENTS_ROUTE",
    "ISSUANCE_ROUTE",
    "REFRESH_ROUTE",
    "exposition",
    "metrics_request_allowed",
    "observe_response",
]

ISSUANCE_ROUTE = "plan-create"  # POST /v1/plans
REFRESH_ROUTE = "plan-refresh"  # POST /v1/plans/{id}/refresh
EVENTS_ROUTE = "plan-events"  # POST /v1/plans/{id}/events

# Issuance answers in about a millisecond on an idle machine and refusals sooner; the
# buckets reach far enough to show a database that waits on a lock or a full pool.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)

ISSUANCE = Counter(
    "plangate_plan_issuance",
    "Plan declarations answered (POST /v1/plans), by result: issued, approval_requested, "
    "or the refusal's problem code",
    ["code"],
)
REFRESH = Counter(
    "plangate_plan_refresh",
    "Refreshes answered (POST /v1/plans/{id}/refresh), by result: issued, or the refusal's "
    "problem code",
    ["code"],
)
ISSUANCE_SECONDS = Histogram(
    "plangate_plan_issuance_duration_seconds",
    "Time to answer a plan declaration, refusals included, in the web process",
    buckets=LATENCY_BUCKETS,
)
REFRESH_SECONDS = Histogram(
    "plangate_plan_refresh_duration_seconds",
    "Time to answer a refresh, refusals included, in the web process",
    buckets=LATENCY_BUCKETS,
)
EVENTS_RECEIVED = Counter(
    "plangate_guard_events_received",
    "Guard decisions stored from event batches (a batch received again counts once)",
)
DECISIONS_LOST = Counter(
    "plangate_guard_decisions_lost",
    "Decisions the agents' guards reported as lost (not delivered) in their event batches",
)


def result_code(status: int, problem_code: str | None) -> str:
    """The label of an answer: the refusal's code, or what a success did."""
    if problem_code:
        return problem_code
    if status == 202:
        return "approval_requested"
    if status < 400:
        return "issued"
    return f"http_{status}"  # a refusal without a problem body (none is known today)


# Each label's child, looked up once: `labels()` takes a lock and builds a key every call.
_ISSUANCE_BY_CODE: dict[str, Counter] = {}
_REFRESH_BY_CODE: dict[str, Counter] = {}


def _child(counter: Counter, children: dict[str, Counter], code: str) -> Counter:
    child = children.get(code)
    if child is None:
        child = children[code] = counter.labels(code)
    return child


def observe_response(
    route: str | None,
    status: int,
    problem_code: str | None,
    seconds: float,
    body: Mapping[str, object] | None,
) -> None:
    """Count one answered request; requests to other endpoints cost one comparison."""
    if route == ISSUANCE_ROUTE:
        _child(ISSUANCE, _ISSUANCE_BY_CODE, result_code(status, problem_code)).inc()
        ISSUANCE_SECONDS.observe(seconds)
    elif route == REFRESH_ROUTE:
        _child(REFRESH, _REFRESH_BY_CODE, result_code(status, problem_code)).inc()
        REFRESH_SECONDS.observe(seconds)
    elif route == EVENTS_ROUTE and status == 202 and body is not None:
        # 202: stored now. A duplicate (200) was counted when it first came.
        events = body.get("events")
        lost = body.get("lost")
        if isinstance(events, int) and events > 0:
            EVENTS_RECEIVED.inc(events)
        if isinstance(lost, int) and lost > 0:
            DECISIONS_LOST.inc(lost)


def metrics_request_allowed(request: HttpRequest) -> bool:
    """Whether this request may read the metrics: they are on, a token is configured, and
    the request carries it as ``Authorization: Bearer <METRICS_TOKEN>``."""
    if not settings.METRICS_ENABLED:
        return False
    expected = settings.METRICS_TOKEN
    if not expected:
        return False  # never open to anyone: settings refuse to start like this
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


def exposition(scrape_collectors: Iterable[Collector] = ()) -> bytes:
    """The text exposition of every process's request metrics, then of ``scrape_collectors``
    (values read now, such as a key's age)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        output = generate_latest(registry)
    else:
        output = generate_latest(REGISTRY)
    scrape_registry = CollectorRegistry(auto_describe=False)
    for collector in scrape_collectors:
        scrape_registry.register(collector)
    return output + generate_latest(scrape_registry)
