"""``Authorization: Bearer pgadm_...`` on the admin API: the token's team is the only team a
request sees, and a read-only token may only read."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from kernel.bearer import BearerAuthentication, CredentialRateThrottle
from kernel.problems import Code, DomainError

from .models import AdminToken
from .tokens import admin_token_authenticate


def request_admin_token(request: Request) -> AdminToken:
    """The token a view authenticated by AdminTokenAuthentication was called with."""
    return cast(AdminToken, request.auth)


class AdminTokenAuthentication(BearerAuthentication):
    """Failed attempts count against the client address's budget of failed
    authentications (kernel.bearer), the one API keys and audit tokens count against."""

    def credential_authenticate(self, credential: str) -> tuple[AdminToken, AdminToken]:
        token = admin_token_authenticate(credential)
        return token, token

    def malformed(self) -> Exception:
        return DomainError(Code.INVALID_ADMIN_TOKEN, "Use `Authorization: Bearer <admin token>`.")

    def missing(self, request: Request) -> tuple[AdminToken, AdminToken]:
        raise self.malformed()


class AdminTokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = AdminTokenAuthentication
    name = "adminTokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A team's admin token: `Authorization: Bearer pgadm_...`, read-only "
            "or read-write. A superuser creates it in the console or with `manage.py "
            "create_admin_token --team SLUG [--write]`.",
        }


class AdminTokenRateThrottle(CredentialRateThrottle):
    """PLANGATE_RATE_LIMIT requests per admin token per window, as for an API key."""

    scope = "admin_token"
    credential_type = AdminToken


class WritesNeedWriteScope(BasePermission):
    """A read-only token may GET, and POST to the calls that write nothing (a view says so
    with ``writes = False``); anything else needs a token created with ``--write``."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS or not getattr(view, "writes", True):
            return True
        if request_admin_token(request).can_write:
            return True
        raise DomainError(
            Code.READ_ONLY_TOKEN,
            "This admin token may only read; create one with write access to change things.",
        )
