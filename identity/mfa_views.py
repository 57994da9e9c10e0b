"""The MFA pages of the console: verify a second factor, enrol one (an authenticator app or
a passkey), and recovery codes. Reached through the admin site (PlangateAdminSite.get_urls),
so only a signed-in console user gets them."""

from __future__ import annotations

import base64
import io
from typing import Any

import qrcode
import qrcode.image.svg
from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django_otp import login as otp_login
from django_otp.plugins.otp_totp.models import TOTPDevice
from django_otp_webauthn.models import WebAuthnCredential

from .mfa import (
    has_second_factor,
    mfa_required,
    recovery_codes_issue,
    recovery_codes_left,
    second_factor_verify,
    second_factors,
)

AUTHENTICATOR_APP = "authenticator app"


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code", max_length=16, widget=forms.TextInput(attrs={"autocomplete": "one-time-code"})
    )


def _next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if safe and target.startswith("/") else reverse("admin:index")


def _context(site: Any, request: HttpRequest, title: str, **more: Any) -> dict[str, Any]:
    return {**site.each_context(request), "title": title, "next": _next(request), **more}


def mfa_verify(site: Any, request: HttpRequest) -> HttpResponse:
    """Prove a second factor: a code of the authenticator app, a recovery code, or a passkey."""
    user: Any = request.user
    if not has_second_factor(user):
        return HttpResponseRedirect(f"{reverse('admin:plangate_mfa_setup')}?next={_next(request)}")
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        code = form.cleaned_data["code"]
        for device in second_factors(user):
            if second_factor_verify(device, code):
                otp_login(request, device)
                return HttpResponseRedirect(_next(request))
        form.add_error("code", "That code is not valid (or was used already).")
    has_passkey = WebAuthnCredential.objects.filter(user=user, confirmed=True).exists()
    return render(
        request,
        "admin/plangate/mfa_verify.html",
        _context(site, request, "Verify it is you", form=form, has_passkey=has_passkey),
    )


def _qr_code(url: str) -> str:
    image = qrcode.make(url, image_factory=qrcode.image.svg.SvgPathImage, box_size=8)
    buffer = io.BytesIO()
    image.save(buffer)
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()


def mfa_setup(site: Any, request: HttpRequest) -> HttpResponse:
    """Enrol an authenticator app (a QR code and its secret, confirmed by a code) or a
    passkey. Someone with a second factor verifies it before adding another."""
    user: Any = request.user
    if has_second_factor(user) and not user.is_verified():
        return HttpResponseRedirect(f"{reverse('admin:plangate_mfa')}?next={_next(request)}")
    device = TOTPDevice.objects.filter(user=user, confirmed=False).first()
    if device is None:
        device = TOTPDevice.objects.create(user=user, name=AUTHENTICATOR_APP, confirmed=False)
    form = CodeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if not device.verify_is_allowed()[0]:
            form.add_error("code", "Too many tries: wait a few seconds, then try again.")
        elif device.verify_token(form.cleaned_data["code"].strip().replace(" ", "")):
            device.confirmed = True
            device.save()
            otp_login(request, device)
            messages.success(request, "Your authenticator app is your second factor now.")
            if recovery_codes_left(user) == 0:
                return _codes_page(site, request, recovery_codes_issue(user))
            return HttpResponseRedirect(_next(request))
        else:
            form.add_error("code", "That code is not valid: check the app's clock and try again.")
    secret = base64.b32encode(device.bin_key).decode().rstrip("=")
    return render(
        request,
        "admin/plangate/mfa_setup.html",
        _context(
            site,
            request,
            "Set up a second factor",
            form=form,
            secret=secret,
            qr_code=_qr_code(device.config_url),
            required=mfa_required(user),
        ),
    )


def _codes_page(site: Any, request: HttpRequest, codes: list[str]) -> HttpResponse:
    response = render(
        request,
        "admin/plangate/mfa_recovery_codes.html",
        _context(site, request, "Your recovery codes", codes=codes),
    )
    response["Cache-Control"] = "no-store"
    return response


def mfa_recovery_codes(site: Any, request: HttpRequest) -> HttpResponse:
    """How many recovery codes are left; POST makes a new set (shown once). Needs a
    verified second factor, which the MFA middleware and this check both ask."""
    user: Any = request.user
    if not user.is_verified():
        return HttpResponseRedirect(f"{reverse('admin:plangate_mfa')}?next={request.path}")
    if request.method == "POST":
        return _codes_page(site, request, recovery_codes_issue(user))
    return render(
        request,
        "admin/plangate/mfa_recovery_codes.html",
        _context(site, request, "Recovery codes", left=recovery_codes_left(user)),
    )
