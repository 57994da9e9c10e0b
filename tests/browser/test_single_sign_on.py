"""Single sign-on to the console through a real OpenID Provider (django-oauth-toolkit in
its own process) and a real browser: the code flow, people matched or created by a
verified e-mail, console roles and teams from the groups claim, refusals, and the password
form turned off."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group as PermissionGroup
from django.contrib.auth.models import User

from tests.admin.conftest import ensure_admin_groups
from tests.identity.provider_process import CLIENT_ID, CLIENT_SECRET, PASSWORD, oidc_provider

from .conftest import log_in

OIDC_BACKEND = "identity.backends.PlangateOIDCBackend"
PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"


@pytest.fixture
def provider(live_server, settings, tmp_path, team):
    ensure_admin_groups()
    with oidc_provider(tmp_path, f"{live_server.url}/oidc/callback/") as running:
        settings.OIDC_ISSUER = running.issuer
        settings.OIDC_RP_CLIENT_ID = CLIENT_ID
        settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
        settings.OIDC_RP_SCOPES = "openid email profile groups"
        settings.OIDC_ROLE_MAP = (
            f"plangate-admins=team_admin:{team.slug},plangate-auditors=auditor:{team.slug}"
        )
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, OIDC_BACKEND]
        yield running


def sign_in_with_sso(page, username: str) -> None:
    page.goto("/admin/login/")
    page.click("#sso-sign-in")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("#provider-sign-in")
    # the provider's consent page
    page.click("input[name=allow]")


def test_a_directory_admin_signs_in_and_gets_the_mapped_role_and_team(provider, page, team):
    sign_in_with_sso(page, "dana")
    page.wait_for_selector("#user-tools")
    assert page.url.endswith("/admin/")
    user = User.objects.get(email="dana@acme.dev")
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert [group.name for group in user.groups.all()] == ["Team admins"]
    assert list(team.staff.all()) == [user]
    # the console acts on the mapped role: the team's members are theirs to see
    answer = page.goto("/admin/members/member/")
    assert answer.status == 200
    page.wait_for_selector("#changelist")


def test_an_existing_user_is_matched_by_email_and_the_map_is_applied_again(provider, page, team):
    auditors = PermissionGroup.objects.get(name="Auditors")
    existing = User.objects.create_user("dscully", "DANA@acme.dev", "old-password")
    existing.groups.add(auditors)
    sign_in_with_sso(page, "dana")
    page.wait_for_selector("#user-tools")
    existing.refresh_from_db()
    assert User.objects.filter(email__iexact="dana@acme.dev").count() == 1
    assert existing.is_staff
    assert [group.name for group in existing.groups.all()] == ["Team admins"]


@pytest.mark.parametrize("username", ["eve", "nadia"])
def test_an_unverified_email_or_no_mapped_group_is_refused(provider, page, username):
    sign_in_with_sso(page, username)
    page.wait_for_selector("#sso-failed")
    assert "/admin/login/" in page.url
    assert not User.objects.filter(username__startswith=username).exists()
    assert not User.objects.filter(email__startswith=username).exists()


def test_password_sign_in_can_be_turned_off(provider, page, settings, client):
    User.objects.create_superuser("root", "root@example.test", "a-long-password-1")
    settings.PASSWORD_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = [
        backend for backend in settings.AUTHENTICATION_BACKENDS if backend != PASSWORD_BACKEND
    ]
    page.goto("/admin/login/")
    assert page.locator("#sso-sign-in").is_visible()
    assert page.locator("#login-form").count() == 0
    refused = client.post("/admin/login/", {"username": "root", "password": "a-long-password-1"})
    assert refused.status_code == 403
    assert "_auth_user_id" not in client.session


def test_with_password_sign_in_on_both_doors_are_offered(provider, page):
    User.objects.create_superuser("root", "root@example.test", "a-long-password-1")
    page.goto("/admin/login/")
    assert page.locator("#sso-sign-in").inner_text() == "Sign in with single sign-on"
    log_in(page, "root", "a-long-password-1")
