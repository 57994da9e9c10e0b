"""The body of a signed token, as the API answers it (plans.serializers.intent_token_body),
is exactly what IntentTokenSerializer, which declares and documents it, renders."""

from __future__ import annotations

import json

import pytest

from plans.serializers import IntentTokenSerializer, intent_token_body
from plans.services import plan_issue, plan_refresh
from tests.conftest import plan_document

ORG_ONLY = {"tool": "github_list_issues", "args": {"org": {"eq": "acme"}}}
REPO_PINNED = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}}


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([REPO_PINNED], id="no warning"),
        pytest.param([REPO_PINNED, ORG_ONLY, {"tool": "github_get_issue"}], id="two warnings"),
    ],
)
@pytest.mark.parametrize("log_call_arguments", [False, True])
def test_the_body_is_the_serializers_key_for_key(agent, team, steps, log_call_arguments):
    team.log_call_arguments = log_call_arguments
    team.save(update_fields=["log_call_arguments"])
    issued = plan_issue(agent=agent.agent, document=plan_document(steps=steps))
    refreshed = plan_refresh(agent=agent.agent, plan_id=issued.plan.id, token=issued.token)

    for answer in (issued, refreshed):
        body = intent_token_body(answer)
        rendered = IntentTokenSerializer(answer).data
        # Same keys in the same order, same values: the same JSON on the wire.
        assert json.dumps(body) == json.dumps(rendered)
    assert len(intent_token_body(issued)["warnings"]) == (2 if len(steps) > 1 else 0)
    assert intent_token_body(issued)["reportArguments"] is log_call_arguments


def test_the_api_answers_the_body(agent):
    response = agent.client.post(
        "/v1/plans", {"plan": plan_document(steps=[REPO_PINNED, ORG_ONLY])}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert body["expiresAt"].endswith("Z")
    assert [warning["path"] for warning in body["warnings"]] == ["plan.steps[1].args.repo"]
    assert set(body) == set(IntentTokenSerializer().fields)
