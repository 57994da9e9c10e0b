"""The activity log of the admin: each change a person makes in the admin is a ``change``
record of its team (or of each team it concerns), naming them and what changed, once."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Group as PermissionGroup
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from guard.policy import policy_hash, validate_policy
from members.models import ApiKey, Member
from plans.models import SigningKey
from teams.models import Role, Team
from tests.admin.conftest import (
    AUDITORS,
    KEY_OPERATORS,
    TEAM_ADMINS,
    ensure_admin_groups,
    logged_in,
)
from tests.admin.conftest import make_staff as staff_user
from tests.audit.activity_helpers import about, change_count, changes
from tests.conftest import POLICY

pytestmark = pytest.mark.django_db


@pytest.fixture
def tessa(team):
    """The team's admin, in the group people get their rights from."""
    ensure_admin_groups()
    return staff_user("tessa", group=TEAM_ADMINS, teams=[team])


@pytest.fixture
def tessa_client(tessa) -> Client:
    return logged_in(tessa)


def test_a_member_added_and_edited_in_the_admin_is_recorded_as_the_admins_change(
    tessa_client, team
):
    role = Role.objects.create(team=team, name="sre")
    before = change_count(team)

    added = tessa_client.post(
        reverse("admin:members_member_add"),
        {"team": team.pk, "email": "Bob@Acme.dev", "name": "Bob", "is_active": "on"},
    )
    assert added.status_code == 302, added.content.decode()
    bob = Member.objects.get(team=team, email="bob@acme.dev")
    edited = tessa_client.post(
        reverse("admin:members_member_change", args=[bob.pk]),
        {"team": team.pk, "email": "bob@acme.dev", "name": "Bobby", "role": role.pk},
    )
    assert edited.status_code == 302, edited.content.decode()

    created, updated = changes(team)[before:]
    assert created.actor == updated.actor == "tessa"
    assert created.user == updated.user == "bob@acme.dev"
    assert created.details == {
        "object": "member",
        "id": bob.pk,
        "name": "bob@acme.dev",
        "action": "created",
        "changes": {
            "team": [None, "default"],
            "email": [None, "bob@acme.dev"],
            "name": [None, "Bob"],
            "is_active": [None, True],
        },
    }
    assert updated.details["action"] == "updated"
    # The unticked box disabled Bob: the record says so with the rest, old and new.
    assert updated.details["changes"] == {
        "name": ["Bob", "Bobby"],
        "role": [None, "sre"],
        "is_active": [True, False],
    }


def test_saving_a_member_unchanged_in_the_admin_records_nothing(tessa_client, team, member):
    before = change_count(team)
    response = tessa_client.post(
        reverse("admin:members_member_change", args=[member.pk]),
        {
            "team": team.pk,
            "email": member.email,
            "name": member.name,
            "role": member.role_id,
            "groups": list(member.groups.values_list("pk", flat=True)),
            "is_active": "on",
        },
    )

    assert response.status_code == 302, response.content.decode()
    assert change_count(team) == before


def test_a_refused_admin_save_records_nothing(tessa_client, team, member):
    before = change_count(team)
    response = tessa_client.post(
        reverse("admin:members_member_add"),
        {"team": team.pk, "email": "ALICE@acme.dev", "role": "", "is_active": "on"},
    )

    assert response.status_code == 200  # the form again, with the error
    assert change_count(team) == before


def test_admin_actions_that_call_a_service_record_each_change_once(
    tessa_client, team, member, sre_member, agent
):
    api_key = ApiKey.objects.get(agent=agent.agent)
    before = change_count(team)

    disabled = tessa_client.post(
        reverse("admin:members_member_changelist"),
        {"action": "disable_members", "_selected_action": [member.pk, sre_member.pk]},
    )
    revoked = tessa_client.post(
        reverse("admin:members_apikey_changelist"),
        {"action": "revoke_api_keys", "_selected_action": [api_key.pk], "post": "yes"},
    )
    assert disabled.status_code == revoked.status_code == 302

    records = changes(team)[before:]
    assert sorted(
        (r.details["object"], r.details["action"], r.details["name"]) for r in records
    ) == [
        ("api_key", "revoked", api_key.prefix),
        ("member", "disabled", member.email),
        ("member", "disabled", sre_member.email),
    ]
    assert {record.actor for record in records} == {"tessa"}


def test_roles_the_admin_saves_itself_are_recorded_created_renamed_and_deleted(tessa_client, team):
    before = change_count(team)
    tessa_client.post(
        reverse("admin:teams_role_add"), {"team": team.pk, "name": "sre", "description": ""}
    )
    role = Role.objects.get(team=team, name="sre")
    tessa_client.post(
        reverse("admin:teams_role_change", args=[role.pk]),
        {"name": "site-reliability", "description": "on call"},
    )
    deleted = tessa_client.post(reverse("admin:teams_role_delete", args=[role.pk]), {"post": "yes"})
    assert deleted.status_code == 302
    assert not Role.objects.filter(pk=role.pk).exists()

    records = changes(team)[before:]
    assert [record.details["action"] for record in records] == ["created", "updated", "deleted"]
    assert {record.actor for record in records} == {"tessa"}
    assert {record.details["object"] for record in records} == {"role"}
    assert records[0].details["changes"] == {"team": [None, "Acme"], "name": [None, "sre"]}
    assert records[1].details["changes"] == {
        "name": ["sre", "site-reliability"],
        "description": ["", "on call"],
    }
    assert records[2].details["name"] == "site-reliability"


def test_a_team_a_superuser_adds_in_the_admin_is_recorded_in_the_new_teams_log(db):
    root = logged_in(User.objects.create_superuser("root", "root@example.test", "pw"))
    manager = User.objects.create_user("mia", is_staff=True)

    response = root.post(
        reverse("admin:teams_team_add"),
        {"name": "Initech", "slug": "initech", "staff": [manager.pk]},
    )
    assert response.status_code == 302, response.content.decode()

    (record,) = changes(Team.objects.get(slug="initech"))
    assert record.actor == "root"
    assert record.details["action"] == "created"
    assert record.details["changes"]["staff"] == [None, ["mia"]]


def test_a_users_rights_and_password_changed_in_the_admin_are_in_their_teams_logs(
    team, other_team, tessa
):
    root = logged_in(User.objects.create_superuser("root", "root@example.test", "pw"))
    auditors = PermissionGroup.objects.get(name=AUDITORS)
    before = change_count(other_team)

    response = root.post(
        reverse("admin:auth_user_change", args=[tessa.pk]),
        {
            "username": "tessa",
            "email": tessa.email,
            "is_active": "on",
            "is_staff": "on",
            "groups": [auditors.pk],
            "date_joined_0": "2026-12-01",
            "date_joined_1": "00:00:00",
        },
    )
    assert response.status_code == 302, response.content.decode()
    password = "a new long password 42"
    response = root.post(
        reverse("admin:auth_user_password_change", args=[tessa.pk]),
        {"password1": password, "password2": password, "usable_password": "true"},
    )
    assert response.status_code == 302, response.content.decode()

    rights, new_password = about(team, "user")
    assert rights.actor == new_password.actor == "root"
    assert rights.details["changes"]["groups"] == [[TEAM_ADMINS], [AUDITORS]]
    assert new_password.details["message"] == "Changed password."
    assert password not in json.dumps(new_password.details)
    # Tessa manages one team: the other team's log does not hear of her.
    assert change_count(other_team) == before


def test_a_permission_group_changed_in_the_admin_is_in_every_teams_log(team, other_team):
    root = logged_in(User.objects.create_superuser("root", "root@example.test", "pw"))
    auditors = PermissionGroup.objects.get(name=AUDITORS)
    permissions = list(auditors.permissions.values_list("pk", flat=True))

    response = root.post(
        reverse("admin:auth_group_change", args=[auditors.pk]),
        {"name": "Auditors (read-only)", "permissions": permissions},
    )
    assert response.status_code == 302, response.content.decode()

    for each in (team, other_team):
        (record,) = about(each, "group")
        assert record.actor == "root"
        assert record.details["changes"] == {"name": [AUDITORS, "Auditors (read-only)"]}


def test_a_policy_published_in_the_admin_names_the_admin_the_version_and_the_comment(
    tessa_client, team, policy_version
):
    policy = policy_version.policy
    document = {**POLICY, "default": "allow"}
    response = tessa_client.post(
        reverse("admin:policies_policy_change", args=[policy.pk]),
        {
            "description": policy.description,
            "document": json.dumps(document),
            "comment": "open by default",
            "base_version": policy_version.number,
            # "Publish" on the page showing this document's impact (see rehearsal.admin_preview)
            "publish_confirmed": policy_hash(validate_policy(document)),
        },
    )
    assert response.status_code == 302, response.content.decode()

    (record,) = about(team, "policy")[-1:]
    assert record.actor == "tessa"
    assert (record.policy, record.policy_version) == ("default", 2)
    assert record.details["action"] == "published"
    assert record.details["changes"] == {"version": [1, 2]}
    assert record.details["author"] == "tessa"
    assert record.details["comment"] == "open by default"


def test_a_key_revoked_in_the_admin_is_recorded_in_every_teams_log(team, other_team):
    ensure_admin_groups()
    operator = logged_in(staff_user("kim", group=KEY_OPERATORS, teams=[]))
    call_command("rotate_keys", stdout=StringIO())
    active = SigningKey.objects.get(state=SigningKey.State.ACTIVE)

    response = operator.post(
        reverse("admin:plans_signingkey_changelist"),
        {"action": "revoke_signing_keys", "_selected_action": [active.kid], "post": "yes"},
    )
    assert response.status_code == 302

    for each in (team, other_team):
        (record,) = [r for r in about(each, "signing_key") if r.details["action"] == "revoked"]
        assert record.actor == "kim"
        assert record.details["id"] == active.kid
        assert record.details["changes"][active.kid] == ["active", "revoked"]
