"""A second factor for password sign-in (decision 0083): TOTP (django-otp), passkeys
(WebAuthn, django-otp-webauthn) and single-use recovery codes (django-otp's static
tokens).

MFA_REQUIRED_FOR says whom it binds: ``superusers``, ``key_operators``, ``staff`` (every
console user), any of them; nobody when empty. Such a person, signed in with a password, is
sent to verify a second factor, or to enrol one first, before any other console page. A
person signed in by single sign-on is not: the identity provider enforces its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, HttpResponseRedirect
from django.urls import reverse
from django_otp import devices_for_user
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken

from kernel.credentials import CredentialFormat

KEY_OPERATORS = "Key operators"
SINGLE_SIGN_ON_BACKEND = "identity.backends.PlangateOIDCBackend"
RECOVERY_DEVICE = "recovery codes"
RECOVERY_CODES = 10


def mfa_required(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_staff:
        return False
    bound = {str(item).strip() for item in settings.MFA_REQUIRED_FOR}
    return (
        "staff" in bound
        or ("superusers" in bound and user.is_superuser)
        or ("key_operators" in bound and user.groups.filter(name=KEY_OPERATORS).exists())
    )


def signed_in_by_single_sign_on(request: HttpRequest) -> bool:
    return request.session.get(BACKEND_SESSION_KEY) == SINGLE_SIGN_ON_BACKEND


def second_factors(user: Any) -> list[Any]:
    """The user's confirmed devices that prove a second factor (recovery codes included)."""
    return list(devices_for_user(user, confirmed=True))


def has_second_factor(user: Any) -> bool:
    """An authenticator app or a passkey: recovery codes alone are no enrolment."""
    return any(not isinstance(device, StaticDevice) for device in second_factors(user))


#: recovery codes are kept as a keyed hash, as API keys are: a database dump alone does not
#: hold a second factor. django-otp's static token column is 16 characters: 64 bits of an
#: HMAC keyed by SECRET_KEY; a code is 40 random bits, and tries are throttled.
_RECOVERY_HASH = CredentialFormat(prefix="", purpose=b"plangate.recovery-code.v1")


def recovery_code_stored(code: str) -> str:
    """What is stored, and compared, for a recovery code."""
    return _RECOVERY_HASH.secret_hash(code.strip().lower())[:16]


def recovery_codes_issue(user: Any) -> list[str]:
    """A new set of single-use recovery codes, replacing any earlier set: shown once."""
    device, _ = StaticDevice.objects.get_or_create(user=user, name=RECOVERY_DEVICE)
    device.confirmed = True
    device.save()
    device.token_set.all().delete()
    codes = [StaticToken.random_token() for _ in range(RECOVERY_CODES)]
    StaticToken.objects.bulk_create(
        StaticToken(device=device, token=recovery_code_stored(code)) for code in codes
    )
    return codes


def second_factor_verify(device: Any, code: str) -> bool:
    """Whether ``code`` proves ``device`` (a recovery code is compared by its hash, and
    used up); False while django-otp's throttling holds the device back."""
    if not device.verify_is_allowed()[0]:
        return False
    code = code.strip().replace(" ", "")
    if isinstance(device, StaticDevice):
        return bool(device.verify_token(recovery_code_stored(code)))
    return bool(device.verify_token(code))


def recovery_codes_left(user: Any) -> int:
    return StaticToken.objects.filter(device__user=user, device__name=RECOVERY_DEVICE).count()


class MfaMiddleware:
    """After django-otp's OTPMiddleware: a person MFA binds, signed in with a password and
    not verified yet, reaches only the sign-in, sign-out and MFA pages; adding a passkey
    while one is enrolled needs the second factor first."""

    OPEN = ("/admin/login/", "/admin/logout/", "/admin/mfa/", "/admin/jsi18n/")
    WEBAUTHN_REGISTRATION = "/webauthn/registration/"

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        path = request.path
        guarded = path.startswith("/admin/") and not path.startswith(self.OPEN)
        if (guarded or path.startswith(self.WEBAUTHN_REGISTRATION)) and self._unverified(request):
            if path.startswith(self.WEBAUTHN_REGISTRATION):
                if has_second_factor(user):
                    return HttpResponseForbidden("Verify your second factor first.")
            else:
                target = reverse("admin:plangate_mfa")
                return HttpResponseRedirect(f"{target}?{urlencode({'next': path})}")
        return self.get_response(request)

    def _unverified(self, request: HttpRequest) -> bool:
        user = getattr(request, "user", None)
        return (
            user is not None
            and mfa_required(user)
            and not user.is_verified()
            and not signed_in_by_single_sign_on(request)
        )
