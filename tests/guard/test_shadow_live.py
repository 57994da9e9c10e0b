"""A policy version tried in shadow, end to end: published beside the active one, signed
into the token, decided under by a real guard against the live control plane, and the
differences recorded by the server; nothing enforced by it."""

from __future__ import annotations

import copy

import pytest

from guard.agent.batching import event_json
from guard.agent.session import CallDecision
from guard.agent.shadow import ShadowDecider
from guard.claims import IntentClaims
from guard.decisions import Decision
from guard.events import validate_event_batch
from plans.models import ShadowDifference
from policies.services import policy_shadow_publish
from tests.conftest import POLICY, plan_document
from tests.plans.helpers import claims_of

REPO = {"repo": "acme/public-app"}

#: the active policy, plus a deny of github_get_issue: stricter than the active one
STRICTER = copy.deepcopy(POLICY)
STRICTER["rules"].insert(
    0, {"effect": "deny", "tools": ["github_get_issue"], "description": "no single issues"}
)


@pytest.fixture
def shadow(agent, policy_version):
    return policy_shadow_publish(policy=policy_version.policy, document=STRICTER, created_by="test")


def test_a_call_the_shadow_would_block_is_allowed_and_recorded_as_shadow_blocked(
    live_guard, shadow
):
    guard = live_guard()
    plan = guard.declare(plan_document())
    # The declaration: the shadow would refuse its second step; the active version admits.
    declared = ShadowDifference.objects.get(request="declaration")
    assert (declared.kind, declared.plan_id, declared.step) == ("shadow_refused", plan.plan_id, 1)
    assert declared.rule == {"index": 0, "description": "no single issues (rules[0])"}
    assert declared.shadow_version == shadow

    listed = guard.check("github_list_issues", REPO)
    single = guard.check("github_get_issue", REPO)
    assert (listed.code, single.code) == (Decision.ALLOWED, Decision.ALLOWED)  # not enforced
    assert guard.flush(10)

    (blocked,) = ShadowDifference.objects.filter(request="call")
    assert (blocked.kind, blocked.tool, blocked.step) == ("shadow_blocked", "github_get_issue", 1)
    assert (blocked.code, blocked.shadow_code) == ("allowed", "policy_denied")
    assert blocked.rule["index"] == 0
    assert blocked.shadow_version == shadow
    assert blocked.plan_id == plan.plan_id


def test_without_a_shadow_nothing_is_compared_or_recorded(live_guard, policy_version):
    guard = live_guard()
    guard.declare(plan_document())
    assert guard.check("github_get_issue", REPO).code == Decision.ALLOWED
    assert guard.flush(10)
    assert not ShadowDifference.objects.exists()


def test_the_reported_event_carries_the_shadows_answer_and_validates(shadow, agent):
    """The event the reporter builds, as the control plane validates it."""
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201
    claims = IntentClaims.from_payload(claims_of(response.json()["token"]))
    assert claims.shadow is not None and claims.shadow.polv == shadow.number
    decider = ShadowDecider(claims.shadow, role=claims.role, groups=claims.groups)
    allowed = CallDecision(Decision.ALLOWED, "ok", step=1, rule=0, rule_description="r")
    item = (0, "p", 1.0, "github_get_issue", allowed, REPO, False, 1, decider)
    event = event_json(item)
    assert event["shadow"] == {
        "decision": "policy_denied",
        "policyVersion": shadow.number,
        "rule": {"index": 0, "description": "no single issues (rules[0])"},
    }
    batch = validate_event_batch({"events": [event]}, steps=2)
    assert batch.events[0].shadow is not None
    same = event_json((0, "p", 1.0, "github_list_issues", allowed, REPO, False, 1, decider))
    assert "shadow" not in same
