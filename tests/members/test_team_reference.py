"""Every command's ``--team`` takes a team's name as well as its slug (teams.selectors):
the slug first, then the one team with that name in any case; a name several teams share
is refused with their slugs, and a name no team has never makes a team."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditToken
from members.models import Agent, Member
from members.services import team_get_or_create
from policies.models import Policy
from teams.models import Team
from tests.conftest import POLICY


def run(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


@pytest.fixture
def policy_file(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    return path


@pytest.fixture
def plan_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "goal": "g",
                "user": "olga@globex.test",
                "steps": [{"tool": "github_list_issues"}],
            }
        )
    )
    return path


def test_each_command_acts_on_the_team_its_name_names(
    team, other_team, outsider, policy_file, plan_file
):
    assert (team.name, other_team.slug, other_team.name) == ("Acme", "globex", "Globex")

    assert "in team globex" in run("create_member", "gus@globex.test", "--team", "globex ")
    assert "in team globex" in run("create_member", "gil@globex.test", "--team", "Globex")
    run("disable_member", "gil@globex.test", "--team", "GLOBEX")
    run("set_policy", "ops", "--file", str(policy_file), "--team", "Globex")
    agent = json.loads(
        run("create_agent", "bot", "--policy", "ops", "--team", "Globex").splitlines()[-1]
    )
    run("create_audit_token", "--team", "Globex", "--name", "SIEM")
    verified = run("verify_audit", "--team", "Globex")
    preview = run("preview_policy", "ops", "--file", str(policy_file), "--team", "Globex")
    simulated = run(
        "simulate_policy",
        "ops",
        "--member",
        "olga@globex.test",
        "--plan",
        str(plan_file),
        "--team",
        "Globex",
    )

    assert Team.objects.count() == 2
    assert sorted(Member.objects.filter(team=other_team).values_list("email", "is_active")) == [
        ("gil@globex.test", False),
        ("gus@globex.test", True),
        ("olga@globex.test", True),
    ]
    assert Policy.objects.get(slug="ops").team == other_team
    assert Agent.objects.get(pk=agent["agent"]).team == other_team
    assert AuditToken.objects.get().team == other_team
    assert "team globex:" in verified and "team default" not in verified
    assert json.loads(preview)["team"] == "globex"
    assert json.loads(simulated)["plan"]["decision"] == "allowed"


def test_a_slug_wins_over_another_teams_name(db):
    ops = team_get_or_create(slug="ops", name="Operations")
    team_get_or_create(slug="platform", name="ops")

    run("create_member", "ann@ops.test", "--team", "ops")

    assert Member.objects.get().team == ops


def test_a_name_several_teams_share_is_refused_with_their_slugs(db, policy_file):
    team_get_or_create(slug="ops-eu", name="Ops")
    team_get_or_create(slug="ops-us", name="ops")
    teams = Team.objects.count()

    for command in (
        ("create_member", "ann@ops.test"),
        ("set_policy", "ops", "--file", str(policy_file)),
        ("create_audit_token",),
        ("verify_audit",),
    ):
        with pytest.raises(CommandError, match=r"several teams are named 'Ops' \(ops-eu, ops-us\)"):
            run(*command, "--team", "Ops")

    assert Team.objects.count() == teams
    assert not Member.objects.exists() and not Policy.objects.exists()
    assert not AuditToken.objects.exists()


def test_a_name_no_team_has_makes_no_team(team, policy_file):
    for command in (
        ("create_member", "ann@ops.test"),
        ("set_policy", "ops", "--file", str(policy_file)),
    ):
        with pytest.raises(CommandError, match="no team 'Globex Corp'"):
            run(*command, "--team", "Globex Corp")
    for command in (("disable_member", "ann@ops.test"), ("create_audit_token",)):
        with pytest.raises(CommandError, match="no team has this slug or name"):
            run(*command, "--team", "Globex Corp")

    assert list(Team.objects.values_list("slug", flat=True)) == ["default"]

    # A new slug still makes its team, as before.
    run("create_member", "ann@ops.test", "--team", "ops")
    assert Member.objects.get().team.slug == "ops"
