"""The agent is active: one check, used by the API and the plan services."""

from __future__ import annotations

import pytest

from kernel.problems import Code, DomainError
from members.services import agent_require_active
from plans.models import Plan
from plans.services import plan_issue
from tests.conftest import plan_document


def test_an_active_agent_passes(agent):
    agent_require_active(agent=agent.agent)


def test_a_disabled_agent_is_refused_by_the_service_and_the_api_alike(agent):
    agent.agent.is_active = False
    agent.agent.save(update_fields=["is_active"])

    with pytest.raises(DomainError) as refused:
        agent_require_active(agent=agent.agent)
    assert refused.value.code == Code.AGENT_DISABLED
    with pytest.raises(DomainError) as issued:
        plan_issue(agent=agent.agent, document=plan_document())
    assert issued.value.code == Code.AGENT_DISABLED
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == Code.AGENT_DISABLED
    assert not Plan.objects.exists()
