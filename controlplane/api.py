"""Liveness and readiness probes."""

from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from controlplane.problems import PROBLEM_CONTENT_TYPE, DomainError, problem_body
from plans.keys import active_signer

logger = logging.getLogger(__name__)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process answers. Touches nothing else, so it measures the bare request path."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database answers and an active signing key can sign."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:
        logger.error("readiness: database unavailable: %s", exc)
        body = problem_body("server_error", "The database is unavailable.", instance=request.path)
        return JsonResponse(body, status=503, content_type=PROBLEM_CONTENT_TYPE)
    try:
        checks["signingKey"] = active_signer().kid
    except DomainError as error:
        body = problem_body(error.code, error.detail, instance=request.path)
        body["checks"] = checks
        return JsonResponse(body, status=error.status, content_type=PROBLEM_CONTENT_TYPE)
    return JsonResponse({"status": "ready", "checks": checks})
