"""Members, roles and groups in the admin, and the history every change leaves."""

from __future__ import annotations

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.urls import reverse

from kernel.problems import Code
from members.models import Agent, Member
from members.services import member_upsert

CHANGELIST = "admin:members_member_changelist"


def test_adding_a_member_stores_the_email_lowercased_and_logs_it(
    team_admin_client, team_admin, team
):
    member_upsert(team=team, email="sam@acme.dev", role="sre", groups=["oncall"])
    role = team.roles.get(name="sre")
    group = team.groups.get(name="oncall")
    response = team_admin_client.post(
        reverse("admin:members_member_add"),
        {
            "team": team.pk,
            "email": "  Bob@Acme.DEV ",
            "name": "Bob",
            "role": role.pk,
            "groups": [group.pk],
            "is_active": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()
    bob = Member.objects.get(team=team, email="bob@acme.dev")
    assert bob.role == role and list(bob.groups.all()) == [group]
    assert LogEntry.objects.filter(
        user=team_admin, action_flag=ADDITION, object_id=str(bob.pk)
    ).exists()


def test_a_duplicate_email_in_another_case_is_refused(team_admin_client, team, member):
    response = team_admin_client.post(
        reverse("admin:members_member_add"),
        {"team": team.pk, "email": "ALICE@acme.dev", "is_active": "on"},
    )
    assert response.status_code == 200
    assert Member.objects.filter(team=team, email__iexact="alice@acme.dev").count() == 1


def test_bulk_disable_disables_and_logs_each_member(
    team_admin_client, team_admin, member, sre_member, agent
):
    response = team_admin_client.post(
        reverse(CHANGELIST),
        {"action": "disable_members", "_selected_action": [member.pk, sre_member.pk], "index": 0},
    )
    assert response.status_code == 302
    member.refresh_from_db()
    sre_member.refresh_from_db()
    assert not member.is_active and not sre_member.is_active
    for person in (member, sre_member):
        entry = LogEntry.objects.get(user=team_admin, object_id=str(person.pk))
        assert entry.action_flag == CHANGE
        assert "Disabled" in entry.get_change_message()
    # The API sees it at once.
    from tests.conftest import plan_document

    refused = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert refused.json()["code"] == Code.USER_DISABLED


def test_member_list_filters_and_searches(team_admin_client, member, sre_member, disabled_member):
    url = reverse(CHANGELIST)

    def emails(**query) -> set[str]:
        html = team_admin_client.get(url, query).content.decode()
        return {m.email for m in (member, sre_member, disabled_member) if m.email in html}

    assert emails(q="sam") == {sre_member.email}
    assert emails(q="Alice") == {member.email}
    assert emails(is_active__exact="0") == {disabled_member.email}
    assert emails(role__id__exact=str(sre_member.role_id)) == {sre_member.email}
    oncall = sre_member.groups.get(name="oncall")
    assert emails(groups__id__exact=str(oncall.pk)) == {sre_member.email}


def test_roles_and_groups_list_their_members(team_admin_client, member, sre_member):
    group = sre_member.groups.get(name="platform")
    html = team_admin_client.get(
        reverse("admin:teams_group_change", args=[group.pk])
    ).content.decode()
    assert member.email in html and sre_member.email in html
    html = team_admin_client.get(
        reverse("admin:teams_role_change", args=[sre_member.role_id])
    ).content.decode()
    assert sre_member.email in html and member.email not in html
    listing = team_admin_client.get(reverse("admin:teams_group_changelist")).content.decode()
    assert "platform" in listing


def test_editing_a_member_leaves_a_history_entry_naming_the_field(
    team_admin_client, team_admin, member
):
    response = team_admin_client.post(
        reverse("admin:members_member_change", args=[member.pk]),
        {
            "team": member.team_id,
            "email": member.email,
            "name": "Alice Liddell",
            "role": member.role_id,
            "groups": [group.pk for group in member.groups.all()],
            "is_active": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()
    entry = LogEntry.objects.get(user=team_admin, object_id=str(member.pk))
    assert "Name" in entry.get_change_message()
    history = team_admin_client.get(reverse("admin:members_member_history", args=[member.pk]))
    assert "Name" in history.content.decode()


def test_team_admins_cannot_hand_out_team_access(team_admin_client, team, team_admin):
    page = team_admin_client.get(reverse("admin:teams_team_change", args=[team.pk]))
    assert page.status_code == 200
    assert 'name="staff"' not in page.content.decode()
    assert team_admin_client.get(reverse("admin:teams_team_add")).status_code == 403
    assert team_admin_client.get(reverse("admin:auth_user_changelist")).status_code == 403


def test_an_agent_with_another_team_s_policy_is_refused_at_the_field(
    superuser_client, team, other_agent
):
    response = superuser_client.post(
        reverse("admin:members_agent_add"),
        {
            "team": team.pk,
            "name": "sneaky",
            "policy": other_agent.agent.policy_id,
            "is_active": "on",
        },
    )
    assert response.status_code == 200
    assert "Not in team default" in response.content.decode()
    assert not Agent.objects.filter(name="sneaky").exists()


def test_editing_an_agent_goes_through_the_service_and_logs_it(team_admin_client, agent):
    url = reverse("admin:members_agent_change", args=[agent.agent.pk])
    form = {
        "name": "renamed",
        "policy": agent.agent.policy_id,
        "api_keys-TOTAL_FORMS": "1",
        "api_keys-INITIAL_FORMS": "1",
        "api_keys-0-id": agent.agent.api_keys.get().pk,
        "api_keys-0-agent": agent.agent.pk,
    }

    response = team_admin_client.post(url, form)

    assert response.status_code == 302, response.content.decode()
    agent.agent.refresh_from_db()
    assert (agent.agent.name, agent.agent.is_active) == ("renamed", False)
    entry = LogEntry.objects.get(action_flag=CHANGE, object_id=agent.agent.pk)
    assert "Name" in entry.get_change_message()


def test_a_page_shown_again_keeps_nothing_the_form_wrote(team_admin_client, agent):
    # Without the inline's management form the page is shown again: the agent's form was
    # valid and its service wrote, and that write is undone.
    url = reverse("admin:members_agent_change", args=[agent.agent.pk])

    response = team_admin_client.post(
        url, {"name": "renamed", "policy": agent.agent.policy_id, "is_active": "on"}
    )

    assert response.status_code == 200
    agent.agent.refresh_from_db()
    assert agent.agent.name != "renamed"
