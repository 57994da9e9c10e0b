"""Whom MFA binds and what it closes, through the console's own requests."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from identity.mfa import mfa_required

pytestmark = pytest.mark.django_db

PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"
SSO_BACKEND = "identity.backends.PlangateOIDCBackend"


@pytest.fixture
def root(settings) -> User:
    settings.MFA_REQUIRED_FOR = ["superusers", "key_operators"]
    return User.objects.create_superuser("root", "root@example.test", "pw")


def signed_in(user: User, backend: str) -> Client:
    client = Client()
    client.force_login(user, backend=backend)
    return client


def test_a_password_session_of_a_superuser_reaches_only_the_mfa_pages(root):
    client = signed_in(root, PASSWORD_BACKEND)
    answer = client.get("/admin/plans/plan/")
    assert answer.status_code == 302
    assert answer["Location"].startswith("/admin/mfa/?next=%2Fadmin%2Fplans%2Fplan%2F")
    assert client.get("/admin/mfa/setup/").status_code == 200


def test_a_single_sign_on_session_is_not_asked(root, settings):
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, SSO_BACKEND]
    assert signed_in(root, SSO_BACKEND).get("/admin/plans/plan/").status_code == 200


def test_nobody_is_bound_when_the_setting_is_empty(root, settings):
    settings.MFA_REQUIRED_FOR = []
    assert not mfa_required(root)
    assert signed_in(root, PASSWORD_BACKEND).get("/admin/plans/plan/").status_code == 200


def test_staff_binds_every_console_user(settings):
    settings.MFA_REQUIRED_FOR = ["staff"]
    staff = User.objects.create_user("tessa", "t@example.test", "pw", is_staff=True)
    outsider = User.objects.create_user("olga", "o@example.test", "pw")
    assert mfa_required(staff) and not mfa_required(outsider)


def test_no_second_passkey_before_the_first_factor_is_proved(root):
    TOTPDevice.objects.create(user=root, name="authenticator app", confirmed=True)
    client = signed_in(root, PASSWORD_BACKEND)
    assert client.post("/webauthn/registration/begin/").status_code == 403
    # enrolment too asks for the factor already there
    answer = client.get("/admin/mfa/setup/")
    assert answer.status_code == 302 and answer["Location"].startswith("/admin/mfa/")


def test_a_provider_that_is_down_sends_people_back_to_the_sign_in_page(settings, db):
    settings.OIDC_ISSUER = "http://127.0.0.1:9/o"  # nothing listens on the discard port
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "id", "secret"
    answer = Client().get("/oidc/authenticate/")
    assert answer.status_code == 302
    assert answer["Location"] == "/admin/login/?sso=failed"
    page = Client().get(answer["Location"])
    assert b"Single sign-on did not sign you in" in page.content


def test_a_callback_without_a_started_sign_in_is_refused_not_a_server_error(settings, db):
    settings.OIDC_ISSUER = "http://127.0.0.1:9/o"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, SSO_BACKEND]
    answer = Client().get("/oidc/callback/", {"code": "x", "state": "y"})
    assert answer.status_code in (302, 400)
