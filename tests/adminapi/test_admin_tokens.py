"""Admin tokens: `manage.py create_admin_token` prints one, superusers create (shown once)
and revoke them in the console, team admins do not see them."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from adminapi.models import AdminToken
from audit.models import AuditRecord

TOKENS = "/admin/adminapi/admintoken/"


def api(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def test_the_command_prints_a_read_only_token_as_json(team):
    out, err = StringIO(), StringIO()
    call_command("create_admin_token", "--team", team.slug, stdout=out, stderr=err)
    plaintext = json.loads(out.getvalue().strip().splitlines()[-1])["token"]
    assert plaintext.startswith("pgadm_")
    assert "(read)" in err.getvalue()
    token = AdminToken.objects.get()
    assert not token.can_write and token.user is None
    assert token.created_by == "manage.py create_admin_token"
    assert api(plaintext).get("/v1/admin/members").status_code == 200
    assert api(plaintext).post("/v1/admin/roles", {"name": "x"}, format="json").status_code == 403


def test_the_command_makes_a_write_token_for_a_person(team):
    User.objects.create_user("carol", "carol@acme.dev", "pw", is_staff=True)
    out = StringIO()
    call_command(
        "create_admin_token", "--team", team.slug, "--write", "--user", "CAROL@acme.dev", stdout=out
    )
    plaintext = json.loads(out.getvalue())["token"]
    token = AdminToken.objects.get()
    assert token.can_write and token.user.username == "carol"
    assert api(plaintext).post("/v1/admin/roles", {"name": "sre"}, format="json").status_code == 201
    created = AuditRecord.objects.filter(team=team, details__object="admin token").get()
    assert created.details["action"] == "created"


def test_the_command_refuses_an_unknown_team_or_person(team):
    with pytest.raises(CommandError):
        call_command("create_admin_token", "--team", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="no user"):
        call_command(
            "create_admin_token", "--team", team.slug, "--user", "x@y.z", stdout=StringIO()
        )
    assert not AdminToken.objects.exists()


def test_a_superuser_creates_a_token_shown_once_and_revokes_it(team, superuser_client):
    form = superuser_client.get(f"{TOKENS}add/")
    assert form.status_code == 200
    once = re.search(r'name="once" value="([^"]+)"', form.content.decode()).group(1)
    response = superuser_client.post(
        f"{TOKENS}add/", {"team": team.slug, "name": "CI", "can_write": "on", "once": once}
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    plaintext = re.search(r'value="(pgadm_[^"]+)"', response.content.decode()).group(1)
    token = AdminToken.objects.get()
    assert (token.name, token.can_write, token.created_by) == ("CI", True, "root")
    assert plaintext not in TOKENS + superuser_client.get(TOKENS).content.decode()
    assert api(plaintext).get("/v1/admin/agents").status_code == 200

    superuser_client.post(
        TOKENS, {"action": "revoke_tokens", "_selected_action": [token.pk], "post": "yes"}
    )
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api(plaintext).get("/v1/admin/agents").status_code == 401


def test_team_admins_neither_see_nor_create_admin_tokens(team, team_admin_client):
    assert team_admin_client.get(TOKENS).status_code == 403
    assert team_admin_client.get(f"{TOKENS}add/").status_code == 403
