"""The operator's commands: create_member, disable_member, set_policy, create_agent."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from members.models import Agent, ApiKey, Member
from members.services import api_key_authenticate
from policies.models import Policy
from teams.models import Team
from tests.conftest import POLICY


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_member_creates_team_role_and_groups_then_updates(db):
    run("create_member", "Bob@Acme.dev", "--team", "acme", "--role", "sre", "--group", "oncall")
    run(
        "create_member",
        "bob@acme.dev",
        "--team",
        "acme",
        "--name",
        "Bob",
        "--group",
        "a",
        "--group",
        "b",
    )

    member = Member.objects.get(team__slug="acme")
    assert member.email == "bob@acme.dev"
    assert member.name == "Bob"
    assert member.role.name == "sre"
    assert member.group_names() == ["a", "b"]


def test_disable_member(db):
    run("create_member", "bob@acme.dev")

    run("disable_member", "BOB@acme.dev")

    assert Member.objects.get(email="bob@acme.dev").is_active is False
    with pytest.raises(CommandError):
        run("disable_member", "nobody@acme.dev")


def test_set_policy_prints_version_and_hash_and_publishes_versions(db, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))

    first = json.loads(run("set_policy", "default", "--file", str(path)).strip().splitlines()[-1])
    path.write_text(json.dumps({**POLICY, "default": "allow"}))
    second = json.loads(run("set_policy", "default", "--file", str(path)).strip().splitlines()[-1])

    assert first["policy"] == "default" and first["version"] == 1
    assert second["version"] == 2 and second["hash"] != first["hash"]
    assert Policy.objects.get(slug="default").versions.count() == 2


def test_set_policy_refuses_an_invalid_document_and_writes_nothing(db, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({**POLICY, "defualt": "allow"}))

    with pytest.raises(CommandError, match="defualt"):
        run("set_policy", "default", "--file", str(path), "--team", "fresh")

    assert not Team.objects.filter(slug="fresh").exists()
    assert not Policy.objects.exists()


def test_create_agent_prints_a_working_api_key_last(db, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    run("set_policy", "default", "--file", str(path))

    last = run("create_agent", "helper", "--policy", "default").strip().splitlines()[-1]

    printed = json.loads(last)
    assert printed["apiKey"].startswith("pg_")
    api_key = api_key_authenticate(printed["apiKey"])
    assert api_key.agent == Agent.objects.get(pk=printed["agent"])
    assert printed["apiKey"] not in ApiKey.objects.get().secret_hash


def test_create_agent_needs_an_existing_policy(db):
    run("create_member", "x@acme.dev")

    with pytest.raises(CommandError, match="set_policy"):
        run("create_agent", "helper", "--policy", "missing")
