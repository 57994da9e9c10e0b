"""The OIDC backend: mozilla-django-oidc's code flow, with Plangate's rules: the provider's
endpoints from discovery (identity.oidc), the ID token's audience and issuer verified
(PyJWT, as every token here), people matched or created by a *verified* e-mail only, and
their console roles and teams set from the role claim at every sign-in."""

from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .oidc import ENDPOINTS, DiscoveryFailed, console_access_apply, grants_for, oidc_setting

security_logger = logging.getLogger("plangate.security")


class PlangateOIDCBackend(OIDCAuthenticationBackend):
    get_settings = staticmethod(oidc_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the base's: it reads every endpoint at once, and Django builds a backend for
        # each signed-in request. The endpoints are read (discovery) when a sign-in needs them.
        ModelBackend.__init__(self)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    def __getattr__(self, name: str) -> Any:
        if name in ENDPOINTS:
            return oidc_setting(name)
        raise AttributeError(name)

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        """mozilla-django-oidc's code exchange; a provider that cannot be reached (or that
        answers nonsense) is a failed sign-in, sent back to the sign-in page, not a 500."""
        try:
            return super().authenticate(request, **kwargs)
        except (requests.RequestException, DiscoveryFailed, ValueError, KeyError) as error:
            security_logger.warning("single sign-on failed: %s", error)
            return None

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        email = claims.get("email")
        if not email or claims.get("email_verified") is not True:
            security_logger.warning("single sign-on refused: no verified e-mail (%s)", email)
            return False
        if not grants_for(claims):
            security_logger.warning("single sign-on refused: %s has no console role", email)
            return False
        return True

    def filter_users_by_claims(self, claims: dict[str, Any]):
        return self.UserModel.objects.filter(email__iexact=claims["email"])

    def create_user(self, claims: dict[str, Any]) -> Any:
        with transaction.atomic():
            email = str(claims["email"]).strip().lower()
            username = email[:150]
            if self.UserModel.objects.filter(username=username).exists():
                username = f"{email[:140]}-{self.UserModel.objects.count()}"
            user = self.UserModel.objects.create_user(username, email=email)
            user.set_unusable_password()
            user.save()
            return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        with transaction.atomic():
            console_access_apply(user, claims)
        security_logger.info(
            "single sign-on: %s signed in as %s",
            user.get_username(),
            ", ".join(f"{grant.role}:{grant.team or '*'}" for grant in grants_for(claims)),
        )
        return user

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The ID token's signature, algorithm, audience (this client) and issuer."""
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=str(settings.OIDC_ISSUER).rstrip("/"),
                options={"require": ["exp", "iat", "aud", "iss"]},
            )
        except jwt.InvalidTokenError as error:
            raise SuspiciousOperation(f"the ID token is not valid: {error}") from error
