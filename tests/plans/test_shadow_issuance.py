"""Issuance and refresh decide under the version tried in shadow too, enforce only the
active one, and write down where the shadow answered otherwise (plans.shadow)."""

from __future__ import annotations

import copy

import pytest

from audit.models import AuditRecord
from guard.agent.shadow import ShadowDecider, ShadowPolicyInvalid
from guard.claims import IntentClaims, ShadowPolicy
from plans.models import Plan, ShadowDifference
from policies.services import policy_shadow_publish, policy_shadow_withdraw
from tests.conftest import POLICY, plan_document
from tests.plans.helpers import claims_of

#: the active policy without its deny rule: admits github_delete_*, which the active denies
LOOSER = copy.deepcopy(POLICY)
LOOSER["rules"] = [rule for rule in LOOSER["rules"] if rule.get("effect") != "deny"]
STRICTER = copy.deepcopy(POLICY)
STRICTER["rules"].insert(0, {"effect": "deny", "tools": ["github_get_issue"]})

DELETE_PLAN = plan_document(steps=[{"tool": "github_list_issues"}, {"tool": "github_delete_repo"}])


def declare(agent, document):
    return agent.client.post("/v1/plans", {"plan": document}, format="json")


def test_a_stricter_shadow_is_signed_into_the_token_and_enforces_nothing(agent, policy_version):
    shadow = policy_shadow_publish(policy=policy_version.policy, document=STRICTER)
    response = declare(agent, plan_document())
    assert response.status_code == 201, response.content
    claims = IntentClaims.from_payload(claims_of(response.json()["token"]))
    assert claims.shadow == ShadowPolicy(pol=shadow.document, polv=shadow.number, polh=shadow.hash)
    assert claims.polv == policy_version.number  # the active version is what is enforced
    (difference,) = ShadowDifference.objects.all()
    assert (difference.kind, difference.request, difference.step, difference.tool) == (
        "shadow_refused",
        "declaration",
        1,
        "github_get_issue",
    )
    assert difference.active_version == policy_version
    assert difference.plan_id == response.json()["id"]


def test_a_declaration_only_the_shadow_admits_is_refused_with_its_difference(agent, policy_version):
    policy_shadow_publish(policy=policy_version.policy, document=LOOSER)
    before = Plan.objects.count()
    response = declare(agent, DELETE_PLAN)
    assert response.status_code == 403
    assert response.json()["code"] == "policy_denied"
    assert Plan.objects.count() == before  # refused: no plan
    (difference,) = ShadowDifference.objects.all()
    assert (difference.kind, difference.request, difference.plan_id) == (
        "shadow_admitted",
        "declaration",
        "",
    )
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_REFUSED)
    assert record.details["shadow"]["code"] == "ok"


def test_a_refresh_under_a_shadow_records_its_difference(agent, policy_version):
    issued = declare(agent, plan_document()).json()
    assert not ShadowDifference.objects.exists()  # no shadow yet
    shadow = policy_shadow_publish(policy=policy_version.policy, document=STRICTER)
    response = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert IntentClaims.from_payload(claims_of(response.json()["token"])).shadow.polv == (
        shadow.number
    )
    (difference,) = ShadowDifference.objects.all()
    assert (difference.kind, difference.request) == ("shadow_refused", "refresh")
    policy_shadow_withdraw(policy=shadow.policy, by="test")
    again = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": response.json()["token"]}, format="json"
    )
    assert IntentClaims.from_payload(claims_of(again.json()["token"])).shadow is None
    assert ShadowDifference.objects.count() == 1


def test_identical_answers_write_nothing(agent, policy_version):
    same = copy.deepcopy(POLICY)
    same["rules"].append({"effect": "deny", "tools": ["never_used"]})
    policy_shadow_publish(policy=policy_version.policy, document=same)
    assert declare(agent, plan_document()).status_code == 201
    assert not ShadowDifference.objects.exists()


def test_the_guard_refuses_a_shadow_claim_that_is_not_its_hash():
    claim = ShadowPolicy(pol=copy.deepcopy(POLICY), polv=2, polh="0" * 64)
    with pytest.raises(ShadowPolicyInvalid):
        ShadowDecider(claim, role=None, groups=())
    with pytest.raises(ShadowPolicyInvalid):
        ShadowDecider(ShadowPolicy(pol={"rules": 3}, polv=2, polh="x"), role=None, groups=())


def test_intake_stores_the_guards_shadow_answers_as_differences(agent, policy_version):
    shadow = policy_shadow_publish(policy=policy_version.policy, document=LOOSER)
    plan = declare(agent, plan_document()).json()
    answer = {"decision": "allowed", "policyVersion": shadow.number}
    events = [
        {
            "at": "2026-12-05T09:00:00Z",
            "tool": "github_delete_repo",
            "decision": "policy_denied",
            "step": 0,
            "shadow": {**answer, "rule": {"index": 0, "description": "allow github_*"}},
        },
        # Names a version that is no shadow of this policy: the event is kept, no difference.
        {
            "at": "2026-12-05T09:00:01Z",
            "tool": "github_delete_repo",
            "decision": "policy_denied",
            "shadow": {"decision": "allowed", "policyVersion": 99},
        },
    ]
    response = agent.client.post(
        f"/v1/plans/{plan['id']}/events", {"events": events}, format="json"
    )
    assert response.status_code == 202, response.content
    (difference,) = ShadowDifference.objects.filter(request="call")
    assert (difference.kind, difference.code, difference.shadow_code) == (
        "shadow_allowed",
        "policy_denied",
        "allowed",
    )
    assert difference.rule == {"index": 0, "description": "allow github_*"}
    assert difference.shadow_version == shadow
    records = AuditRecord.objects.filter(kind=AuditRecord.Kind.DECISION).order_by("at")
    assert records[0].details["shadow"]["policyVersion"] == shadow.number
