"""Who may do what in the admin, enforced by the server: auditors only view, audit records
are read-only for everyone, and staff see only their own teams."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group
from django.urls import reverse

from members.models import Member
from members.services import member_upsert
from plans.models import Plan, PlanToken, SigningKey
from policies.models import PolicyVersion
from tests.conftest import POLICY

from .conftest import AUDITORS, TEAM_ADMINS


def change_url(obj) -> str:
    return reverse(
        f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[quote(obj.pk)]
    )


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def action(client, model, name: str, *objects, confirm: bool = True):
    data = {"action": name, "_selected_action": [obj.pk for obj in objects]}
    if confirm:
        data["post"] = "yes"
    return client.post(changelist_url(model), data)


# --- the groups ----------------------------------------------------------------------------


def test_auditors_hold_only_view_permissions(db):
    codenames = set(Group.objects.get(name=AUDITORS).permissions.values_list("codename", flat=True))
    assert codenames
    assert all(codename.startswith("view_") for codename in codenames)
    assert {"view_plan", "view_plantoken", "view_policyversion", "view_signingkey"} <= codenames


def test_team_admins_manage_the_team_but_not_users(db):
    codenames = set(
        Group.objects.get(name=TEAM_ADMINS).permissions.values_list("codename", flat=True)
    )
    assert {"add_member", "change_member", "add_agent", "change_policy", "add_apikey"} <= codenames
    assert not {"add_user", "change_user", "add_team", "delete_policy"} & codenames
    assert "change_policyversion" not in codenames


# --- auditors: view, never change ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "admin:members_member_add",
        "admin:members_agent_add",
        "admin:teams_role_add",
        "admin:policies_policy_add",
        "admin:plans_plan_add",
    ],
)
def test_auditor_gets_403_on_add_pages(auditor_client, name):
    assert auditor_client.get(reverse(name)).status_code == 403
    assert auditor_client.post(reverse(name), {}).status_code == 403


def test_auditor_browses_plans_and_opens_one_read_only(auditor_client, plan):
    listing = auditor_client.get(changelist_url(Plan))
    assert listing.status_code == 200
    assert plan.goal in listing.content.decode()

    page = auditor_client.get(change_url(plan))
    assert page.status_code == 200
    html = page.content.decode()
    assert plan.hash in html
    assert 'name="_save"' not in html
    assert "Revoke plan" not in html


def test_auditor_posting_a_change_gets_403_and_nothing_changes(auditor_client, member, plan):
    response = auditor_client.post(
        change_url(member),
        {"team": member.team_id, "email": "mallory@acme.dev", "name": "M", "is_active": "on"},
    )
    assert response.status_code == 403
    member.refresh_from_db()
    assert member.email == "alice@acme.dev"
    assert auditor_client.post(change_url(plan), {"goal": "x"}).status_code == 403


def test_auditor_posting_actions_gets_403(auditor_client, member, plan):
    assert action(auditor_client, Plan, "revoke_plans", plan).status_code == 403
    assert action(auditor_client, Member, "disable_members", member).status_code == 403
    assert action(auditor_client, Member, "delete_selected", member).status_code == 403
    plan.refresh_from_db()
    member.refresh_from_db()
    assert plan.status == Plan.Status.ACTIVE
    assert member.is_active


def test_auditor_cannot_reach_the_action_pages(auditor_client, agent, plan):
    assert (
        auditor_client.get(reverse("admin:plans_plan_revoke_plans", args=[plan.pk])).status_code
        == 403
    )
    assert auditor_client.get(reverse("admin:plans_signingkey_rotate")).status_code == 403
    assert auditor_client.post(reverse("admin:plans_signingkey_rotate")).status_code == 403
    create_key = reverse("admin:members_agent_create_api_key", args=[agent.agent.pk])
    assert auditor_client.get(create_key).status_code == 403
    assert auditor_client.post(create_key, {"name": "x"}).status_code == 403


def test_auditor_does_not_see_action_buttons(auditor_client, plan):
    html = auditor_client.get(changelist_url(Plan)).content.decode()
    assert "revoke_plans" not in html
    html = auditor_client.get(changelist_url(SigningKey)).content.decode()
    assert "Rotate now" not in html


# --- audit records are read-only for everyone ----------------------------------------------


def test_audit_records_are_read_only_even_for_a_superuser(superuser_client, plan):
    version = plan.policy_version
    token = PlanToken.objects.get(plan=plan)
    key = SigningKey.objects.get(kid=token.kid)
    for obj in (plan, version, token, key):
        url = change_url(obj)
        page = superuser_client.get(url)
        assert page.status_code == 200, url
        assert 'name="_save"' not in page.content.decode()
        assert superuser_client.post(url, {}).status_code == 403, url
        delete_url = url.replace("/change/", "/delete/")
        assert superuser_client.post(delete_url, {"post": "yes"}).status_code == 403, url
    for model in (Plan, PolicyVersion, PlanToken, SigningKey):
        add_url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_add")
        assert superuser_client.get(add_url).status_code == 403
    assert PolicyVersion.objects.filter(pk=version.pk, document=version.document).exists()


def test_superuser_posting_delete_selected_on_audit_records_gets_403(superuser_client, plan):
    assert action(superuser_client, Plan, "delete_selected", plan).status_code == 403
    assert Plan.objects.filter(pk=plan.pk).exists()


# --- team scoping --------------------------------------------------------------------------


@pytest.fixture
def two_teams(member, outsider, plan, other_plan):
    return member, outsider


def test_team_admin_sees_only_their_teams_rows(team_admin_client, two_teams, plan, other_plan):
    member, outsider = two_teams
    members_page = team_admin_client.get(changelist_url(Member)).content.decode()
    assert member.email in members_page
    assert outsider.email not in members_page
    plans_page = team_admin_client.get(changelist_url(Plan)).content.decode()
    assert plan.pk in plans_page
    assert other_plan.pk not in plans_page
    tokens_page = team_admin_client.get(changelist_url(PlanToken)).content.decode()
    assert plan.pk in tokens_page
    assert other_plan.pk not in tokens_page


def test_team_admin_cannot_open_or_act_on_another_teams_rows(
    team_admin_client, two_teams, other_plan
):
    _, outsider = two_teams
    for obj in (outsider, other_plan, other_plan.policy_version, other_plan.agent):
        response = team_admin_client.get(change_url(obj))
        # Django's answer for a row outside the queryset: back to the index, "doesn't exist".
        assert response.status_code == 302, obj
        assert response["Location"] == reverse("admin:index")
    assert (
        team_admin_client.get(
            reverse("admin:plans_plan_revoke_plans", args=[other_plan.pk])
        ).status_code
        == 404
    )
    action(team_admin_client, Plan, "revoke_plans", other_plan)
    action(team_admin_client, Member, "disable_members", outsider)
    other_plan.refresh_from_db()
    outsider.refresh_from_db()
    assert other_plan.status == Plan.Status.ACTIVE
    assert outsider.is_active


def test_team_admin_choices_are_their_teams_only(
    team_admin_client, team, other_team, member, outsider
):
    member_upsert(
        team=other_team, email="x@globex.test", role="globex-role", groups=["globex-group"]
    )
    page = team_admin_client.get(reverse("admin:members_member_add")).content.decode()
    assert team.name in page
    assert other_team.name not in page
    autocomplete = team_admin_client.get(
        reverse("admin:autocomplete"),
        {"app_label": "members", "model_name": "member", "field_name": "role", "term": ""},
    ).json()
    names = {result["text"] for result in autocomplete["results"]}
    assert "engineer" in names
    assert "globex-role" not in names


def test_team_admin_cannot_add_a_member_to_another_team(team_admin_client, other_team):
    response = team_admin_client.post(
        reverse("admin:members_member_add"),
        {"team": other_team.pk, "email": "eve@globex.test", "name": "Eve", "is_active": "on"},
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Member.objects.filter(email="eve@globex.test").exists()


def test_a_role_from_another_team_is_refused_even_for_a_superuser(
    superuser_client, team, other_team, outsider
):
    member_upsert(team=other_team, email="y@globex.test", role="globex-role")
    foreign_role = other_team.roles.get(name="globex-role")
    response = superuser_client.post(
        reverse("admin:members_member_add"),
        {"team": team.pk, "email": "bob@acme.dev", "role": foreign_role.pk, "is_active": "on"},
    )
    assert response.status_code == 200
    assert "Not in team default" in response.content.decode()
    assert not Member.objects.filter(email="bob@acme.dev").exists()


def test_superuser_sees_every_team(superuser_client, two_teams, plan, other_plan):
    member, outsider = two_teams
    page = superuser_client.get(changelist_url(Member)).content.decode()
    assert member.email in page and outsider.email in page
    page = superuser_client.get(changelist_url(Plan)).content.decode()
    assert plan.pk in page and other_plan.pk in page


def test_staff_in_no_team_see_nothing(db, plan):
    from .conftest import logged_in, make_staff

    client = logged_in(make_staff("nobody", group=TEAM_ADMINS, teams=[]))
    page = client.get(changelist_url(Plan)).content.decode()
    assert plan.pk not in page


def test_the_policy_choices_of_an_agent_are_the_teams_own(team_admin_client, team, other_agent):
    from policies.services import policy_set

    policy_set(team=team, slug="strict", document=POLICY)
    page = team_admin_client.get(reverse("admin:members_agent_add")).content.decode()
    assert team.name in page
    autocomplete = team_admin_client.get(
        reverse("admin:autocomplete"),
        {"app_label": "members", "model_name": "agent", "field_name": "policy", "term": ""},
    ).json()
    ids = {int(result["id"]) for result in autocomplete["results"]}
    assert ids == set(team.policies.values_list("pk", flat=True))
    assert other_agent.agent.policy_id not in ids
