"""A role's or group's page lists the active policy rules that name it; renaming or deleting
one that a rule names asks first, listing those rules; nothing is renamed before "Rename
anyway", and the confirmed rename is recorded in the activity log. Publishing a policy that
names roles or groups the team does not have warns (after saving, and on the impact
preview of an edit) but publishes."""

from __future__ import annotations

import copy
import json

import pytest
from django.urls import reverse

from policies.models import Policy
from policies.services import policy_set
from teams.models import Group, Role
from tests.admin.conftest import logged_in
from tests.audit.activity_helpers import about
from tests.conftest import POLICY

# tests.conftest.POLICY: rules[3] (deploy) names role "sre" and group "oncall".


@pytest.fixture
def sre(team, sre_member, policy_version) -> Role:
    return Role.objects.get(team=team, name="sre")


@pytest.fixture
def oncall(team, sre_member, policy_version) -> Group:
    return Group.objects.get(team=team, name="oncall")


def change_url(obj) -> str:
    return reverse(f"admin:teams_{obj._meta.model_name}_change", args=[obj.pk])


def test_a_roles_page_lists_the_policy_rules_naming_it_with_links(team_admin_client, sre):
    version = sre.team.policies.get(slug="default").versions.get()

    page = team_admin_client.get(change_url(sre)).content.decode()

    assert "Used by policies" in page
    assert "<code>rules[3]</code>" in page
    version_url = reverse("admin:policies_policyversion_change", args=[version.pk])
    assert f'href="{version_url}#rules-3"' in page
    assert reverse("admin:policies_policy_change", args=[version.policy_id]) in page


def test_a_groups_page_lists_its_rules_and_an_unnamed_group_says_so(
    team_admin_client, oncall, team
):
    assert "<code>rules[3]</code>" in team_admin_client.get(change_url(oncall)).content.decode()
    platform = Group.objects.get(team=team, name="platform")

    page = team_admin_client.get(change_url(platform)).content.decode()

    assert "No active policy version names group" in page
    assert "rules[" not in page


def test_another_teams_policies_naming_the_same_role_are_not_listed(
    team_admin_client, sre, other_team
):
    policy_set(team=other_team, slug="globex-deploys", document=POLICY)

    page = team_admin_client.get(change_url(sre)).content.decode()

    assert "globex-deploys" not in page
    assert "<code>rules[3]</code>" in page


def test_another_teams_admin_can_neither_open_nor_rename_the_role(other_team_admin, sre):
    client = logged_in(other_team_admin)

    opened = client.get(change_url(sre))
    renamed = rename(client, sre, "site-reliability", _rename_confirmed="1")

    assert opened.status_code == 302  # Django's admin: "no such object", back to the index
    assert b"rules[3]" not in opened.content
    assert renamed.status_code == 302
    sre.refresh_from_db()
    assert sre.name == "sre"


# --- rename ---------------------------------------------------------------------------------------


def rename(client, role: Role, name: str, **extra):
    return client.post(
        change_url(role), {"name": name, "description": role.description, "_save": "1", **extra}
    )


def test_renaming_a_named_role_asks_first_and_renames_nothing(team_admin_client, sre, team):
    response = rename(team_admin_client, sre, "site-reliability")

    assert response.status_code == 200
    page = response.content.decode()
    assert "Rename anyway" in page and "Cancel" in page
    assert "default (rules[3])" in page
    assert "members with this role (1) lose what those rules allowed" in page
    assert 'name="_rename_confirmed"' in page
    sre.refresh_from_db()
    assert sre.name == "sre"
    assert [record.details["action"] for record in about(team, "role")] == ["created"]


def test_rename_anyway_renames_and_records_the_change(team_admin_client, sre, team):
    response = rename(team_admin_client, sre, "site-reliability", _rename_confirmed="1")

    assert response.status_code == 302, response.content
    sre.refresh_from_db()
    assert sre.name == "site-reliability"
    record = about(team, "role")[-1]
    assert record.details["action"] == "updated"
    assert record.details["changes"] == {"name": ["sre", "site-reliability"]}


def test_the_confirmation_page_posts_back_what_was_submitted(team_admin_client, sre):
    page = rename(team_admin_client, sre, "site-reliability").content.decode()

    assert 'name="name" value="site-reliability"' in page
    assert 'name="_save" value="1"' in page
    assert 'name="_rename_confirmed" value="1"' in page


def test_a_change_that_keeps_the_name_is_saved_at_once(team_admin_client, sre):
    response = team_admin_client.post(
        change_url(sre), {"name": "sre", "description": "Site reliability", "_save": "1"}
    )

    assert response.status_code == 302
    sre.refresh_from_db()
    assert sre.description == "Site reliability"


def test_renaming_a_role_no_policy_names_is_saved_at_once(team_admin_client, member, team):
    engineer = Role.objects.get(team=team, name="engineer")

    response = rename(team_admin_client, engineer, "developer")

    assert response.status_code == 302
    engineer.refresh_from_db()
    assert engineer.name == "developer"


def test_an_invalid_rename_shows_the_form_errors_not_the_confirmation(team_admin_client, sre, team):
    Role.objects.create(team=team, name="taken")

    response = rename(team_admin_client, sre, "taken")

    assert response.status_code == 200
    assert b"Rename anyway" not in response.content
    assert b"errornote" in response.content
    assert "already has a role named “taken”".encode() in response.content
    sre.refresh_from_db()
    assert sre.name == "sre"


def test_renaming_a_named_group_asks_first(team_admin_client, oncall):
    response = rename(team_admin_client, oncall, "on-call")

    assert b"Rename anyway" in response.content
    assert b"members in this group" in response.content
    oncall.refresh_from_db()
    assert oncall.name == "oncall"


def test_an_auditor_cannot_rename_through_the_confirmation(auditor_client, sre):
    response = rename(auditor_client, sre, "site-reliability", _rename_confirmed="1")

    assert response.status_code == 403
    sre.refresh_from_db()
    assert sre.name == "sre"


# --- delete -------------------------------------------------------------------------------------


def test_deleting_a_named_role_lists_the_rules_on_the_confirmation(team_admin_client, sre):
    delete_url = reverse("admin:teams_role_delete", args=[sre.pk])

    page = team_admin_client.get(delete_url).content.decode()

    assert "Active policy rules name the role you are deleting" in page
    assert "<code>rules[3]</code>" in page
    assert 'name="post" value="yes"' in page
    assert Role.objects.filter(pk=sre.pk).exists()

    response = team_admin_client.post(delete_url, {"post": "yes"})

    assert response.status_code == 302
    assert not Role.objects.filter(pk=sre.pk).exists()


def test_deleting_an_unnamed_group_shows_no_rules(team_admin_client, member, team):
    platform = Group.objects.get(team=team, name="platform")

    page = team_admin_client.get(reverse("admin:teams_group_delete", args=[platform.pk]))

    assert page.status_code == 200
    assert b"Active policy rules name" not in page.content


def test_the_delete_selected_action_lists_the_rules(team_admin_client, sre, oncall, team):
    response = team_admin_client.post(
        reverse("admin:teams_group_changelist"),
        {"action": "delete_selected", "_selected_action": [oncall.pk]},
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "Active policy rules name the group you are deleting" in page
    assert "<code>rules[3]</code>" in page
    assert Group.objects.filter(pk=oncall.pk).exists()


# --- publishing a policy that names roles or groups the team does not have ----------------------


def add_policy(client, team, document):
    return client.post(
        reverse("admin:policies_policy_add"),
        {"team": team.pk, "slug": "deploys", "description": "", "document": json.dumps(document)},
        follow=True,
    )


def warning_messages(response) -> list[str]:
    return [
        str(message) for message in response.context["messages"] if message.level_tag == "warning"
    ]


def test_publishing_names_the_team_lacks_warns_after_saving(team_admin_client, team, member):
    response = add_policy(team_admin_client, team, POLICY)

    assert response.status_code == 200
    assert Policy.objects.get(team=team, slug="deploys").versions.count() == 1  # published
    assert warning_messages(response) == [
        'rules[3].roles[0]: role "sre" does not exist in team default: the rule matches no'
        " member until the team has it.",
        'rules[3].groups[0]: group "oncall" does not exist in team default: the rule matches'
        " no member until the team has it.",
    ]


def test_publishing_names_the_team_has_warns_nothing(team_admin_client, team, sre_member):
    response = add_policy(team_admin_client, team, POLICY)

    assert Policy.objects.filter(team=team, slug="deploys").exists()
    assert warning_messages(response) == []


def test_the_impact_preview_of_an_edit_lists_the_names_the_team_lacks(
    team_admin_client, team, sre_member, policy_version
):
    renamed = copy.deepcopy(POLICY)
    renamed["rules"][3]["roles"] = ["site-reliability"]

    preview = team_admin_client.post(
        reverse("admin:policies_policy_change", args=[policy_version.policy_id]),
        {
            "description": "",
            "document": json.dumps(renamed),
            "comment": "",
            "base_version": policy_version.number,
        },
    )

    page = preview.content.decode()
    assert 'id="reference-warnings"' in page
    assert "<code>rules[3].roles[0]</code>" in page
    assert "role &quot;site-reliability&quot; does not exist in team default" in page
    assert policy_version.policy.versions.count() == 1  # nothing published yet


def test_publishing_an_old_version_again_warns_about_names_gone_since(
    team_admin_client, team, sre_member, policy_version
):
    policy_set(team=team, slug="default", document={**POLICY, "rules": POLICY["rules"][:3]})
    Role.objects.filter(team=team, name="sre").update(name="site-reliability")

    response = team_admin_client.post(
        reverse("admin:policies_policyversion_changelist"),
        {
            "action": "publish_again",
            "_selected_action": [policy_version.pk],
            "post": "yes",
            "comment": "",
        },
        follow=True,
    )

    assert policy_version.policy.versions.count() == 3  # published all the same
    assert warning_messages(response) == [
        'rules[3].roles[0]: role "sre" does not exist in team default: the rule matches no'
        " member until the team has it."
    ]
