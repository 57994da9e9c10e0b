"""Admin security in a real browser: the sign-in lockout as a person meets it and a
superuser lifts it, the API docs with no internet, and the admin's pages under the
Content-Security-Policy (the `page` fixture fails a test on any violation)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from tests.admin.conftest import ensure_admin_groups

from .conftest import csp_violations, log_in, new_page

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}


@pytest.fixture(autouse=True)
def admin_groups(transactional_db) -> None:
    ensure_admin_groups()


def sign_in_attempt(page, username: str, password: str) -> None:
    page.goto("/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def test_a_locked_out_account_is_refused_until_a_superuser_lifts_the_lock(
    page, browser, live_server
):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    tessa = User.objects.create_user("tessa", password=PASSWORD, is_staff=True)
    tessa.groups.add(Group.objects.get(name="Team admins"))
    # The superuser signed in before: the lock is by account and by address, and every
    # browser here shares 127.0.0.1.
    root_page = new_page(browser, live_server.url)
    root_violations = csp_violations(root_page)
    log_in(root_page, "root", PASSWORD)

    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        sign_in_attempt(page, "tessa", "wrong password")
        expect(page.locator(".errornote")).to_be_visible()
    sign_in_attempt(page, "tessa", "wrong password")
    expect(page.locator("h1")).to_have_text("Too many failed sign-ins")

    # The right password is refused too, with the lockout page.
    sign_in_attempt(page, "tessa", PASSWORD)
    expect(page.locator("h1")).to_have_text("Too many failed sign-ins")
    expect(page.locator("#content-main")).to_contain_text(
        f"{settings.PLANGATE_LOGIN_COOLOFF_MINUTES} minutes"
    )
    assert page.locator("#id_password").count() == 0
    page.goto("/admin/")
    assert "/admin/login/" in page.url

    # The superuser lifts the lock in the admin.
    root_page.goto("/admin/axes/accessattempt/")
    expect(root_page.locator("#result_list")).to_contain_text("tessa")
    root_page.check("#action-toggle")
    root_page.select_option("select[name=action]", "delete_selected")
    root_page.click("button[name=index]")
    root_page.click("input[type=submit]")  # "Yes, I'm sure"
    expect(root_page.locator("ul.messagelist")).to_contain_text("Successfully deleted")
    assert not AccessAttempt.objects.exists()

    log_in(page, "tessa", PASSWORD)
    expect(page.locator("#user-tools")).to_contain_text("tessa")
    root_page.context.close()
    assert not root_violations, root_violations


def test_the_api_docs_render_with_every_other_origin_unreachable(page):
    outside: list[str] = []

    def only_local(route) -> None:
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.context.route("**/*", only_local)
    page.goto("/v1/docs")

    expect(page.locator("h1")).to_contain_text("Plangate API")
    expect(page.get_by_text("/v1/plans").first).to_be_attached()
    assert outside == []


def test_a_superuser_tours_the_admin_without_a_policy_violation(page, live_server):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    log_in(page, "root", PASSWORD)
    for url in [
        "/admin/",
        "/admin/members/member/",
        "/admin/members/member/add/",
        "/admin/members/agent/add/",
        "/admin/policies/policy/add/",
        "/admin/plans/plan/",
        "/admin/plans/plan/?member_email=alice%40acme.dev",
        "/admin/plans/signingkey/",
        "/admin/plans/signingkey/rotate/",
        "/admin/auth/user/",
        "/admin/axes/accessattempt/",
    ]:
        response = page.goto(url)
        assert response.status == 200, url
        page.wait_for_load_state("load")
    # A script-driven widget still works: the change list's "select all" box.
    page.goto("/admin/auth/user/")
    page.check("#action-toggle")
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    # View site leads to the home page, and on to the API docs.
    page.goto("/admin/")
    page.get_by_role("link", name="View site").click()
    expect(page.locator("h1")).to_have_text("Plangate control plane")
    page.get_by_role("link", name="API reference").click()
    expect(page.locator("h1")).to_contain_text("Plangate API")


def test_the_violation_watch_sees_a_violation(browser, live_server):
    # The check the `page` fixture relies on, shown to catch what it is meant to catch.
    page = new_page(browser, live_server.url)
    violations = csp_violations(page)
    page.goto("/v1/docs")
    page.evaluate(
        "document.body.insertAdjacentHTML('beforeend', '<img src=\"https://example.com/x.png\">')"
    )
    page.wait_for_timeout(500)
    page.context.close()
    assert any(re.search("img-src", violation) for violation in violations), violations
