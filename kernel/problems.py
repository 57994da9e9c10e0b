"""One domain exception and one handler that turns every refusal into RFC 9457 problem+json.

Services raise :class:`DomainError` with a stable ``code``; DRF's own exceptions (parse
errors, authentication, throttling...) are mapped to the same shape, so a client only ever
reads ``code`` and ``errors``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape
from django.views import defaults
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response

from guard.errors import FieldError

logger = logging.getLogger(__name__)

PROBLEM_CONTENT_TYPE = "application/problem+json"


@dataclass(frozen=True)
class Problem:
    status: int
    title: str


class Code(StrEnum):
    """The stable machine codes of the API: the one list. Tests import these, not texts."""

    INVALID_REQUEST = "invalid_request"
    INVALID_PLAN = "invalid_plan"
    INVALID_POLICY = "invalid_policy"
    INVALID_EVENTS = "invalid_events"
    INVALID_API_KEY = "invalid_api_key"
    INVALID_TOKEN = "invalid_token"  # noqa: S105 (an error code, not a secret)
    INVALID_AUDIT_TOKEN = "invalid_audit_token"  # noqa: S105 (an error code, not a secret)
    INVALID_ADMIN_TOKEN = "invalid_admin_token"  # noqa: S105 (an error code, not a secret)
    READ_ONLY_TOKEN = "read_only_token"  # noqa: S105 (an error code, not a secret)
    AGENT_DISABLED = "agent_disabled"
    UNKNOWN_USER = "unknown_user"
    USER_DISABLED = "user_disabled"
    POLICY_DENIED = "policy_denied"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    PLAN_NOT_FOUND = "plan_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NOT_ACCEPTABLE = "not_acceptable"
    PLAN_MISMATCH = "plan_mismatch"
    PUBLISHED_MEANWHILE = "published_meanwhile"
    PLAN_REVOKED = "plan_revoked"
    PLAN_EXPIRED = "plan_expired"
    APPROVAL_PENDING = "approval_pending"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_REQUIRED = "approval_required"
    SELF_APPROVAL = "self_approval"
    APPROVAL_NOT_PENDING = "approval_not_pending"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    THROTTLED = "throttled"
    SERVER_ERROR = "server_error"
    NO_SIGNING_KEY = "no_signing_key"
    DATABASE_UNAVAILABLE = "database_unavailable"
    DELEGATION_WIDENS = "delegation_widens"
    DELEGATION_REFUSED = "delegation_refused"
    BUDGET_UNAVAILABLE = "budget_unavailable"
    INVALID_DPOP_PROOF = "invalid_dpop_proof"
    INVALID_SLACK_SIGNATURE = "invalid_slack_signature"


# What each code answers. Keyed by Code; a Code is a str, so a plain string looks up too.
PROBLEMS: dict[Code, Problem] = {
    Code.INVALID_REQUEST: Problem(400, "The request is malformed"),
    Code.INVALID_PLAN: Problem(400, "The plan is invalid"),
    Code.INVALID_POLICY: Problem(400, "The policy document is invalid"),
    Code.INVALID_EVENTS: Problem(400, "The events are invalid"),
    Code.INVALID_API_KEY: Problem(401, "The API key is missing or not valid"),
    Code.INVALID_TOKEN: Problem(401, "The token is not valid"),
    Code.INVALID_AUDIT_TOKEN: Problem(401, "The audit token is missing or not valid"),
    Code.INVALID_ADMIN_TOKEN: Problem(401, "The admin token is missing or not valid"),
    Code.READ_ONLY_TOKEN: Problem(403, "The admin token may only read"),
    Code.AGENT_DISABLED: Problem(403, "The agent is disabled"),
    Code.UNKNOWN_USER: Problem(403, "The plan's user is not a member of this team"),
    Code.USER_DISABLED: Problem(403, "The plan's user is disabled"),
    Code.POLICY_DENIED: Problem(403, "The active policy denies the plan"),
    Code.PERMISSION_DENIED: Problem(403, "Not allowed"),
    Code.NOT_FOUND: Problem(404, "Not found"),
    Code.PLAN_NOT_FOUND: Problem(404, "No such plan"),
    Code.METHOD_NOT_ALLOWED: Problem(405, "Method not allowed"),
    Code.NOT_ACCEPTABLE: Problem(406, "Not acceptable"),
    Code.PLAN_MISMATCH: Problem(409, "The token does not belong to this plan"),
    Code.PUBLISHED_MEANWHILE: Problem(409, "Another version was published meanwhile"),
    Code.PLAN_REVOKED: Problem(410, "The plan was revoked"),
    Code.PLAN_EXPIRED: Problem(410, "The plan has expired"),
    Code.APPROVAL_PENDING: Problem(409, "The plan is waiting for a person's approval"),
    Code.APPROVAL_DENIED: Problem(403, "A person denied the plan"),
    Code.APPROVAL_EXPIRED: Problem(410, "Nobody decided on the plan in time"),
    Code.APPROVAL_REQUIRED: Problem(403, "The policy asks a person to approve the plan"),
    Code.SELF_APPROVAL: Problem(403, "Nobody decides on a plan made for themselves"),
    Code.APPROVAL_NOT_PENDING: Problem(409, "The plan is not waiting for a decision"),
    Code.PAYLOAD_TOO_LARGE: Problem(413, "The request body is too large"),
    Code.UNSUPPORTED_MEDIA_TYPE: Problem(415, "Unsupported media type"),
    Code.THROTTLED: Problem(429, "Too many requests"),
    Code.SERVER_ERROR: Problem(500, "Internal error"),
    Code.NO_SIGNING_KEY: Problem(503, "No signing key is available"),
    Code.DATABASE_UNAVAILABLE: Problem(503, "The database is unavailable"),
    Code.DELEGATION_WIDENS: Problem(403, "The child plan admits calls its parent does not"),
    Code.DELEGATION_REFUSED: Problem(403, "That agent cannot receive this delegation"),
    Code.BUDGET_UNAVAILABLE: Problem(409, "The parent plan has not that much left"),
    Code.INVALID_DPOP_PROOF: Problem(401, "The DPoP proof is missing or not valid"),
    Code.INVALID_SLACK_SIGNATURE: Problem(401, "The Slack request signature is not valid"),
}


class DomainError(Exception):
    """A refusal with a stable machine code, raised by services and mapped to problem+json."""

    def __init__(
        self,
        code: Code,
        detail: str | None = None,
        *,
        errors: Iterable[FieldError] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        if not isinstance(code, Code):  # the type checker's rule, kept for untyped callers
            raise TypeError(f"a problem code is a Code, not {code!r}")
        self.code = code
        self.detail = detail or PROBLEMS[self.code].title
        self.errors = list(errors)
        self.headers = headers or {}
        super().__init__(f"{code}: {self.detail}")

    @property
    def status(self) -> int:
        return PROBLEMS[self.code].status


# SQLSTATEs of a database that cannot serve this connection at all, as opposed to one that
# refused this statement: class 08 (connection exception), the server shutting down or
# starting up (57P01-57P03), too many connections (53300). A failure with no SQLSTATE
# happened on the client side: the connection was refused, reset or closed under it.
_UNAVAILABLE_SQLSTATE_PREFIXES = ("08", "57P01", "57P02", "57P03", "53300")
# SQLite's counterparts: the file cannot be opened, or a writer held the lock past the timeout.
_UNAVAILABLE_SQLITE_MESSAGES = ("unable to open database file", "database is locked")


def is_database_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached, rather than that a query failed.

    Only these become ``database_unavailable`` (503, worth retrying): an integrity error, a
    statement timeout or a deadlock is about the request, and a programming error is a bug.
    """
    if isinstance(exc, InterfaceError):
        return True  # Django's and the driver's "connection already closed"
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None)  # psycopg 3
    if sqlstate is not None:
        return str(sqlstate).startswith(_UNAVAILABLE_SQLSTATE_PREFIXES)
    if type(cause).__module__.startswith("psycopg"):
        return True
    message = str(exc).lower()
    return any(text in message for text in _UNAVAILABLE_SQLITE_MESSAGES)


def database_unavailable_error() -> DomainError:
    retry_after = settings.PLANGATE_DATABASE_RETRY_AFTER
    return DomainError(
        Code.DATABASE_UNAVAILABLE,
        f"The database cannot be reached; retry in {retry_after} s.",
        headers={"Retry-After": str(retry_after)},
    )


def payload_too_large_error() -> DomainError:
    return DomainError(
        Code.PAYLOAD_TOO_LARGE,
        f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
    )


def problem_body(
    code: Code | str, detail: str, *, errors: Iterable[FieldError] = (), instance: str | None = None
) -> dict[str, Any]:
    name = Code(code).value  # the body carries plain strings
    problem = PROBLEMS[Code(name)]
    body: dict[str, Any] = {
        "type": f"urn:plangate:problem:{name}",
        "title": problem.title,
        "status": problem.status,
        "code": name,
        "detail": detail,
    }
    error_list = [{"path": e.path, "detail": e.detail} for e in errors]
    if error_list:
        body["errors"] = error_list
    if instance:
        body["instance"] = instance
    return body


def problem_response(error: DomainError, instance: str | None = None) -> Response:
    response = Response(
        problem_body(error.code, error.detail, errors=error.errors, instance=instance),
        status=error.status,
        content_type=PROBLEM_CONTENT_TYPE,
        headers=error.headers,
    )
    return response


def _drf_errors(data: Any, prefix: str = "") -> list[FieldError]:
    """Flatten DRF's nested validation error structure into paths."""
    if isinstance(data, dict):
        found: list[FieldError] = []
        for key, value in data.items():
            name = "" if key == "non_field_errors" else str(key)
            path = f"{prefix}.{name}" if prefix and name else (prefix or name)
            found.extend(_drf_errors(value, path))
        return found
    if isinstance(data, list):
        if all(not isinstance(item, dict | list) for item in data):
            return [FieldError(prefix, str(item)) for item in data]
        found = []
        for index, value in enumerate(data):
            found.extend(_drf_errors(value, f"{prefix}[{index}]"))
        return found
    return [FieldError(prefix, str(data))]


def to_domain_error(exc: Exception) -> DomainError | None:
    if isinstance(exc, DomainError):
        return exc
    if isinstance(exc, drf_exceptions.ValidationError):
        return DomainError(
            Code.INVALID_REQUEST, "The request body is not valid.", errors=_drf_errors(exc.detail)
        )
    if isinstance(exc, drf_exceptions.ParseError):
        return DomainError(Code.INVALID_REQUEST, f"The body is not valid JSON: {exc.detail}")
    if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        return DomainError(Code.INVALID_API_KEY, str(exc.detail))
    if isinstance(exc, drf_exceptions.Throttled):
        wait = max(1, int(exc.wait or 1))  # type: ignore[attr-defined]  # DRF sets it; the stubs omit it
        return DomainError(
            Code.THROTTLED,
            f"Rate limit reached; retry in {wait} s.",
            headers={"Retry-After": str(wait)},
        )
    if isinstance(exc, drf_exceptions.PermissionDenied):
        return DomainError(Code.PERMISSION_DENIED, str(exc.detail))
    if isinstance(exc, drf_exceptions.NotFound | Http404):
        return DomainError(Code.NOT_FOUND)
    if isinstance(exc, drf_exceptions.MethodNotAllowed):
        return DomainError(Code.METHOD_NOT_ALLOWED, str(exc.detail))
    if isinstance(exc, drf_exceptions.NotAcceptable):
        return DomainError(Code.NOT_ACCEPTABLE, str(exc.detail))
    if isinstance(exc, drf_exceptions.UnsupportedMediaType):
        return DomainError(Code.UNSUPPORTED_MEDIA_TYPE, str(exc.detail))
    if isinstance(exc, RequestDataTooBig):
        return payload_too_large_error()
    if is_database_unavailable(exc):
        return database_unavailable_error()
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: every refusal becomes problem+json."""
    error = to_domain_error(exc)
    if error is None:
        logger.exception("unhandled error in %s", context.get("view"))
        error = DomainError(Code.SERVER_ERROR, "The server could not complete the request.")
    elif error.code is Code.DATABASE_UNAVAILABLE:
        logger.error("database unavailable in %s: %s", context.get("view"), exc)
    request = context.get("request")
    response = problem_response(error, instance=request.path if request is not None else None)
    if error.status == 401 and "WWW-Authenticate" not in error.headers:
        response["WWW-Authenticate"] = 'Bearer realm="plangate"'
    return response


def _wants_problem(request: HttpRequest) -> bool:
    """API paths answer problem+json; the admin and other pages keep Django's HTML pages."""
    return request.path.startswith(("/v1/", "/healthz", "/readyz"))


def _plain_problem(request: HttpRequest, code: Code, detail: str | None = None) -> JsonResponse:
    problem = PROBLEMS[code]
    body = problem_body(code, detail or problem.title, instance=request.path)
    return JsonResponse(body, status=problem.status, content_type=PROBLEM_CONTENT_TYPE)


def _error_response(request: HttpRequest, error: DomainError) -> HttpResponse:
    """problem+json on API paths; a short HTML page, with the same status, elsewhere."""
    if _wants_problem(request):
        response: HttpResponse = _plain_problem(request, error.code, error.detail)
    else:
        title = f"{PROBLEMS[error.code].title} ({error.status})"
        response = HttpResponse(
            f'<!doctype html>\n<html lang="en"><head><title>{title}</title></head>'
            f"<body><h1>{title}</h1><p>{escape(error.detail)}</p></body></html>\n",
            status=error.status,
        )
    for name, value in error.headers.items():
        response[name] = value
    return response


# Django always passes the exception to its error handlers.
def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Django reports a body over DATA_UPLOAD_MAX_MEMORY_SIZE as a SuspiciousOperation (400).
    if isinstance(exception, RequestDataTooBig):
        return _error_response(request, payload_too_large_error())
    if _wants_problem(request):
        return _plain_problem(request, Code.INVALID_REQUEST)
    return defaults.bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_problem(request):
        return _plain_problem(request, Code.PERMISSION_DENIED)
    return defaults.permission_denied(request, exception)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_problem(request):
        return _plain_problem(request, Code.NOT_FOUND, f"No resource at {request.path}.")
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its `except` block with no argument; the exception is the one
    # being handled (Django's own debug page reads it the same way). A lost database reaches
    # here from plain views and middleware: the admin, sessions.
    exception = sys.exc_info()[1]
    if exception is not None and is_database_unavailable(exception):
        return _error_response(request, database_unavailable_error())
    if _wants_problem(request):
        return _plain_problem(request, Code.SERVER_ERROR)
    return defaults.server_error(request)
