"""Inviting a teammate: one form gives a console role in some teams; a team admin invites to
their own teams only; the invited person sets a password through a one-time link."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from audit.models import AuditRecord
from kernel.problems import Code
from members.invite import ConsoleRole, set_password_path, teammate_invite
from teams.models import Team
from tests.admin.conftest import AUDITORS, PASSWORD, TEAM_ADMINS, logged_in, make_staff

INVITE = "/admin/invite/"


def invite_form(team: Team, **overrides) -> dict:
    return {
        "email": "Nora@Acme.dev ",
        "name": "Nora",
        "console_role": ConsoleRole.AUDITOR,
        "teams": [team.pk],
        **overrides,
    }


def test_a_superuser_invites_an_auditor_who_sets_a_password_and_signs_in(
    superuser_client, team, other_team
):
    response = superuser_client.post(INVITE, invite_form(team))
    assert response.status_code == 200
    body = response.content.decode()
    user = User.objects.get(email="nora@acme.dev")
    assert user.username == "nora@acme.dev"
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert list(user.groups.values_list("name", flat=True)) == [AUDITORS]
    assert list(user.plangate_teams.all()) == [team]
    assert "user_permissions" not in body and "Can add" not in body
    link = re.search(r'id="set-password-link"[^>]*value="([^"]+)"', body)
    assert link is not None

    visitor = Client()
    form_page = visitor.get(link.group(1), follow=True)
    assert form_page.status_code == 200
    assert b"Choose a password" in form_page.content
    set_password = visitor.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert set_password.status_code == 302
    assert set_password["Location"] == reverse("admin:login")
    user.refresh_from_db()
    assert user.check_password(PASSWORD)
    # One-time: the link no longer works once the password is set.
    again = Client().get(link.group(1), follow=True)
    assert b"does not work any more" in again.content
    signed_in = Client()
    login = signed_in.post(
        reverse("admin:login"), {"username": "nora@acme.dev", "password": PASSWORD}
    )
    assert login.status_code == 302
    assert signed_in.get(reverse("admin:plans_plan_changelist")).status_code == 200

    recorded = AuditRecord.objects.filter(team=team, kind=AuditRecord.Kind.CHANGE).filter(
        details__object="user"
    )
    actions = {record.details["action"]: record for record in recorded}
    assert actions["invited"].actor == "root"
    assert actions["invited"].details["changes"]["console_role"] == [None, "auditor"]
    assert actions["password set"].actor == "nora@acme.dev"
    assert not AuditRecord.objects.filter(team=other_team, details__object="user").exists()


def test_the_invite_page_preselects_the_only_team_and_lists_no_permissions(team_admin_client, team):
    page = team_admin_client.get(INVITE).content.decode()
    assert re.search(rf'value="{team.pk}"[^>]*checked', page)
    assert "permission" not in page.lower()


def test_a_team_admin_invites_to_their_own_team_only(team_admin_client, team, other_team):
    refused = team_admin_client.post(INVITE, invite_form(other_team))
    assert refused.status_code == 200
    # Their form offers their own team only: another team is not a valid choice.
    assert "Select a valid choice" in refused.content.decode()
    assert not User.objects.filter(email="nora@acme.dev").exists()

    accepted = team_admin_client.post(INVITE, invite_form(team))
    assert accepted.status_code == 200
    assert list(User.objects.get(email="nora@acme.dev").plangate_teams.all()) == [team]


def test_the_service_refuses_a_team_admin_inviting_to_another_team(team_admin, other_team):
    with pytest.raises(Exception) as refused:
        teammate_invite(
            email="nora@acme.dev",
            name="",
            console_role=ConsoleRole.TEAM_ADMIN,
            teams=[other_team],
            invited_by=team_admin,
        )
    assert refused.value.code == Code.PERMISSION_DENIED
    assert refused.value.errors[0].path == "teams"
    assert not User.objects.filter(email="nora@acme.dev").exists()


def test_a_team_admin_cannot_change_someone_with_access_beyond_their_teams(
    team_admin_client, team, other_team
):
    otto = make_staff("otto", group=AUDITORS, teams=[other_team])
    otto.email = "otto@globex.test"
    otto.save()
    response = team_admin_client.post(
        INVITE, invite_form(team, email="otto@globex.test", console_role=ConsoleRole.TEAM_ADMIN)
    )
    assert "beyond the teams you manage" in response.content.decode()
    assert list(otto.groups.values_list("name", flat=True)) == [AUDITORS]
    assert list(otto.plangate_teams.all()) == [other_team]


def test_auditors_and_staff_of_no_team_cannot_invite(auditor_client, db):
    assert auditor_client.get(INVITE).status_code == 403
    nobody = make_staff("nobody", group=None, teams=[])
    assert logged_in(nobody).post(INVITE, {"email": "x@y.test"}).status_code == 403
    assert not User.objects.filter(email="x@y.test").exists()


def test_inviting_an_existing_person_changes_their_role_and_adds_teams(superuser, team, other_team):
    tessa = make_staff("tessa", group=AUDITORS, teams=[team])
    invitation = teammate_invite(
        email=tessa.email,
        name="Tessa",
        console_role=ConsoleRole.TEAM_ADMIN,
        teams=[other_team],
        invited_by=superuser,
    )
    assert not invitation.created and not invitation.needs_password
    assert list(tessa.groups.values_list("name", flat=True)) == [TEAM_ADMINS]
    assert set(tessa.plangate_teams.all()) == {team, other_team}
    # Recorded in both teams' logs: the role applies in each.
    for each in (team, other_team):
        record = AuditRecord.objects.get(team=each, details__object="user")
        assert record.details["changes"]["console_role"] == ["auditor", "team_admin"]


def test_a_link_for_another_user_or_a_forged_token_does_not_work(superuser, team):
    invitation = teammate_invite(
        email="nora@acme.dev", name="", console_role="auditor", teams=[team], invited_by=superuser
    )
    forged = set_password_path(invitation.user).rsplit("/", 2)[0] + "/set-password-forged/"
    page = Client().get(forged, follow=True)
    assert b"does not work any more" in page.content
