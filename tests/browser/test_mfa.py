"""MFA for password sign-in, in Chromium: an authenticator app (TOTP) enrolled and used,
recovery codes shown once and each used once, and a passkey registered and used through
Chromium's virtual authenticator (WebAuthn over the DevTools protocol)."""

from __future__ import annotations

import base64
import re
import time

import pytest
from django.contrib.auth.models import Group, User
from django_otp.oath import totp
from django_otp.plugins.otp_static.models import StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice
from django_otp_webauthn.models import WebAuthnCredential

from tests.admin.conftest import ensure_admin_groups

PASSWORD = "a-long-password-1"


@pytest.fixture
def mfa_on(settings, live_server):
    settings.MFA_REQUIRED_FOR = ["superusers", "key_operators"]
    settings.OTP_WEBAUTHN_ALLOWED_ORIGINS = [live_server.url]
    settings.OTP_WEBAUTHN_RP_ID = "localhost"


def sign_in(page, username: str) -> None:
    page.goto("/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def sign_out(page) -> None:
    page.context.clear_cookies()


def code_for(secret: str, steps_ahead: int = 0) -> str:
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    return f"{totp(key, drift=steps_ahead):06d}"


def test_an_authenticator_app_is_enrolled_and_then_asked_for(mfa_on, page, settings):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    sign_in(page, "root")
    # nothing of the console before a second factor: the setup page
    page.wait_for_selector("#totp-secret")
    assert "/admin/mfa/setup/" in page.url
    assert "/admin/mfa/" in page.goto("/admin/members/member/").url
    page.wait_for_selector("#totp-secret")
    secret = page.inner_text("#totp-secret")

    page.fill("#id_code", "000000" if code_for(secret) != "000000" else "111111")
    page.click("#totp-setup-form input[type=submit]")
    assert "not valid" in page.inner_text("#content-main")

    time.sleep(2)  # django-otp slows a device down after a failure
    page.fill("#id_code", code_for(secret))
    page.click("#totp-setup-form input[type=submit]")
    codes = [item.inner_text() for item in page.locator("#recovery-codes code").all()]
    assert len(codes) == 10 and len(set(codes)) == 10
    assert TOTPDevice.objects.get(user__username="root").confirmed
    page.goto("/admin/members/member/")
    page.wait_for_selector("#changelist")

    # a new session asks for a code; the next time step's code (the last one is spent)
    sign_out(page)
    sign_in(page, "root")
    page.wait_for_selector("#mfa-code-form")
    page.fill("#id_code", code_for(secret, steps_ahead=1))
    page.click("#mfa-code-form input[type=submit]")
    page.wait_for_selector("#user-tools")
    assert "/admin/mfa/" not in page.url


def test_recovery_codes_sign_in_once_each(mfa_on, page):
    user = User.objects.create_superuser("root", "root@example.test", PASSWORD)
    device = TOTPDevice.objects.create(user=user, name="authenticator app", confirmed=True)
    from identity.mfa import recovery_codes_issue

    first, second = recovery_codes_issue(user)[:2]
    assert device.confirmed
    sign_in(page, "root")
    page.wait_for_selector("#mfa-code-form")
    page.fill("#id_code", first)
    page.click("#mfa-code-form input[type=submit]")
    page.wait_for_selector("#user-tools")
    assert StaticToken.objects.filter(device__user=user).count() == 9
    # kept as keyed hashes: a database dump holds no code
    stored = set(StaticToken.objects.values_list("token", flat=True))
    assert not stored & {first, second}

    sign_out(page)
    sign_in(page, "root")
    page.wait_for_selector("#mfa-code-form")
    page.fill("#id_code", first)
    page.click("#mfa-code-form input[type=submit]")
    assert "not valid" in page.inner_text("#content-main")
    # django-otp slows down a device after a failure: the next try waits a moment
    time.sleep(2)
    page.fill("#id_code", second)
    page.click("#mfa-code-form input[type=submit]")
    page.wait_for_selector("#user-tools")


def test_a_passkey_is_registered_and_used_with_a_virtual_authenticator(mfa_on, page):
    ensure_admin_groups()
    operator = User.objects.create_user("kim", "kim@example.test", PASSWORD, is_staff=True)
    operator.groups.add(Group.objects.get(name="Key operators"))
    session = page.context.new_cdp_session(page)
    session.send("WebAuthn.enable")
    session.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    sign_in(page, "kim")
    page.wait_for_selector("#passkey-register-button")
    page.click("#passkey-register-button")
    page.wait_for_function(
        "() => /success|registered/i.test("
        "document.getElementById('passkey-register-status-message')?.textContent || '')"
    )
    assert WebAuthnCredential.objects.filter(user=operator, confirmed=True).count() == 1

    page.click("#mfa-continue")
    page.wait_for_selector("#passkey-verification-button")
    page.click("#passkey-verification-button")
    # verified: on to the recovery codes, which the first factor's enrolment offers
    page.wait_for_selector("#recovery-codes-new")
    page.click("#recovery-codes-new")
    assert len(page.locator("#recovery-codes code").all()) == 10
    page.goto("/admin/")
    page.wait_for_selector("#user-tools")
    assert "/admin/mfa/" not in page.url


def test_people_mfa_does_not_bind_go_straight_in(mfa_on, page):
    ensure_admin_groups()
    admin = User.objects.create_user("tessa", "tessa@example.test", PASSWORD, is_staff=True)
    admin.groups.add(Group.objects.get(name="Team admins"))
    sign_in(page, "tessa")
    page.wait_for_selector("#user-tools")
    assert re.search(r"/admin/$", page.url)
