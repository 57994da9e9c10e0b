"""Signing keys in the admin: read-only, with "rotate now" and "revoke", each logged. Keys
are shared by every team, so only superusers and "Key operators" rotate or revoke them."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from plans.keys import signing_keys_bootstrap
from plans.models import SigningKey

from .conftest import KEY_OPERATORS, TEAM_ADMINS

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
    html = superuser_client.get(
        reverse("admin:plans_signingkey_change", args=[quote(key.pk)])
    ).content
    assert key.private_key_encrypted.encode() not in html
    assert key.public_key.encode() in html


def test_rotate_now_promotes_the_next_key_and_logs_it(superuser_client, superuser, aged_keys):
    confirm = superuser_client.get(reverse("admin:plans_signingkey_rotate"))
    assert confirm.status_code == 200

    response = superuser_client.post(reverse("admin:plans_signingkey_rotate"))

    assert response.status_code == 302
    assert SigningKey.objects.get(kid=aged_keys[State.ACTIVE]).state == State.RETIRED
    assert SigningKey.objects.get(kid=aged_keys[State.NEXT]).state == State.ACTIVE
    assert SigningKey.objects.filter(state=State.NEXT).count() == 1
    logged = LogEntry.objects.filter(user=superuser)
    assert logged.filter(object_id=aged_keys[State.ACTIVE]).exists()
    assert logged.filter(object_id=aged_keys[State.NEXT]).exists()
    new_next = SigningKey.objects.get(state=State.NEXT)
    assert logged.filter(object_id=new_next.kid).exists()


def test_revoking_a_key_takes_it_out_and_logs_it(key_operator_client, key_operator, aged_keys):
    kid = aged_keys[State.ACTIVE]
    confirm = key_operator_client.get(
        reverse("admin:plans_signingkey_revoke_signing_keys", args=[quote(kid)])
    )
    assert confirm.status_code == 200
    assert "every team" in confirm.content.decode()

    response = key_operator_client.post(
        reverse("admin:plans_signingkey_changelist"),
        {"action": "revoke_signing_keys", "_selected_action": [kid], "post": "yes"},
    )

    assert response.status_code == 302
    assert SigningKey.objects.get(kid=kid).state == State.REVOKED
    assert SigningKey.objects.filter(state=State.ACTIVE).exists()
    jwks = key_operator_client.get("/v1/keys/jwks").json()
    assert kid not in {key["kid"] for key in jwks["keys"]}
    entry = LogEntry.objects.get(user=key_operator, object_id=kid)
    assert "revoked" in entry.get_change_message()


@pytest.mark.parametrize("persona", ["auditor_client", "team_admin_client"])
def test_auditors_and_team_admins_cannot_rotate_or_revoke(request, persona, aged_keys):
    # One team's admin must not be able to stop every team's agents.
    client = request.getfixturevalue(persona)
    before = dict(SigningKey.objects.values_list("kid", "state"))
    kid = aged_keys[State.ACTIVE]
    assert client.get(reverse("admin:plans_signingkey_rotate")).status_code == 403
    assert client.post(reverse("admin:plans_signingkey_rotate")).status_code == 403
    assert (
        client.get(
            reverse("admin:plans_signingkey_revoke_signing_keys", args=[quote(kid)])
        ).status_code
        == 403
    )
    response = client.post(
        reverse("admin:plans_signingkey_changelist"),
        {"action": "revoke_signing_keys", "_selected_action": [kid], "post": "yes"},
    )
    assert response.status_code == 403
    assert dict(SigningKey.objects.values_list("kid", "state")) == before
    assert not LogEntry.objects.exists()


def test_team_admins_see_keys_without_rotate_or_revoke_buttons(team_admin_client, aged_keys):
    listing = team_admin_client.get(reverse("admin:plans_signingkey_changelist"))
    assert listing.status_code == 200
    html = listing.content.decode()
    assert aged_keys[State.ACTIVE] in html
    assert "Rotate now" not in html
    assert "revoke_signing_keys" not in html
    page = team_admin_client.get(
        reverse("admin:plans_signingkey_change", args=[quote(aged_keys[State.ACTIVE])])
    )
    assert page.status_code == 200
    assert "Revoke this key" not in page.content.decode()


def test_superusers_see_the_rotate_and_revoke_buttons(superuser_client, aged_keys):
    html = superuser_client.get(reverse("admin:plans_signingkey_changelist")).content.decode()
    assert "Rotate now" in html
    assert "revoke_signing_keys" in html
    page = superuser_client.get(
        reverse("admin:plans_signingkey_change", args=[quote(aged_keys[State.ACTIVE])])
    )
    assert "Revoke this key" in page.content.decode()


def test_team_admins_do_not_hold_the_key_permissions(team_admin):
    assert not team_admin.has_perm("plans.change_signingkey")
    assert team_admin.has_perm("plans.view_signingkey")
    codenames = set(
        Group.objects.get(name=TEAM_ADMINS).permissions.values_list("codename", flat=True)
    )
    assert "change_signingkey" not in codenames


def test_the_key_operators_group_holds_the_key_permissions_and_nothing_else(db):
    codenames = set(
        Group.objects.get(name=KEY_OPERATORS).permissions.values_list("codename", flat=True)
    )
    assert codenames == {"view_signingkey", "change_signingkey"}


def test_the_migration_takes_the_key_permissions_from_existing_team_admins(db):
    # An installation migrated before the change: its "Team admins" still hold them.
    group = Group.objects.get(name=TEAM_ADMINS)
    change = Permission.objects.get(content_type__app_label="plans", codename="change_signingkey")
    group.permissions.add(change)

    migration = importlib.import_module("members.migrations.0004_key_operators")
    migration.move_key_permissions(django_apps, None)

    assert not group.permissions.filter(pk=change.pk).exists()
    assert Group.objects.get(name=KEY_OPERATORS).permissions.filter(pk=change.pk).exists()


def test_rotate_now_says_why_when_the_next_key_is_too_young(superuser_client, db):
    signing_keys_bootstrap()  # the next key was published just now: verifiers may not have it
    before = dict(SigningKey.objects.values_list("kid", "state"))

    response = superuser_client.post(reverse("admin:plans_signingkey_rotate"), follow=True)

    assert dict(SigningKey.objects.values_list("kid", "state")) == before
    assert "Not rotated: the next key is too young" in response.content.decode()
    assert not LogEntry.objects.exists()


def test_revoking_the_active_key_logs_the_key_that_now_signs_and_the_new_next_key(
    key_operator_client, key_operator, aged_keys
):
    kid, old_next = aged_keys[State.ACTIVE], aged_keys[State.NEXT]

    response = key_operator_client.post(
        reverse("admin:plans_signingkey_changelist"),
        {"action": "revoke_signing_keys", "_selected_action": [kid], "post": "yes"},
        follow=True,
    )

    new_next = SigningKey.objects.get(state=State.NEXT).kid
    logged = LogEntry.objects.filter(user=key_operator)
    assert logged.get(object_id=kid).get_change_message() == "active → revoked by “Revoke”."
    assert logged.get(object_id=old_next).get_change_message() == "next → active by “Revoke”."
    assert logged.get(object_id=new_next).get_change_message() == "Created as next by “Revoke”."
    assert logged.get(object_id=old_next).object_repr == str(SigningKey.objects.get(kid=old_next))
    assert logged.count() == 3
    shown = [str(message) for message in response.context["messages"]]
    assert f"{kid[:12]}… active → revoked" in shown[0] and f"{new_next[:12]}… created" in shown[0]
