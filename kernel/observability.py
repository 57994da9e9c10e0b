"""One middleware that names every request, counts it for /metrics and logs it in one line.

First in MIDDLEWARE, so it times the whole request and sees the final response, a refusal
made by any other middleware included. Per request it costs a clock read, an id and a
header; counting (``METRICS_ENABLED``) and the line (logger ``plangate.request`` at INFO)
each cost a few microseconds more, and nothing when off.

* Request id: the caller's ``X-Request-ID`` when it is a plain token (letters, digits,
  ``-_.:``, at most 128), as a proxy in front sets it; otherwise a new random one. It is
  answered in ``X-Request-ID`` and kept on ``request.request_id``.
* What is logged and counted is read from the response, not from inside the services: the
  resolved URL name, the status, the problem ``code``, the plan id (from the URL, or the
  body of a declaration) and the calling agent (set on the request by DRF's authentication).
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.functional import LazyObject

from . import metrics
from .problems import PROBLEM_CONTENT_TYPE

request_logger = logging.getLogger("plangate.request")

REQUEST_ID_HEADER = "X-Request-ID"
_GIVEN_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
# The model that API-key authentication puts on request.user, by label: the kernel imports
# no app.
_AGENT_MODEL_LABEL = "members.agent"


def new_request_id() -> str:
    # A name, not a secret: Python's generator (seeded from the OS at start) is a third of
    # the cost of a system call per request.
    return f"{random.getrandbits(128):032x}"


def _request_id(request: HttpRequest) -> str:
    given = request.META.get("HTTP_X_REQUEST_ID")
    if given and _GIVEN_REQUEST_ID.fullmatch(given):
        return given
    return new_request_id()


def _response_body(response: HttpResponse) -> Mapping[str, object] | None:
    """The JSON object a response answered: DRF keeps it as ``data``; a plain Django
    problem response (a 404 outside DRF, a probe) is read back only when it is one."""
    data = getattr(response, "data", None)
    if isinstance(data, Mapping):
        return data
    if (
        response.status_code >= 400
        and not response.streaming
        and response.get("Content-Type", "").startswith(PROBLEM_CONTENT_TYPE)
    ):
        try:
            parsed = json.loads(response.content)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _agent_id(request: HttpRequest) -> str | None:
    # Only what DRF's authentication stored (it replaces request.user with the agent). The
    # lazy user Django's AuthenticationMiddleware puts there is never touched: reading it
    # loads the session and its user from the database, on any request that carries a
    # session cookie, even /healthz, which must answer while the database is down.
    user = request.__dict__.get("user")
    if user is None or isinstance(user, LazyObject):
        return None
    meta = getattr(user, "_meta", None)
    if meta is not None and meta.label_lower == _AGENT_MODEL_LABEL:
        return str(user.pk)  # type: ignore[union-attr]
    return None


class RequestObservabilityMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        request_id = _request_id(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        count = settings.METRICS_ENABLED
        log = request_logger.isEnabledFor(logging.INFO)
        if not (count or log):
            return response
        seconds = time.perf_counter() - started
        match = request.resolver_match
        route = match.url_name if match is not None else None
        status = response.status_code
        body = _response_body(response) if (status >= 400 or route in _BODY_ROUTES) else None
        code = body.get("code") if status >= 400 and body is not None else None
        problem_code = code if isinstance(code, str) else None
        if count:
            metrics.observe_response(route, status, problem_code, seconds, body)
        if log:
            plan_id = match.kwargs.get("plan_id") if match is not None else None
            if plan_id is None and route == metrics.ISSUANCE_ROUTE and body is not None:
                plan_id = body.get("id")
            request_logger.info(
                "%s %s %s %.1f ms",
                request.method,
                request.path,
                status,
                seconds * 1000,
                extra={
                    "request_id": request_id,
                    "method": request.method,
                    "path": request.path,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 3),
                    "route": route,
                    "agent": _agent_id(request),
                    "plan_id": plan_id,
                    "code": problem_code,
                },
            )
        return response


# Successful answers whose body says something counted or logged.
_BODY_ROUTES = frozenset({metrics.ISSUANCE_ROUTE, metrics.EVENTS_ROUTE})
