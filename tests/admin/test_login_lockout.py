"""Admin login throttling: after PLANGATE_LOGIN_FAILURE_LIMIT wrong passwords an account,
and separately the address they came from, is locked for the cool-off period, even for the
right password; the lockout is logged, and a superuser can lift it."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core.management import call_command
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from .conftest import PASSWORD

LOGIN = reverse("admin:login")
WRONG = "Tr0ub4dor&3"


def attempt(client: Client, username: str, password: str, ip: str = "203.0.113.7"):
    return client.post(
        LOGIN,
        {"username": username, "password": password, "next": "/admin/"},
        REMOTE_ADDR=ip,
    )


def fail(client: Client, username: str, times: int, ip: str = "203.0.113.7") -> None:
    for _ in range(times):
        attempt(client, username, WRONG, ip)


def logged_in(client: Client) -> bool:
    return SESSION_KEY in client.session


def test_the_defaults_are_five_failures_and_fifteen_minutes():
    assert settings.PLANGATE_LOGIN_FAILURE_LIMIT == 5
    assert settings.PLANGATE_LOGIN_COOLOFF_MINUTES == 15
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"]


def test_fewer_failures_than_the_limit_still_let_the_right_password_in(team_admin):
    client = Client()
    fail(client, "tessa", settings.AXES_FAILURE_LIMIT - 1)

    response = attempt(client, "tessa", PASSWORD)

    assert response.status_code == 302
    assert logged_in(client)


def test_the_right_password_is_refused_after_the_limit(team_admin, caplog):
    client = Client()
    with caplog.at_level(logging.WARNING):
        fail(client, "tessa", settings.AXES_FAILURE_LIMIT)

    response = attempt(client, "tessa", PASSWORD)

    assert response.status_code == 429
    html = response.content.decode()
    assert "Too many failed sign-ins" in html
    assert "15 minutes" in html
    assert 'name="password"' not in html
    assert not logged_in(client)
    assert AccessAttempt.objects.get(username="tessa").failures_since_start >= 5
    lockouts = [r for r in caplog.records if r.name == "plangate.security"]
    assert lockouts, "the lockout was not logged"
    message = lockouts[0].getMessage()
    assert "locked out" in message and "tessa" in message and "203.0.113.7" in message


def test_forty_wrong_passwords_then_the_right_one_does_not_log_in(team_admin):
    client = Client()
    fail(client, "tessa", 40)
    assert attempt(client, "tessa", PASSWORD).status_code == 429
    assert not logged_in(client)


def test_the_account_is_locked_from_another_address_too(team_admin):
    fail(Client(), "tessa", settings.AXES_FAILURE_LIMIT, ip="203.0.113.7")

    client = Client()
    response = attempt(client, "tessa", PASSWORD, ip="198.51.100.20")

    assert response.status_code == 429
    assert not logged_in(client)


def test_the_address_is_locked_for_other_accounts_too(team_admin, auditor):
    # Spraying one password over many accounts from one address is stopped as well.
    fail(Client(), "nobody-in-particular", settings.AXES_FAILURE_LIMIT, ip="203.0.113.7")

    locked = Client()
    assert attempt(locked, "audrey", PASSWORD, ip="203.0.113.7").status_code == 429
    assert not logged_in(locked)
    elsewhere = Client()
    assert attempt(elsewhere, "audrey", PASSWORD, ip="198.51.100.20").status_code == 302
    assert logged_in(elsewhere)


def test_the_lock_ends_after_the_cool_off(team_admin):
    fail(Client(), "tessa", settings.AXES_FAILURE_LIMIT)
    # As if the cool-off had passed since the last failure.
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get().attempt_time
        - settings.AXES_COOLOFF_TIME
        - timedelta(seconds=1)
    )

    client = Client()
    assert attempt(client, "tessa", PASSWORD).status_code == 302
    assert logged_in(client)


def test_reset_username_command_unlocks(team_admin):
    fail(Client(), "tessa", settings.AXES_FAILURE_LIMIT)

    call_command("axes_reset_username", "tessa")

    client = Client()
    assert attempt(client, "tessa", PASSWORD).status_code == 302
    assert logged_in(client)
    assert not AccessAttempt.objects.filter(username="tessa").exists()


def test_a_superuser_unlocks_from_the_admin(team_admin, superuser_client):
    fail(Client(), "tessa", settings.AXES_FAILURE_LIMIT)
    locked = AccessAttempt.objects.get(username="tessa")
    listing = superuser_client.get(reverse("admin:axes_accessattempt_changelist"))
    assert listing.status_code == 200
    assert "tessa" in listing.content.decode()

    response = superuser_client.post(
        reverse("admin:axes_accessattempt_changelist"),
        {"action": "delete_selected", "_selected_action": [locked.pk], "post": "yes"},
    )

    assert response.status_code == 302
    assert not AccessAttempt.objects.exists()
    client = Client()
    assert attempt(client, "tessa", PASSWORD).status_code == 302
    assert logged_in(client)


def test_team_admins_cannot_see_or_lift_lockouts(team_admin_client):
    url = reverse("admin:axes_accessattempt_changelist")
    assert team_admin_client.get(url).status_code == 403


def test_client_login_works_when_given_a_request(team_admin):
    # The lockout backend needs the request; tests that sign in by password pass one.
    client = Client()
    assert client.login(request=HttpRequest(), username="tessa", password=PASSWORD)


@pytest.mark.parametrize("header", ["HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP"])
def test_forwarded_headers_do_not_pick_the_address_by_default(team_admin, header):
    # Behind no configured proxy a client could otherwise rotate a header to dodge the lock.
    client = Client()
    for number in range(settings.AXES_FAILURE_LIMIT):
        client.post(
            LOGIN,
            {"username": "someone", "password": WRONG},
            REMOTE_ADDR="203.0.113.7",
            **{header: f"192.0.2.{number}"},
        )
    assert attempt(Client(), "tessa", PASSWORD, ip="203.0.113.7").status_code == 429


def test_behind_a_proxy_the_address_is_the_one_the_proxy_wrote(team_admin, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = "10.0.0.2"
    for _ in range(settings.AXES_FAILURE_LIMIT):
        Client().post(
            LOGIN,
            {"username": "someone", "password": WRONG},
            REMOTE_ADDR=proxy,
            HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.7",  # the proxy appended the last
        )

    assert AccessAttempt.objects.get().ip_address == "203.0.113.7"
    locked = Client().post(
        LOGIN,
        {"username": "tessa", "password": PASSWORD},
        REMOTE_ADDR=proxy,
        HTTP_X_FORWARDED_FOR="203.0.113.7",
    )
    assert locked.status_code == 429
    # Another client behind the same proxy is not locked out with the attacker.
    client = Client()
    response = client.post(
        LOGIN,
        {"username": "tessa", "password": PASSWORD},
        REMOTE_ADDR=proxy,
        HTTP_X_FORWARDED_FOR="198.51.100.20",
    )
    assert response.status_code == 302
    assert logged_in(client)
