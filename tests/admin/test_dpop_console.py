"""The console's side of tokens bound to their holder (docs/decisions/0069): a team admin
requires binding for the team; a plan's page says whether, and to which key, it is bound."""

from __future__ import annotations

from django.urls import reverse

from guard.dpop import DpopKey
from plans.models import Plan
from tests.conftest import plan_document


def test_a_team_admin_requires_token_binding(team_admin_client, team):
    url = reverse("admin:teams_team_change", args=[team.pk])

    page = team_admin_client.get(url).content.decode()
    saved = team_admin_client.post(
        url, {"name": team.name, "log_call_arguments": "", "require_token_binding": "on"}
    )
    team.refresh_from_db()

    assert 'name="require_token_binding"' in page
    assert saved.status_code == 302
    assert team.require_token_binding is True


def test_the_plan_page_names_the_key_a_plan_is_bound_to(auditor_client, agent):
    key = DpopKey.generate()
    proof = key.proof(htm="POST", htu="http://testserver/v1/plans", access_token=agent.api_key)
    bound = agent.client.post(
        "/v1/plans", {"plan": plan_document()}, format="json", HTTP_DPOP=proof
    ).json()["id"]
    unbound = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()["id"]

    def row(plan_id: str) -> str:
        page = auditor_client.get(reverse("admin:plans_plan_change", args=[plan_id]))
        text = page.content.decode()
        start = text.index('id="token-binding"')
        return text[start : text.index("</tr>", start)]

    assert Plan.objects.get(pk=bound).jkt == key.jkt
    assert key.jkt in row(bound) and "bound to the guard's key" in row(bound)
    assert "not bound" in row(unbound)
