"""GET /v1/agent: who an API key is, for a gateway that checks its clients' keys."""

from __future__ import annotations

from members.models import Agent, ApiKey


def test_an_api_key_reads_its_own_agent(agent):
    response = agent.client.get("/v1/agent")

    assert response.status_code == 200
    assert response.json() == {
        "id": agent.agent.pk,
        "name": agent.agent.name,
        "team": agent.team.slug,
        "acceptsDelegations": False,
    }
    assert ApiKey.objects.get(agent=agent.agent).last_used_at is not None


def test_each_key_sees_its_own_agent_only(agent, other_agent):
    assert agent.client.get("/v1/agent").json()["id"] == agent.agent.pk
    assert other_agent.client.get("/v1/agent").json()["id"] == other_agent.agent.pk


def test_an_unknown_key_is_refused_as_problem_json(db, anonymous_client):
    anonymous_client.credentials(HTTP_AUTHORIZATION="Bearer pg_000000000000_nothing")

    response = anonymous_client.get("/v1/agent")

    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/problem+json")


def test_no_credential_is_refused(db, anonymous_client):
    assert anonymous_client.get("/v1/agent").status_code == 401


def test_a_disabled_agents_key_is_refused(agent):
    Agent.objects.filter(pk=agent.agent.pk).update(is_active=False)

    response = agent.client.get("/v1/agent")

    assert response.status_code == 403
    assert response.json()["code"] == "agent_disabled"
