"""Issuance and refresh read one relation (guard.relation) between a step's pinned argument
and the constraint of each rule admitting its tool: a step no admitting rule lets any call
of through is refused (`policy_denied`, at the argument's path); one some of whose calls
will be refused is issued with a warning at that path. A deny rule with `args` reads the same
relation: a step pinned inside it is refused, one it refuses in part is warned of."""

from __future__ import annotations

from audit.models import AuditRecord
from guard.policy_evaluation import (
    POLICY_ARGUMENT_OVERLAPS,
    POLICY_ARGUMENT_UNDECIDABLE,
    POLICY_DENY_OVERLAPS,
)
from kernel.problems import Code
from plans.models import Plan, PlanToken
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

NARROWED = {
    **POLICY,
    "rules": [
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/public-*"}}},
        *POLICY["rules"][1:],
    ],
}
APP = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/app"}}}


def declare(persona, *steps: dict):
    return persona.client.post(
        "/v1/plans", {"plan": plan_document(steps=list(steps))}, format="json"
    )


def refresh(persona, issued: dict):
    return persona.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )


def test_a_step_pinned_outside_every_admitting_rule_is_refused_at_its_path(agent, team):
    policy_set(team=team, slug="default", document=NARROWED)
    plans, tokens = Plan.objects.count(), PlanToken.objects.count()

    response = declare(agent, {"tool": "send_email"}, APP)

    assert response.status_code == 403, response.content
    body = response.json()
    assert body["code"] == Code.POLICY_DENIED
    assert [error["path"] for error in body["errors"]] == ["plan.steps[1].args.repo"]
    detail = body["errors"][0]["detail"]
    assert 'repo {"eq":"acme/app"}' in detail
    assert 'rules[0] requires repo {"glob":"acme/public-*"}' in detail
    # Nothing of the plan is written: no plan, no token.
    assert (Plan.objects.count(), PlanToken.objects.count()) == (plans, tokens)


def test_the_refusal_is_in_the_trail_with_the_rule(agent, team):
    policy_set(team=team, slug="default", document=NARROWED)

    response = declare(agent, APP)

    assert response.status_code == 403, response.content
    record = AuditRecord.objects.filter(kind="plan_refused").get()
    assert (record.code, record.rule["index"]) == (Code.POLICY_DENIED, 0)


def test_another_rule_admitting_the_step_keeps_it_issued(agent, team):
    policy_set(
        team=team,
        slug="default",
        document={
            **NARROWED,
            "rules": [
                *NARROWED["rules"],
                {
                    "effect": "allow",
                    "tools": ["github_list_*"],
                    "args": {"repo": {"eq": "acme/app"}},
                },
            ],
        },
    )

    response = declare(agent, APP)

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_a_default_that_allows_admits_what_no_rule_does(agent, team):
    policy_set(team=team, slug="default", document={**NARROWED, "default": "allow"})

    response = declare(agent, APP)

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_a_step_some_of_whose_calls_the_rule_refuses_is_issued_with_a_warning(agent, team):
    policy_set(team=team, slug="default", document=NARROWED)

    response = declare(agent, {"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}})

    assert response.status_code == 201, response.content
    [warning] = response.json()["warnings"]
    assert (warning["path"], warning["code"], warning["rule"]) == (
        "plan.steps[0].args.repo",
        POLICY_ARGUMENT_OVERLAPS,
        0,
    )
    assert "some calls will be refused" in warning["detail"]
    assert Plan.objects.filter(pk=response.json()["id"], status=Plan.Status.ACTIVE).exists()


def test_a_relation_that_cannot_be_decided_is_a_warning_not_a_refusal(agent, team):
    policy_set(team=team, slug="default", document=NARROWED)

    # A case-insensitive regex is not modelled: whether acme/public-* admits it is not decided.
    response = declare(
        agent, {"tool": "github_list_issues", "args": {"repo": {"regex": "(?i)acme/[a-z]+"}}}
    )

    assert response.status_code == 201, response.content
    [warning] = response.json()["warnings"]
    assert (warning["path"], warning["code"]) == (
        "plan.steps[0].args.repo",
        POLICY_ARGUMENT_UNDECIDABLE,
    )


def test_a_refresh_after_the_rule_narrowed_is_refused_and_signs_nothing(agent, team):
    issued = declare(agent, APP)
    assert issued.status_code == 201, issued.content
    assert issued.json()["warnings"] == []
    policy_set(team=team, slug="default", document=NARROWED)
    tokens = PlanToken.objects.filter(plan_id=issued.json()["id"]).count()

    response = refresh(agent, issued.json())

    assert response.status_code == 403, response.content
    assert response.json()["code"] == Code.POLICY_DENIED
    assert [error["path"] for error in response.json()["errors"]] == ["plan.steps[0].args.repo"]
    assert PlanToken.objects.filter(plan_id=issued.json()["id"]).count() == tokens


def test_a_refresh_warns_when_the_rule_now_admits_only_part(agent, team):
    step = {"tool": "github_list_issues", "args": {"repo": {"in": ["acme/app", "acme/public-web"]}}}
    issued = declare(agent, step)
    assert issued.status_code == 201, issued.content
    assert issued.json()["warnings"] == []
    policy_set(team=team, slug="default", document=NARROWED)

    response = refresh(agent, issued.json())

    assert response.status_code == 200, response.content
    assert [(w["path"], w["code"]) for w in response.json()["warnings"]] == [
        ("plan.steps[0].args.repo", POLICY_ARGUMENT_OVERLAPS)
    ]


# --- deny rules with args read the same relation (the fail-closed way, 0016) -----------------

SECRETS_DENIED = {
    **POLICY,
    "rules": [
        *POLICY["rules"],
        {
            "effect": "deny",
            "name": "no secrets",
            "tools": ["github_*"],
            "args": {"repo": {"glob": "acme/secret*"}},
        },
    ],
}
SECRET = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/secret-keys"}}}


def test_a_step_pinned_inside_a_deny_rule_is_refused_at_its_path(agent, team):
    policy_set(team=team, slug="default", document=SECRETS_DENIED)
    plans, tokens = Plan.objects.count(), PlanToken.objects.count()

    response = declare(agent, {"tool": "send_email"}, SECRET)

    assert response.status_code == 403, response.content
    body = response.json()
    assert body["code"] == Code.POLICY_DENIED
    assert [error["path"] for error in body["errors"]] == ["plan.steps[1].args.repo"]
    detail = body["errors"][0]["detail"]
    assert detail.startswith("step 2 (github_list_issues): ")
    assert 'deny rule "no secrets" forbids every call of this step' in detail
    assert 'repo {"eq":"acme/secret-keys"}' in detail
    assert 'repo {"glob":"acme/secret*"}' in detail
    assert detail.endswith("(rules[4])")
    # Nothing of the plan is written: no plan, no token.
    assert (Plan.objects.count(), PlanToken.objects.count()) == (plans, tokens)
    record = AuditRecord.objects.filter(kind="plan_refused").get()
    assert (record.code, record.rule["index"]) == (Code.POLICY_DENIED, 4)


def test_a_step_a_deny_rule_refuses_in_part_is_issued_with_a_warning(agent, team):
    policy_set(team=team, slug="default", document=SECRETS_DENIED)

    response = declare(agent, {"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}})

    assert response.status_code == 201, response.content
    [warning] = response.json()["warnings"]
    assert (warning["path"], warning["code"], warning["rule"]) == (
        "plan.steps[0].args.repo",
        POLICY_DENY_OVERLAPS,
        4,
    )
    assert "some calls will be refused" in warning["detail"]
    plan = Plan.objects.get(pk=response.json()["id"])
    assert plan.status == Plan.Status.ACTIVE
    assert PlanToken.objects.filter(plan=plan).count() == 1


def test_a_step_pinned_outside_the_deny_rule_is_issued_without_a_warning(agent, team):
    policy_set(team=team, slug="default", document=SECRETS_DENIED)

    response = declare(agent, APP)

    assert response.status_code == 201, response.content
    assert response.json()["warnings"] == []


def test_a_refresh_after_a_deny_rule_is_added_is_refused_and_signs_nothing(agent, team):
    issued = declare(agent, SECRET)
    assert issued.status_code == 201, issued.content
    assert issued.json()["warnings"] == []
    policy_set(team=team, slug="default", document=SECRETS_DENIED)
    tokens = PlanToken.objects.filter(plan_id=issued.json()["id"]).count()

    response = refresh(agent, issued.json())

    assert response.status_code == 403, response.content
    assert response.json()["code"] == Code.POLICY_DENIED
    assert [error["path"] for error in response.json()["errors"]] == ["plan.steps[0].args.repo"]
    assert PlanToken.objects.filter(plan_id=issued.json()["id"]).count() == tokens
