"""The activity log outside the admin (test_activity_admin.py): every change by a management
command, `make run`'s seeding, a Celery task or a service is a ``change`` record of its
team, naming who acted and what changed; a no-op or a refusal records nothing."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings

from audit.actors import acting_as
from kernel.problems import DomainError
from members.models import ApiKey
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
from teams.models import Role, Team
from tests.audit.activity_helpers import about, change_count, changes
from tests.conftest import POLICY
from tests.plans.keys_helpers import OTHER_ENCRYPTION_KEY, TEST_ENCRYPTION_KEY, age_keys

pytestmark = pytest.mark.django_db
DAY = 86400


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


def seed_as_make_run(*options: str) -> str:
    """``seed_demo`` with the arguments ``make run`` passes it (scripts/run_local.py); the
    API key it printed."""
    (arguments,) = [c for c in start_commands("http://localhost:8000") if c[0] == "seed_demo"]
    assert "--actor" in arguments
    out = StringIO()
    call_command(*arguments, "--admin-password", "seed", *options, stdout=out)
    return out.getvalue().split("API key: ")[1].split()[0]


def test_make_run_seeds_as_make_run_and_a_second_start_records_nothing(db):
    printed = seed_as_make_run()
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

    # The next start keeps the printed key (make run passes it from var/local.env).
    assert seed_as_make_run("--api-key", printed) == printed
    assert changes(team)[len(first) :] == []

    # A start without it (local.env lost) renews the key.
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


def test_an_agent_update_records_the_fields_it_changed(team, agent):
    strict = policy_set(team=team, slug="strict", document=POLICY).policy

    agent_update(agent=agent.agent, policy=strict, is_active=False)

    record = about(team, "agent")[-1]
    assert (record.details["action"], record.agent_name) == ("updated", agent.agent.name)
    assert record.details["changes"] == {
        "policy": ["default", "strict"],
        "is_active": [True, False],
    }
