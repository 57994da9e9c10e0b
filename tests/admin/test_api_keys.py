"""An API key created in the admin is shown once, on the page answering the form, and
never again; revoking it shuts the API door."""

from __future__ import annotations

import logging
import re

from django.contrib.admin.models import ADDITION, LogEntry
from django.urls import reverse

from kernel.problems import Code
from members.models import ApiKey
from members.services import api_key_authenticate

KEY_PATTERN = re.compile(r"pg_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


def open_form(client, agent):
    url = reverse("admin:members_agent_create_api_key", args=[agent.pk])
    page = client.get(url)
    assert page.status_code == 200
    once = re.search(r'name="once" value="([^"]+)"', page.content.decode()).group(1)
    return url, once


def test_the_key_is_shown_once_and_works(team_admin_client, agent, caplog):
    caplog.set_level(logging.DEBUG)
    url, once = open_form(team_admin_client, agent.agent)
    before = ApiKey.objects.count()

    response = team_admin_client.post(url, {"name": "ci runner", "expires_at": "", "once": once})

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    shown = KEY_PATTERN.findall(response.content.decode())
    assert len(set(shown)) == 1
    plaintext = shown[0]
    assert ApiKey.objects.count() == before + 1
    api_key = api_key_authenticate(plaintext)
    assert api_key.agent_id == agent.agent.pk and api_key.name == "ci runner"
    # Stored as a keyed hash only; never in the history or the logs.
    secret = plaintext[len("pg_") + 12 + 1 :]
    assert secret not in api_key.secret_hash
    assert not LogEntry.objects.filter(change_message__contains=secret).exists()
    assert secret not in caplog.text

    # The same form posted again (a reload of the result page) shows nothing and creates nothing.
    again = team_admin_client.post(url, {"name": "ci runner", "once": once})
    assert again.status_code == 302
    assert ApiKey.objects.count() == before + 1
    followed = team_admin_client.get(again["Location"]).content.decode()
    assert secret not in followed
    assert "shown only once" in followed
    # Nowhere else either.
    agent_page = team_admin_client.get(reverse("admin:members_agent_change", args=[agent.agent.pk]))
    assert secret not in agent_page.content.decode()
    assert api_key.prefix in agent_page.content.decode()
    keys_page = team_admin_client.get(reverse("admin:members_apikey_changelist"))
    assert secret not in keys_page.content.decode()


def test_creating_a_key_leaves_history_without_the_secret(team_admin_client, team_admin, agent):
    url, once = open_form(team_admin_client, agent.agent)
    response = team_admin_client.post(url, {"once": once})
    plaintext = KEY_PATTERN.search(response.content.decode()).group(0)
    api_key = api_key_authenticate(plaintext)
    entries = LogEntry.objects.filter(user=team_admin)
    assert entries.filter(action_flag=ADDITION, object_id=str(api_key.pk)).exists()
    assert entries.filter(
        object_id=agent.agent.pk, change_message__contains=api_key.prefix
    ).exists()


def test_an_invalid_expiry_is_refused_and_creates_nothing(team_admin_client, agent):
    url, once = open_form(team_admin_client, agent.agent)
    before = ApiKey.objects.count()
    response = team_admin_client.post(url, {"expires_at": "2001-01-01 00:00", "once": once})
    assert response.status_code == 200
    assert "must be in the future" in response.content.decode()
    assert not KEY_PATTERN.search(response.content.decode())
    assert ApiKey.objects.count() == before


def test_the_create_action_leads_to_the_form(team_admin_client, agent):
    response = team_admin_client.post(
        reverse("admin:members_agent_changelist"),
        {"action": "create_api_key", "_selected_action": [agent.agent.pk], "index": 0},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "admin:members_agent_create_api_key", args=[agent.agent.pk]
    )


def test_revoking_a_key_refuses_the_api_and_is_logged(team_admin_client, team_admin, agent):
    api_key = agent.agent.api_keys.get()
    confirm = team_admin_client.get(
        reverse("admin:members_apikey_revoke_api_keys", args=[api_key.pk])
    )
    assert confirm.status_code == 200
    assert "Yes, revoke" in confirm.content.decode()
    assert agent.client.get("/v1/keys/jwks").status_code == 200

    response = team_admin_client.post(
        reverse("admin:members_apikey_changelist"),
        {"action": "revoke_api_keys", "_selected_action": [api_key.pk], "post": "yes"},
    )

    assert response.status_code == 302
    api_key.refresh_from_db()
    assert api_key.is_revoked()
    refused = agent.client.post("/v1/plans", {"plan": {}}, format="json")
    assert refused.status_code == 401
    assert refused.json()["code"] == Code.INVALID_API_KEY
    assert LogEntry.objects.filter(
        user=team_admin, object_id=str(api_key.pk), change_message="Revoked."
    ).exists()


def test_api_keys_cannot_be_added_or_edited_directly(superuser_client, agent):
    api_key = agent.agent.api_keys.get()
    assert superuser_client.get(reverse("admin:members_apikey_add")).status_code == 403
    url = reverse("admin:members_apikey_change", args=[api_key.pk])
    assert superuser_client.post(url, {"name": "x"}).status_code == 403
