"""Policies naming roles and groups: publishing warns about names the team does not have
(the service function every door calls, and `manage.py set_policy`), and the rules of the
active versions that name a role or group are found for its admin page."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from guard.errors import FieldError
from members.services import member_upsert
from policies.models import Policy, PolicyVersion
from policies.references import policy_reference_warnings, policy_rules_naming
from policies.services import policy_set
from teams.models import Group, Role

DEPLOY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["github_*"]},
        {"effect": "allow", "tools": ["read_*"], "groups": ["platform"]},
        {
            "name": "deploys",
            "effect": "allow",
            "tools": ["deploy"],
            "roles": ["engineer", "sre"],
            "groups": ["oncall"],
        },
    ],
}


@pytest.fixture
def engineer(member):
    """alice: role engineer, group platform. Neither sre nor oncall exists in the team."""
    return member


def test_names_the_team_does_not_have_are_warned_about_at_their_paths(team, engineer):
    warnings = policy_reference_warnings(team=team, document=DEPLOY)

    assert warnings == [
        FieldError("rules[2].roles[1]", 'role "sre" does not exist in team default'),
        FieldError("rules[2].groups[0]", 'group "oncall" does not exist in team default'),
    ]


def test_no_warning_when_every_name_exists(team, engineer, sre_member):
    assert policy_reference_warnings(team=team, document=DEPLOY) == []


def test_no_query_for_a_policy_that_names_nobody(team, django_assert_num_queries):
    with django_assert_num_queries(0):
        warnings = policy_reference_warnings(
            team=team, document={"version": 1, "default": "allow", "rules": []}
        )
    assert warnings == []


def test_a_name_differing_only_in_case_is_warned_about_with_the_likely_one(team):
    Role.objects.create(team=team, name="SRE")
    document = {
        "version": 1,
        "default": "deny",
        "rules": [{"effect": "allow", "tools": ["deploy"], "roles": ["sre"]}],
    }

    [warning] = policy_reference_warnings(team=team, document=document)

    assert warning.path == "rules[0].roles[0]"
    assert 'did you mean "SRE"?' in warning.detail


def test_another_teams_roles_and_groups_do_not_count(team, other_team, engineer):
    member_upsert(team=other_team, email="sam@globex.test", role="sre", groups=["oncall"])

    paths = [warning.path for warning in policy_reference_warnings(team=team, document=DEPLOY)]

    assert paths == ["rules[2].roles[1]", "rules[2].groups[0]"]


# --- manage.py set_policy -----------------------------------------------------------------------


def set_policy(tmp_path, *extra: str) -> tuple[str, str]:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(DEPLOY))
    out, err = StringIO(), StringIO()
    call_command("set_policy", "deploys", "--file", str(path), *extra, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_set_policy_publishes_and_prints_the_warnings_to_stderr(team, engineer, tmp_path):
    out, err = set_policy(tmp_path)

    assert json.loads(out)["version"] == 1
    assert err.splitlines() == [
        'warning: rules[2].roles[1]: role "sre" does not exist in team default',
        'warning: rules[2].groups[0]: group "oncall" does not exist in team default',
    ]
    assert PolicyVersion.objects.filter(policy__slug="deploys").count() == 1


def test_set_policy_prints_no_warning_when_the_names_exist(team, engineer, sre_member, tmp_path):
    _, err = set_policy(tmp_path, "--strict")

    assert err == ""
    assert PolicyVersion.objects.filter(policy__slug="deploys").count() == 1


def test_set_policy_strict_refuses_and_publishes_nothing(team, engineer, tmp_path):
    with pytest.raises(CommandError, match="--strict: 2 name"):
        set_policy(tmp_path, "--strict")

    assert not Policy.objects.filter(slug="deploys").exists()


# --- the rules that name a role or group ---------------------------------------------------------


def test_the_active_versions_rules_naming_a_role_are_found(team, other_team):
    policy_set(team=team, slug="ops", document=DEPLOY)
    # Only the active version counts: v1 of "retired" named sre, v2 does not any more.
    policy_set(team=team, slug="retired", document=DEPLOY)
    policy_set(team=team, slug="retired", document={**DEPLOY, "rules": DEPLOY["rules"][:2]})
    policy_set(team=other_team, slug="theirs", document=DEPLOY)

    [reference] = policy_rules_naming(team=team, field="roles", names=["sre"])

    assert (reference.policy_slug, reference.version_number, reference.path) == (
        "ops",
        1,
        "rules[2]",
    )
    assert reference.rule_label == "deploys"
    assert reference.name == "sre"
    assert policy_rules_naming(team=team, field="groups", names=["platform"])[0].path == "rules[1]"
    assert policy_rules_naming(team=team, field="roles", names=["platform"]) == []


def test_a_groups_rules_are_not_a_roles(team):
    Group.objects.create(team=team, name="sre")
    policy_set(team=team, slug="ops", document=DEPLOY)

    assert policy_rules_naming(team=team, field="groups", names=["sre"]) == []
