"""Forms that need less typing: the team is preselected when the admin manages exactly one,
and a duplicate member e-mail says whose it is, with a link, not a constraint's name."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from members.models import Member
from tests.admin.conftest import TEAM_ADMINS, logged_in, make_staff

ADD_FORMS = [
    "admin:members_member_add",
    "admin:teams_role_add",
    "admin:teams_group_add",
    "admin:members_agent_add",
    "admin:policies_policy_add",
]


def selected_team(page: str) -> str | None:
    select = re.search(r'<select name="team"[^>]*>(.*?)</select>', page, re.S)
    assert select is not None, "no team field"
    chosen = re.search(r'<option value="(\d+)"[^>]*selected', select.group(1))
    return chosen.group(1) if chosen else None


@pytest.mark.parametrize("form", ADD_FORMS)
def test_a_team_admin_of_one_team_finds_it_preselected(team_admin_client, team, form):
    page = team_admin_client.get(reverse(form)).content.decode()
    assert selected_team(page) == str(team.pk)


@pytest.mark.parametrize("form", ADD_FORMS)
def test_a_superuser_of_an_installation_with_one_team_finds_it_preselected(
    superuser_client, team, form
):
    page = superuser_client.get(reverse(form)).content.decode()
    assert selected_team(page) == str(team.pk)


@pytest.mark.parametrize("form", ["admin:members_member_add", "admin:policies_policy_add"])
def test_with_several_teams_nothing_is_preselected(superuser, team, other_team, form):
    page = logged_in(superuser).get(reverse(form)).content.decode()
    assert selected_team(page) is None
    admin_of_both = make_staff("bea", group=TEAM_ADMINS, teams=[team, other_team])
    page = logged_in(admin_of_both).get(reverse(form)).content.decode()
    assert selected_team(page) is None


def test_a_duplicate_member_email_names_the_team_and_links_the_member(
    team_admin_client, team, member
):
    response = team_admin_client.post(
        reverse("admin:members_member_add"),
        {"team": team.pk, "email": "Alice@Acme.dev ", "name": "Alice again", "is_active": "on"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "alice@acme.dev is already a member of Acme." in page
    assert f'href="{reverse("admin:members_member_change", args=[member.pk])}"' in page
    assert "unique_member_email_per_team" not in page
    assert "Constraint" not in page
    assert Member.objects.filter(team=team).count() == 1


def test_saving_a_member_unchanged_is_not_a_duplicate(team_admin_client, team, member):
    response = team_admin_client.post(
        reverse("admin:members_member_change", args=[member.pk]),
        {"team": team.pk, "email": member.email, "name": "Alice A.", "is_active": "on"},
    )
    assert response.status_code == 302
    member.refresh_from_db()
    assert member.name == "Alice A."
