"""Audit tokens in the admin: superusers create (shown once), list and revoke them; team
admins and auditors do not even see them."""

from __future__ import annotations

import re

from audit.models import AuditRecord, AuditToken
from audit.tokens import audit_token_create
from kernel.problems import Code
from tests.plans.helpers import assert_problem

from .test_records_api import URL, client_for

TOKENS = "/admin/audit/audittoken/"


def create(client, team_slug: str, name: str = "SIEM"):
    form = client.get(f"{TOKENS}add/")
    assert form.status_code == 200
    once = re.search(r'name="once" value="([^"]+)"', form.content.decode()).group(1)
    return client.post(f"{TOKENS}add/", {"team": team_slug, "name": name, "once": once}), once


def test_a_superuser_creates_a_token_that_is_shown_once_and_works(team, superuser_client):
    response, once = create(superuser_client, team.slug)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    plaintext = re.search(r'value="(pga_[^"]+)"', response.content.decode()).group(1)
    token = AuditToken.objects.get()
    assert (token.team, token.name, token.created_by) == (team, "SIEM", "root")
    assert plaintext not in AuditToken.objects.values_list("secret_hash", flat=True)
    assert client_for(plaintext).get(URL).status_code == 200
    # Posting the same form again creates nothing and shows nothing.
    again = superuser_client.post(f"{TOKENS}add/", {"team": team.slug, "name": "x", "once": once})
    assert again.status_code == 302 and AuditToken.objects.count() == 1
    listed = superuser_client.get(TOKENS).content.decode()
    assert token.prefix in listed and plaintext not in listed
    created = AuditRecord.objects.filter(team=team, details__object="audit token").get()
    assert created.actor == "root" and created.details["action"] == "created"


def test_a_superuser_revokes_a_token_after_confirming(team, superuser_client):
    token, plaintext = audit_token_create(team=team)
    url = f"{TOKENS}{token.pk}/revoke-tokens/"
    assert "Revoke audit tokens" in superuser_client.get(url).content.decode()
    token.refresh_from_db()
    assert token.revoked_at is None  # asking is not revoking
    response = superuser_client.post(
        TOKENS, {"action": "revoke_tokens", "_selected_action": [token.pk], "post": "yes"}
    )
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert_problem(client_for(plaintext).get(URL), 401, Code.INVALID_AUDIT_TOKEN)


def test_team_admins_and_auditors_neither_see_nor_create_tokens(
    team, team_admin_client, auditor_client
):
    token, _ = audit_token_create(team=team)
    for client in (team_admin_client, auditor_client):
        assert client.get(TOKENS).status_code == 403
        assert client.get(f"{TOKENS}add/").status_code == 403
        assert client.post(f"{TOKENS}add/", {"team": team.slug, "once": "x"}).status_code == 403
        assert client.get(f"{TOKENS}{token.pk}/revoke-tokens/").status_code == 403
        assert "audittoken" not in client.get("/admin/").content.decode()
    assert AuditToken.objects.count() == 1
    token.refresh_from_db()
    assert token.revoked_at is None
