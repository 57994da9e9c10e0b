"""Liveness and readiness probes."""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from kernel.problems import (
    PROBLEM_CONTENT_TYPE,
    DomainError,
    database_unavailable_error,
    problem_body,
)
from plans.keys import signing_readiness

logger = logging.getLogger(__name__)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers. Touches nothing else, so it measures the bare request path."""
    return JsonResponse({"status": "ok"})


def _not_ready(request: HttpRequest, error: DomainError, checks: dict[str, str]) -> JsonResponse:
    body = problem_body(error.code, error.detail, instance=request.path)
    body["checks"] = checks
    return JsonResponse(
        body, status=error.status, content_type=PROBLEM_CONTENT_TYPE, headers=error.headers
    )


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database answers and an active signing key can sign.

    A read, like every GET: it neither creates a key on an empty database (the first keys
    come from a write, see docs/keys.md) nor decrypts the active key.
    """
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except DatabaseError as exc:
        # Any database error, not only a lost connection: whatever keeps `SELECT 1` from
        # answering keeps this process from serving, so the balancer should skip it.
        logger.error("readiness: database unavailable: %s", exc)
        checks["database"] = "unavailable"
        return _not_ready(request, database_unavailable_error(), checks)
    try:
        checks["signingKey"] = signing_readiness()
    except DomainError as error:
        checks["signingKey"] = "unavailable"
        return _not_ready(request, error, checks)
    return JsonResponse({"status": "ready", "checks": checks})
