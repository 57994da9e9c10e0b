"""Signing keys in the admin: read-only, with "rotate now" and "revoke", each logged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from plans.keys import signing_keys_bootstrap
from plans.models import SigningKey

State = SigningKey.State


@pytest.fixture
def aged_keys(db):
    """An active and a next key, published long enough ago for the next one to sign."""
    signing_keys_bootstrap()
    long_ago = timezone.now() - timedelta(days=2)
    SigningKey.objects.update(created_at=long_ago)
    SigningKey.objects.filter(state=State.ACTIVE).update(activated_at=long_ago)
    return {key.state: key.kid for key in SigningKey.objects.all()}


def test_the_key_pages_never_show_the_private_key(superuser_client, aged_keys):
    key = SigningKey.objects.get(kid=aged_keys[State.ACTIVE])
    html = superuser_client.get(reverse("admin:plans_signingkey_change", args=[key.pk])).content
    assert key.private_key_encrypted.encode() not in html
    assert key.public_key.encode() in html


def test_rotate_now_promotes_the_next_key_and_logs_it(team_admin_client, team_admin, aged_keys):
    confirm = team_admin_client.get(reverse("admin:plans_signingkey_rotate"))
    assert confirm.status_code == 200

    response = team_admin_client.post(reverse("admin:plans_signingkey_rotate"))

    assert response.status_code == 302
    assert SigningKey.objects.get(kid=aged_keys[State.ACTIVE]).state == State.RETIRED
    assert SigningKey.objects.get(kid=aged_keys[State.NEXT]).state == State.ACTIVE
    assert SigningKey.objects.filter(state=State.NEXT).count() == 1
    logged = LogEntry.objects.filter(user=team_admin)
    assert logged.filter(object_id=aged_keys[State.ACTIVE]).exists()
    assert logged.filter(object_id=aged_keys[State.NEXT]).exists()
    new_next = SigningKey.objects.get(state=State.NEXT)
    assert logged.filter(object_id=new_next.kid).exists()


def test_revoking_a_key_takes_it_out_and_logs_it(team_admin_client, team_admin, aged_keys):
    kid = aged_keys[State.ACTIVE]
    confirm = team_admin_client.get(
        reverse("admin:plans_signingkey_revoke_signing_keys", args=[kid])
    )
    assert confirm.status_code == 200
    assert "every team" in confirm.content.decode()

    response = team_admin_client.post(
        reverse("admin:plans_signingkey_changelist"),
        {"action": "revoke_signing_keys", "_selected_action": [kid], "post": "yes"},
    )

    assert response.status_code == 302
    assert SigningKey.objects.get(kid=kid).state == State.REVOKED
    assert SigningKey.objects.filter(state=State.ACTIVE).exists()
    jwks = team_admin_client.get("/v1/keys/jwks").json()
    assert kid not in {key["kid"] for key in jwks["keys"]}
    entry = LogEntry.objects.get(user=team_admin, object_id=kid)
    assert "revoked" in entry.get_change_message()


def test_auditors_cannot_rotate_or_revoke(auditor_client, aged_keys):
    kid = aged_keys[State.ACTIVE]
    assert auditor_client.post(reverse("admin:plans_signingkey_rotate")).status_code == 403
    response = auditor_client.post(
        reverse("admin:plans_signingkey_changelist"),
        {"action": "revoke_signing_keys", "_selected_action": [kid], "post": "yes"},
    )
    assert response.status_code == 403
    assert SigningKey.objects.get(kid=kid).state == State.ACTIVE


def test_rotate_now_says_why_when_the_next_key_is_too_young(team_admin_client, db):
    signing_keys_bootstrap()  # the next key was published just now: verifiers may not have it
    before = dict(SigningKey.objects.values_list("kid", "state"))

    response = team_admin_client.post(reverse("admin:plans_signingkey_rotate"), follow=True)

    assert dict(SigningKey.objects.values_list("kid", "state")) == before
    assert "next_key_too_young" in response.content.decode()
    assert not LogEntry.objects.exists()
