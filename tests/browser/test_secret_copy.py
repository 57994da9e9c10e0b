"""Every secret shown once has a Copy button that puts it on the clipboard: a new API key, a
new audit token and an invite's set-password link."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from audit.models import AuditToken
from members.models import ApiKey
from members.services import api_key_authenticate, member_upsert, team_get_or_create
from policies.services import policy_set
from tests.admin.conftest import ensure_admin_groups
from tests.conftest import POLICY, make_agent

from .conftest import log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def acme(transactional_db):
    ensure_admin_groups()
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    team = team_get_or_create(slug="default", name="Acme")
    member_upsert(team=team, email="alice@acme.dev", name="Alice")
    return team


def clipboard(page) -> str:
    return page.evaluate("navigator.clipboard.readText()")


def copy(page, field_id: str) -> str:
    """Click the Copy button of the field; what the clipboard then holds."""
    page.evaluate("navigator.clipboard.writeText('nothing copied yet')")
    button = page.locator(f"button[data-copy-from='{field_id}']")
    expect(button).to_have_text("Copy")
    button.click()
    expect(button).to_have_text("Copied")
    return clipboard(page)


def test_the_shown_once_secrets_are_copied_by_their_copy_buttons(page, live_server, acme):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    agent = make_agent(acme, "summariser", policy_set(team=acme, slug="default", document=POLICY))
    log_in(page, "root", PASSWORD)

    # A new API key.
    page.goto(f"/admin/members/agent/{agent.agent.pk}/change/")
    page.get_by_role("link", name="Create API key").click()
    page.fill("#id_name", "copied")
    page.locator("input[type=submit][value='Create API key']").click()
    key = page.locator("#secret-plaintext").input_value()
    assert copy(page, "secret-plaintext") == key
    assert api_key_authenticate(key).agent_id == agent.agent.pk
    assert ApiKey.objects.filter(agent=agent.agent, name="copied").count() == 1

    # A new audit token.
    page.goto("/admin/audit/audittoken/add/")
    page.select_option("#id_team", "default")
    page.fill("#id_name", "siem")
    page.locator("input[type=submit]").last.click()
    token = page.locator("#secret-plaintext").input_value()
    assert token and copy(page, "secret-plaintext") == token
    assert AuditToken.objects.filter(team=acme, name="siem").count() == 1

    # An invite's set-password link.
    page.goto("/admin/invite/")
    page.fill("#id_email", "audrey@acme.dev")
    page.fill("#id_name", "Audrey")
    page.get_by_role("radio", name=re.compile("Auditor")).check()
    page.get_by_role("checkbox", name="Acme").check()
    page.get_by_role("button", name="Invite").click()
    link = page.locator("#set-password-link").input_value()
    assert "/admin/welcome/" in link
    assert copy(page, "set-password-link") == link
