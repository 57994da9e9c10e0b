"""The activity log: every change by an admin, a management command, `make run`'s seeding or
a Celery task is a ``change`` record of its team, naming who acted and what changed."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import Group as PermissionGroup
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from audit.actors import acting_as
from audit.models import AuditRecord
from kernel.problems import DomainError
from members.models import ApiKey, Member, Role, Team
from members.services import (
    agent_update,
    api_key_create,
    api_key_revoke,
    member_disable,
    member_save,
    member_upsert,
)
from plans.keys import signing_key_revoke
from plans.models import SigningKey
from plans.tasks import rotate_signing_keys
from policies.services import policy_set
from scripts.run_local import ACTOR as MAKE_RUN
from scripts.run_local import start_commands
from tests.admin.conftest import (
    AUDITORS,
    KEY_OPERATORS,
    TEAM_ADMINS,
    ensure_admin_groups,
    logged_in,
)
from tests.admin.conftest import make_staff as staff_user
from tests.conftest import POLICY
from tests.plans.keys_helpers import OTHER_ENCRYPTION_KEY, TEST_ENCRYPTION_KEY, age_keys

pytestmark = pytest.mark.django_db
DAY = 86400


def changes(team: Team) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.CHANGE).order_by("id"))


def change_count(team: Team) -> int:
    return AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.CHANGE).count()


def about(team: Team, object_type: str) -> list[AuditRecord]:
    return [record for record in changes(team) if record.details["object"] == object_type]


@pytest.fixture
def tessa(team):
    """The team's admin, in the group people get their rights from."""
    ensure_admin_groups()
    return staff_user("tessa", group=TEAM_ADMINS, teams=[team])


@pytest.fixture
def tessa_client(tessa) -> Client:
    return logged_in(tessa)


# --- the admin ------------------------------------------------------------------------------


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
        reverse("admin:members_role_add"), {"team": team.pk, "name": "sre", "description": ""}
    )
    role = Role.objects.get(team=team, name="sre")
    tessa_client.post(
        reverse("admin:members_role_change", args=[role.pk]),
        {"name": "site-reliability", "description": "on call"},
    )
    deleted = tessa_client.post(
        reverse("admin:members_role_delete", args=[role.pk]), {"post": "yes"}
    )
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
        reverse("admin:members_team_add"),
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


# --- management commands ----------------------------------------------------------------------


def test_each_command_records_its_changes_as_manage_py_and_its_name(team, tmp_path):
    before = change_count(team)
    call_command("create_member", "bob@acme.dev", "--role", "sre", stdout=StringIO())
    call_command("disable_member", "bob@acme.dev", stdout=StringIO())
    document = tmp_path / "policy.json"
    document.write_text(json.dumps(POLICY))
    call_command("set_policy", "ops", "--file", str(document), "--comment", "v1", stdout=StringIO())
    out = StringIO()
    call_command("create_agent", "deployer", "--policy", "ops", stdout=out)
    plaintext = json.loads(out.getvalue().splitlines()[-1])["apiKey"]

    actions = [
        (record.actor, record.details["object"], record.details["action"])
        for record in changes(team)[before:]
    ]
    assert actions == [
        ("manage.py create_member", "role", "created"),
        ("manage.py create_member", "member", "created"),
        ("manage.py disable_member", "member", "disabled"),
        ("manage.py set_policy", "policy", "created"),
        ("manage.py create_agent", "agent", "created"),
        ("manage.py create_agent", "api_key", "created"),
    ]
    api_key = ApiKey.objects.get()
    key_record = about(team, "api_key")[0]
    assert key_record.details["name"] == api_key.prefix
    # The secret is shown once and never kept: not in the log either.
    secret = plaintext.rsplit("_", 1)[1]
    assert secret not in json.dumps(key_record.details)
    assert api_key.secret_hash not in json.dumps(key_record.details)


def test_rotate_keys_records_the_rotation_in_every_team_as_the_command(team, other_team):
    call_command("rotate_keys", stdout=StringIO())  # the first keys
    age_keys(2 * DAY)
    call_command("rotate_keys", stdout=StringIO())
    # A rotation refused as too soon changes nothing and records nothing.
    before = change_count(team)
    call_command("rotate_keys", "--if-due", stdout=StringIO())
    assert change_count(team) == before

    for each in (team, other_team):
        records = about(each, "signing_key")
        assert [record.details["action"] for record in records] == ["bootstrapped", "rotated"]
        assert {record.actor for record in records} == {"manage.py rotate_keys"}
    rotated = about(team, "signing_key")[-1]
    assert sorted(rotated.details["changes"].values(), key=str) == [
        ["active", "retired"],
        ["next", "active"],
        [None, "next"],
    ]


def test_reencrypt_keys_records_which_keys_it_rewrote_and_a_second_run_nothing(team):
    call_command("rotate_keys", stdout=StringIO())
    kids = sorted(SigningKey.objects.values_list("kid", flat=True))
    with override_settings(KEY_ENCRYPTION_KEY=f"{OTHER_ENCRYPTION_KEY},{TEST_ENCRYPTION_KEY}"):
        call_command("reencrypt_keys", stdout=StringIO())
        call_command("reencrypt_keys", stdout=StringIO())

    (record,) = [r for r in about(team, "signing_key") if r.details["action"] == "reencrypted"]
    assert record.actor == "manage.py reencrypt_keys"
    assert record.details["reencrypted"] == kids


def test_actor_names_someone_else_for_the_commands_changes(team):
    before = change_count(team)
    call_command("create_member", "bob@acme.dev", "--actor", "jane (ticket 42)", stdout=StringIO())

    assert {record.actor for record in changes(team)[before:]} == {"jane (ticket 42)"}


def test_a_refused_command_records_nothing(team, member):
    before = change_count(team)
    with pytest.raises(Exception, match="not a member"):
        call_command("disable_member", "nobody@acme.dev", stdout=StringIO())

    assert change_count(team) == before


# --- make run's seeding -------------------------------------------------------------------------


def seed_as_make_run() -> None:
    """``seed_demo`` with the arguments ``make run`` passes it (scripts/run_local.py)."""
    (arguments,) = [c for c in start_commands("http://localhost:8000") if c[0] == "seed_demo"]
    assert "--actor" in arguments
    call_command(*arguments, "--admin-password", "seed", stdout=StringIO())


def test_make_run_seeds_as_make_run_and_a_second_start_records_only_the_renewed_key(db):
    seed_as_make_run()
    team = Team.objects.get(slug="default")
    first = changes(team)
    assert {record.actor for record in first} == {MAKE_RUN} == {"make run"}
    assert {(record.details["object"], record.details["action"]) for record in first} == {
        ("team", "created"),
        ("user", "created"),
        ("role", "created"),
        ("group", "created"),
        ("member", "created"),
        ("policy", "created"),
        ("agent", "created"),
        ("api_key", "created"),
    }

    seed_as_make_run()

    again = changes(team)[len(first) :]
    assert [(record.details["object"], record.details["action"]) for record in again] == [
        ("api_key", "revoked"),
        ("api_key", "created"),
    ]
    assert {record.actor for record in again} == {"make run"}


def test_make_run_creates_the_first_keys_as_make_run():
    (arguments,) = [c for c in start_commands("http://localhost:8000") if c[0] == "rotate_keys"]
    team = Team.objects.create(slug="early", name="Early")

    call_command(*arguments, stdout=StringIO())

    (record,) = changes(team)
    assert (record.actor, record.details["action"]) == ("make run", "bootstrapped")


# --- Celery tasks -------------------------------------------------------------------------------


def test_the_scheduled_rotation_records_as_the_celery_task(team):
    rotate_signing_keys()

    (record,) = about(team, "signing_key")
    assert record.actor == "celery plans.tasks.rotate_signing_keys"


# --- services: no-ops, refusals, no door, teams ---------------------------------------------


def test_a_service_call_that_changes_nothing_records_nothing(team, member, disabled_member, agent):
    api_key = ApiKey.objects.filter(agent=agent.agent).get()
    api_key_revoke(api_key=api_key)
    call_command("rotate_keys", stdout=StringIO())
    kid = SigningKey.objects.get(state=SigningKey.State.ACTIVE).kid
    signing_key_revoke(kid=kid)
    before = change_count(team)

    member_upsert(team=team, email="ALICE@acme.dev", name=member.name, role="engineer")
    member_disable(team=team, email=disabled_member.email)
    agent_update(agent=agent.agent, name=agent.agent.name, is_active=True)
    policy_set(team=team, slug="default", document=POLICY)
    api_key_revoke(api_key=api_key)
    signing_key_revoke(kid=kid)

    assert change_count(team) == before


def test_a_refused_service_call_records_nothing(team, member, sre_member):
    before = change_count(team)
    with pytest.raises(DomainError):
        member_save(team=team, email=sre_member.email, member=member, role="new-role")
    with pytest.raises(DomainError):
        policy_set(team=team, slug="broken", document={"version": 1, "rules": "none"})

    assert change_count(team) == before
    assert not Role.objects.filter(name="new-role").exists()


def test_with_no_door_the_actor_is_empty_and_a_door_names_it(team):
    member_upsert(team=team, email="bob@acme.dev")
    with acting_as("someone"):
        member_upsert(team=team, email="carol@acme.dev")

    assert [record.actor for record in about(team, "member")] == ["", "someone"]


def test_a_change_in_one_team_is_never_in_anothers_log(team, other_team, agent):
    others_before = list(changes(other_team))
    member_upsert(team=team, email="bob@acme.dev", role="sre", groups=["oncall"])
    member_disable(team=team, email="bob@acme.dev")
    api_key_create(agent=agent.agent, name="ci")
    policy_set(team=team, slug="default", document={**POLICY, "default": "allow"})

    assert changes(other_team) == others_before
    assert all(record.team_id == team.pk for record in changes(team))


def test_a_member_moved_to_another_team_is_in_both_teams_logs(team, other_team, member):
    member_save(team=other_team, email=member.email, member=member, role="")

    (left,) = about(team, "member")[-1:]
    (arrived,) = about(other_team, "member")[-1:]
    assert left.details == arrived.details
    assert left.details["changes"]["team"] == ["default", "globex"]
