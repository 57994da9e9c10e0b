"""``GET /metrics``: Prometheus metrics, for a scraper holding ``METRICS_TOKEN``.

The request path's counters and histograms are kept by the kernel's middleware
(kernel.metrics); the values below are read at scrape time, so they cost nothing between
scrapes and are never stale: the active signing key's age and the broker queue's depth.
Anything else, or a scrape while ``METRICS_ENABLED`` is off, is answered 404 ``not_found``,
as for a path that does not exist: a scanner learns nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kernel.metrics import CONTENT_TYPE_LATEST, exposition, metrics_request_allowed
from kernel.problems import PROBLEM_CONTENT_TYPE, problem_body
from plans.models import SigningKey

logger = logging.getLogger(__name__)

# A scrape must answer even when the broker does not: each read of it is bounded by this.
BROKER_TIMEOUT_SECONDS = 0.5
# kombu's Redis transport keeps a queue as one list per priority step (0, 3, 6, 9): the
# queue's own name for 0, the name, this separator and the step for the others.
_KOMBU_PRIORITY_SEPARATOR = "\x06\x16"
_KOMBU_PRIORITY_STEPS = (0, 3, 6, 9)


def active_signing_key_age_seconds() -> float | None:
    """Seconds since the active key began signing (since it was made, for a first key)."""
    row = (
        SigningKey.objects.filter(state=SigningKey.State.ACTIVE)
        .values_list("activated_at", "created_at")
        .first()
    )
    if row is None:
        return None
    activated_at, created_at = row
    return (timezone.now() - (activated_at or created_at)).total_seconds()


def broker_queue_depth(queue: str) -> int | None:
    """Messages waiting in the Celery queue, or None when the broker cannot say quickly."""
    url = settings.CELERY_BROKER_URL
    if url.startswith(("redis://", "rediss://")):
        import redis

        client = redis.Redis.from_url(
            url,
            socket_timeout=BROKER_TIMEOUT_SECONDS,
            socket_connect_timeout=BROKER_TIMEOUT_SECONDS,
        )
        try:
            pipeline = client.pipeline(transaction=False)
            for step in _KOMBU_PRIORITY_STEPS:
                pipeline.llen(queue if step == 0 else f"{queue}{_KOMBU_PRIORITY_SEPARATOR}{step}")
            return sum(int(length) for length in pipeline.execute())
        finally:
            client.close()
    if url.startswith("filesystem://"):
        # kombu's filesystem transport: one file per message, named <...>.<queue>.msg.
        folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
        if not folder.is_dir():
            return 0
        return sum(1 for _ in folder.glob(f"*.{queue}.msg"))
    return None


class ScrapeTimeCollector(Collector):
    """Values read when Prometheus scrapes; one that cannot be read is left out (and
    logged), so a broker outage never fails the whole scrape."""

    def collect(self) -> Iterator[Metric]:
        try:
            age = active_signing_key_age_seconds()
        except DatabaseError:
            logger.warning("metrics: the signing key's age could not be read", exc_info=True)
            age = None
        if age is not None:
            yield GaugeMetricFamily(
                "plangate_signing_key_age_seconds",
                "Seconds since the active signing key began signing",
                value=age,
            )
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        try:
            depth = broker_queue_depth(queue)
        except Exception:  # any broker or client error: the gauge is left out this time
            logger.warning("metrics: the broker queue's depth could not be read", exc_info=True)
            depth = None
        if depth is not None:
            gauge = GaugeMetricFamily(
                "plangate_celery_queue_depth",
                "Tasks waiting in the Celery broker queue",
                labels=["queue"],
            )
            gauge.add_metric([queue], depth)
            yield gauge


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not metrics_request_allowed(request):
        body = problem_body("not_found", f"No resource at {request.path}.", instance=request.path)
        return JsonResponse(body, status=404, content_type=PROBLEM_CONTENT_TYPE)
    return HttpResponse(
        exposition([ScrapeTimeCollector()]),
        content_type=CONTENT_TYPE_LATEST,
        headers={"Cache-Control": "no-store"},
    )
