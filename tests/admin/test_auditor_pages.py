"""An auditor's pages: one timeline per plan, decisions that name their plan, policy version
and rule, lists that filter the way an auditor asks, and no control an auditor cannot use.
Every page sees its own team only and costs a bounded number of queries."""

from __future__ import annotations

from django.urls import reverse

from members.services import api_key_create


def page(client, url: str, query: dict | None = None) -> str:
    response = client.get(url, query or {})
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- no control an auditor cannot use -----------------------------------------------------


def test_an_auditor_sees_no_revoke_link_for_api_keys_and_an_admin_does(
    auditor_client, team_admin_client, agent
):
    url = reverse("admin:members_agent_change", args=[agent.agent.pk])
    revoke_url = reverse(
        "admin:members_apikey_revoke_api_keys", args=[agent.agent.api_keys.get().pk]
    )

    as_auditor = page(auditor_client, url)
    as_admin = page(team_admin_client, url)

    assert agent.agent.api_keys.get().prefix in as_auditor  # the key is listed, for both
    assert "Revoke…" not in as_auditor and revoke_url not in as_auditor
    assert "Revoke…" in as_admin and revoke_url in as_admin
    # and the link would only have answered 403
    assert auditor_client.get(revoke_url).status_code == 403


def test_an_auditor_sees_no_object_action_on_plan_or_key_pages(
    auditor_client, team_admin_client, plan, agent
):
    plan_url = reverse("admin:plans_plan_change", args=[plan.pk])
    key = agent.agent.api_keys.get()
    key_url = reverse("admin:members_apikey_change", args=[key.pk])

    assert "Revoke plan" not in page(auditor_client, plan_url)
    assert "Revoke this key" not in page(auditor_client, key_url)
    assert "Revoke plan" in page(team_admin_client, plan_url)
    assert "Revoke this key" in page(team_admin_client, key_url)


def test_a_revoked_key_has_no_revoke_link_even_for_an_admin(team_admin_client, agent):
    from members.services import api_key_revoke

    key, _ = api_key_create(agent=agent.agent)
    api_key_revoke(api_key=key)
    html = page(team_admin_client, reverse("admin:members_apikey_change", args=[key.pk]))
    assert "Revoke this key" not in html
