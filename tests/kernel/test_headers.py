"""Security headers: a Content-Security-Policy the admin and the API docs work under, HSTS
and Secure cookies when the control plane is served over TLS, and API docs served from our
own static files (no page of Plangate loads anything from another origin)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.urls import reverse

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"


def directives(response) -> dict[str, list[str]]:
    header = response.headers["Content-Security-Policy"]
    parsed = {}
    for part in header.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts = 0
        self.inline_styles = 0
        self.style_attributes = 0
        self.handlers = 0
        self._tag: str | None = None

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        for name in ("src", "href", "spec-url", "data-spec-url", "action"):
            if values.get(name):
                self.urls.append(values[name])
        if tag == "script" and not values.get("src") and values.get("type") != "application/json":
            self.inline_scripts += 1
        self.style_attributes += "style" in values
        self.handlers += any(name.startswith("on") for name in values)
        self._tag = tag

    def handle_data(self, data):
        if self._tag == "style" and data.strip():
            self.inline_styles += 1


def references(html: str) -> _References:
    parser = _References()
    parser.feed(html)
    return parser


def same_origin(url: str) -> bool:
    return url.startswith(("/", "#", "?")) and not url.startswith("//")


# --- Content-Security-Policy --------------------------------------------------------------


def test_admin_pages_carry_a_policy_without_inline_scripts(client):
    response = client.get(reverse("admin:login"))

    assert response.status_code == 200
    policy = directives(response)
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]


def test_the_api_answers_carry_the_policy_too(client):
    assert "default-src 'self'" in client.get("/healthz").headers["Content-Security-Policy"]


def test_plangate_admin_templates_hold_no_inline_script_style_or_handler(db, client):
    user = User.objects.create_superuser("root", "root@example.test", PASSWORD)
    client.force_login(user)
    for url in [
        reverse("admin:index"),
        reverse("admin:plans_signingkey_changelist"),
        reverse("admin:plans_signingkey_rotate"),
        reverse("admin:plans_plan_changelist"),
        reverse("admin:members_member_changelist"),
    ]:
        response = client.get(url)
        assert response.status_code == 200, url
        found = references(response.content.decode())
        assert found.inline_scripts == 0, url
        assert found.inline_styles == 0, url
        assert found.style_attributes == 0, url
        assert found.handlers == 0, url
        assert all(same_origin(link) for link in found.urls), (url, found.urls)


# --- /v1/docs -------------------------------------------------------------------------------


def test_the_docs_page_references_only_our_own_origin(client):
    response = client.get("/v1/docs")

    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn" not in html and "googleapis" not in html
    found = references(html)
    assert found.urls
    assert all(same_origin(url) for url in found.urls), found.urls
    assert found.inline_scripts == 0 and found.inline_styles == 0
    # Redoc's own <style> elements are allowed by this response's nonce and their hashes.
    nonce = re.search(r'data-style-nonce="([^"]+)"', html).group(1)
    style_src = directives(response)["style-src"]
    assert style_src[:2] == ["'self'", f"'nonce-{nonce}'"]
    assert all(source.startswith("'sha256-") for source in style_src[2:])
    assert "'unsafe-inline'" not in style_src
    assert directives(response)["script-src"] == ["'self'"]


def test_the_docs_script_is_one_of_our_static_files(client):
    html = client.get("/v1/docs").content.decode()
    scripts = [url for url in references(html).urls if url.endswith(".js")]
    assert scripts
    for url in scripts:
        path = url.removeprefix("/" + settings.STATIC_URL.strip("/") + "/")
        assert finders.find(path), url
        served = client.get(url)
        assert served.status_code == 200, url


# --- TLS: HSTS and cookies -----------------------------------------------------------------


def test_hsts_is_sent_over_https_when_the_issuer_is_https(client):
    assert settings.PLANGATE_ISSUER.startswith("https://")

    secure = client.get("/healthz", secure=True)
    plain = client.get("/healthz")

    assert secure.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert "Strict-Transport-Security" not in plain.headers


def test_session_and_csrf_cookies_are_secure_when_the_issuer_is_https(db, client):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    form = client.get(reverse("admin:login"), secure=True)
    assert form.cookies["csrftoken"]["secure"] is True

    response = client.post(
        reverse("admin:login"), {"username": "root", "password": PASSWORD}, secure=True
    )

    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] is True
    assert response.cookies["sessionid"]["httponly"] is True


def load_settings(**environment: str) -> dict:
    """The settings module imported in a fresh interpreter with this environment."""
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({name: getattr(s, name) for name in ["
        "'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
        "'SECURE_PROXY_SSL_HEADER']}))"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PLANGATE_", "SECURE_", "SESSION_", "CSRF_"))
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "controlplane.settings",
            "SECRET_KEY": "settings-test-secret",
            "PLANGATE_ENV_FILE": os.devnull,
            **environment,
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("issuer", "secure", "hsts"),
    [("https://plangate.example", True, 31536000), ("http://localhost:8000", False, 0)],
)
def test_tls_settings_follow_the_issuer(issuer, secure, hsts):
    loaded = load_settings(PLANGATE_ISSUER=issuer)
    assert loaded["SESSION_COOKIE_SECURE"] is secure
    assert loaded["CSRF_COOKIE_SECURE"] is secure
    assert loaded["SECURE_HSTS_SECONDS"] == hsts
    assert loaded["SECURE_PROXY_SSL_HEADER"] is None


def test_tls_settings_can_be_set_explicitly():
    loaded = load_settings(
        PLANGATE_ISSUER="https://plangate.example",
        SECURE_HSTS_SECONDS="0",
        SESSION_COOKIE_SECURE="false",
        PLANGATE_TRUST_X_FORWARDED_PROTO="true",
    )
    assert loaded["SESSION_COOKIE_SECURE"] is False
    assert loaded["CSRF_COOKIE_SECURE"] is False
    assert loaded["SECURE_HSTS_SECONDS"] == 0
    assert loaded["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_behind_a_tls_proxy_the_forwarded_scheme_counts_only_when_trusted(client, settings):
    forwarded = {"HTTP_X_FORWARDED_PROTO": "https"}
    assert "Strict-Transport-Security" not in client.get("/healthz", **forwarded).headers

    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert "Strict-Transport-Security" in client.get("/healthz", **forwarded).headers
