"""Bearer credentials: ``Authorization: Bearer <credential>``, and the budget of failed
attempts per client address that every credential type shares.

Once an address is over its budget (PLANGATE_AUTH_FAILURE_LIMIT) every credential it sends
is refused as ``throttled`` before the credential is checked, a valid one too: otherwise
guessing could go on at full speed. API keys, audit tokens and the status feed all count
against the one budget, so switching credential types buys a guesser nothing. The budget is
read as its own step before the credential is looked up, as DRF checks throttles apart
from authentication (docs/decisions/0061: fusing the two reads bought too little).
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from django.conf import settings
from django.http import HttpRequest
from rest_framework import authentication, exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from .problems import DomainError
from .ratelimit import rate_limit_hit, rate_limit_peek, rate_parse

AUTH_FAILURE_SCOPE = "auth_failure"


class Credential(Protocol):
    #: the credential's public part, which its rate limit counts by
    lookup_id: str


def client_address(request: Request | HttpRequest) -> str:
    """DRF's client identity: REMOTE_ADDR, or the address PLANGATE_NUM_PROXIES trusted
    proxies put in X-Forwarded-For. It reads only META, which a plain Django request has
    as well."""
    return BaseThrottle().get_ident(cast(Request, request)) or "unknown"


def bearer_credential(header: str) -> str | None:
    """The credential of an ``Authorization`` header's value, or None when it is not a
    non-empty Bearer credential."""
    scheme, _, credential = header.partition(" ")
    credential = credential.strip()
    return credential if scheme.lower() == "bearer" and credential else None


def auth_failures_over(address: str) -> int | None:
    """Seconds to wait when ``address`` has spent its budget of failed attempts, else None.
    A peek: it counts nothing."""
    rate = rate_parse(settings.PLANGATE_AUTH_FAILURE_LIMIT)
    so_far = rate_limit_peek(scope=AUTH_FAILURE_SCOPE, ident=address, rate=rate)
    return None if so_far.allowed else so_far.retry_after


def auth_failure_count(address: str) -> int | None:
    """Count one failed attempt of ``address``: seconds to wait when that spent its budget,
    else None. The count decides, not the peek: concurrent failures that all passed the peek
    still get exactly ``limit`` refusals as unauthenticated between them, the rest 429."""
    rate = rate_parse(settings.PLANGATE_AUTH_FAILURE_LIMIT)
    failure = rate_limit_hit(scope=AUTH_FAILURE_SCOPE, ident=address, rate=rate)
    return None if failure.allowed else failure.retry_after


class BearerAuthentication(authentication.BaseAuthentication):
    """A DRF authentication by one type of bearer credential, within the failure budget.

    Subclasses say how a credential becomes ``(user, auth)`` (raising DomainError or
    AuthenticationFailed when it cannot), what a request without one gets, and may note
    refusals as they happen (``on_throttled``)."""

    def credential_authenticate(self, credential: str) -> tuple[Any, Any]:
        raise NotImplementedError

    def malformed(self) -> Exception:
        """The refusal of a header that holds no Bearer credential."""
        raise NotImplementedError

    def missing(self, request: Request) -> tuple[Any, Any] | None:
        """No Authorization header: None lets the view's permissions answer."""
        return None

    def on_throttled(self) -> None:
        """Called before a refusal as ``throttled``."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return self.missing(request)
        address = client_address(request)
        # The budget decides before the credential is judged.
        wait = auth_failures_over(address)
        if wait is not None:
            self.on_throttled()
            raise exceptions.Throttled(wait=wait)
        try:
            credential = bearer_credential(header)
            if credential is None:
                raise self.malformed()
            return self.credential_authenticate(credential)
        except (exceptions.AuthenticationFailed, DomainError):
            wait = auth_failure_count(address)
            if wait is not None:
                self.on_throttled()
                raise exceptions.Throttled(wait=wait) from None
            raise

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="plangate"'


class CredentialRateThrottle(BaseThrottle):
    """PLANGATE_RATE_LIMIT requests per credential per window, whichever process serves
    them. Requests authenticated by anything but ``credential_type`` pass; the credential is
    counted by its ``lookup_id``."""

    scope = ""
    credential_type: type = object

    def __init__(self) -> None:
        self.retry_after: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, self.credential_type):
            return True
        result = rate_limit_hit(
            scope=self.scope,
            ident=cast(Credential, request.auth).lookup_id,
            rate=rate_parse(settings.PLANGATE_RATE_LIMIT),
        )
        self.retry_after = result.retry_after
        if not result.allowed:
            self.on_throttled()
        return result.allowed

    def on_throttled(self) -> None:
        """Called when a request is refused as ``throttled``."""

    def wait(self) -> float | None:
        return self.retry_after
