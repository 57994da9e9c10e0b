"""The admin's revoke and disable pages say when running agents stop, from the team's
revocation bound (the status feed the guards poll: docs/decisions/0032)."""

from __future__ import annotations

from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.urls import reverse

from plans.models import PlanToken
from teams.models import Team


def set_bound(team: Team, seconds: int) -> None:
    Team.objects.filter(pk=team.pk).update(revocation_bound_seconds=seconds)


def test_the_plan_revoke_page_says_within_the_teams_bound(team_admin_client, team, plan):
    set_bound(team, 9)

    page = team_admin_client.get(reverse("admin:plans_plan_revoke_plans", args=[plan.pk]))

    assert page.status_code == 200
    assert "running agents stop within 9 s" in page.content.decode()


def test_the_api_key_revoke_page_says_within_the_default_bound(team_admin_client, agent):
    api_key = agent.agent.api_keys.get()

    page = team_admin_client.get(reverse("admin:members_apikey_revoke_api_keys", args=[api_key.pk]))

    assert page.status_code == 200
    assert "running agents stop within 15 s" in page.content.decode()


def test_the_signing_key_revoke_page_says_within_the_longest_bound(
    key_operator_client, team, other_team, plan
):
    set_bound(team, 20)
    set_bound(other_team, 45)
    kid = PlanToken.objects.get(plan=plan).kid

    page = key_operator_client.get(
        reverse("admin:plans_signingkey_revoke_signing_keys", args=[quote(kid)])
    )

    assert page.status_code == 200
    assert "running agents stop within 45 s" in page.content.decode()


def test_disabling_members_says_when_their_agents_stop(team_admin_client, team, member):
    set_bound(team, 30)

    response = team_admin_client.post(
        reverse("admin:members_member_changelist"),
        {"action": "disable_members", "_selected_action": [member.pk], "index": 0},
    )

    assert response.status_code == 302
    shown = [str(message) for message in get_messages(response.wsgi_request)]
    assert any("running agents stop within 30 s" in text for text in shown), shown


def test_the_agent_page_says_when_unticking_active_stops_it(team_admin_client, team, agent):
    set_bound(team, 12)

    page = team_admin_client.get(reverse("admin:members_agent_change", args=[agent.agent.pk]))

    assert page.status_code == 200
    assert "running agents stop within 12 s" in page.content.decode()


def test_a_team_admin_sets_the_bound_within_1_to_60_seconds(team_admin_client, team):
    url = reverse("admin:teams_team_change", args=[team.pk])
    form = {"name": team.name, "log_call_arguments": "", "revocation_bound_seconds": "61"}

    refused = team_admin_client.post(url, form)
    team.refresh_from_db()
    bound_after_refusal = team.revocation_bound_seconds
    accepted = team_admin_client.post(url, {**form, "revocation_bound_seconds": "5"})
    team.refresh_from_db()

    assert refused.status_code == 200
    assert "revocation_bound_seconds" in refused.context["adminform"].form.errors
    assert bound_after_refusal == 15
    assert accepted.status_code == 302
    assert team.revocation_bound_seconds == 5
