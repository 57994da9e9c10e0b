"""The impact preview reads the same relation as issuance and refresh (guard.relation): a
rule narrowed from `repo glob acme/*` to `acme/public-*` refuses, at its next refresh, a live
plan pinning `repo eq acme/app` (issue 20: the preview said "No live plan would be refused"),
and names a plan pinning `repo glob acme/*` as one some of whose calls will be refused. A
deny rule with `args` added over `acme/secret*` refuses, likewise, the plan pinning a
repository inside it, and warns of the wider one."""

from __future__ import annotations

import copy

import pytest
from django.urls import reverse

from guard.policy_evaluation import POLICY_ARGUMENT_OVERLAPS, POLICY_DENY_OVERLAPS
from kernel.problems import Code, DomainError
from plans.services import plan_issue, plan_refresh
from policies.services import policy_set, policy_version_publish
from rehearsal.impact import policy_impact
from tests.conftest import POLICY, plan_document
from tests.policies.impact_helpers import issue


def narrowed() -> dict:
    document = copy.deepcopy(POLICY)
    document["rules"][0]["args"] = {"repo": {"glob": "acme/public-*"}}
    return document


def repo_step(constraint: dict) -> list[dict]:
    return [{"tool": "github_list_issues", "args": {"repo": constraint}}]


def test_a_narrowed_glob_refuses_the_plan_pinned_outside_it_and_warns_of_the_wider_one(agent):
    app = issue(agent, goal="app", steps=repo_step({"eq": "acme/app"}))
    wide = issue(agent, goal="wide", steps=repo_step({"glob": "acme/*"}))
    public = issue(agent, goal="public", steps=repo_step({"eq": "acme/public-app"}))

    impact = policy_impact(policy=agent.agent.policy, document=narrowed())

    assert (impact.plans_checked, impact.plans_affected, impact.plans_warned) == (3, 1, 1)
    (refused,) = impact.plans
    assert refused.id == app.pk
    (step,) = refused.steps
    assert (step.index, step.path, step.rule) == (0, "steps[0].args.repo", 0)
    assert 'repo {"eq":"acme/app"}' in step.reason
    assert 'rules[0] requires repo {"glob":"acme/public-*"}' in step.reason
    (warned,) = impact.warned
    assert warned.id == wide.pk
    (warning,) = warned.warnings
    assert (warning.path, warning.code, warning.rule) == (
        "steps[0].args.repo",
        POLICY_ARGUMENT_OVERLAPS,
        0,
    )
    assert "some calls will be refused" in warning.detail
    assert public.pk not in {plan.id for plan in (*impact.plans, *impact.warned)}
    assert impact.as_json()["plansWarned"] == 1


def test_the_refreshes_after_publication_answer_what_the_preview_said(agent):
    app = plan_issue(
        agent=agent.agent, document=plan_document(goal="app", steps=repo_step({"eq": "acme/app"}))
    )
    wide = plan_issue(
        agent=agent.agent,
        document=plan_document(goal="wide", steps=repo_step({"glob": "acme/*"})),
    )
    impact = policy_impact(policy=agent.agent.policy, document=narrowed())
    assert [plan.id for plan in impact.plans] == [app.plan.pk]
    assert [plan.id for plan in impact.warned] == [wide.plan.pk]
    app_tokens = app.plan.tokens.count()

    policy_version_publish(policy=agent.agent.policy, document=narrowed())

    with pytest.raises(DomainError) as refused:
        plan_refresh(agent=agent.agent, plan_id=app.plan.pk, token=app.token)
    assert refused.value.code == Code.POLICY_DENIED
    assert [error.path for error in refused.value.errors] == ["plan.steps[0].args.repo"]
    assert app.plan.tokens.count() == app_tokens  # nothing signed
    renewed = plan_refresh(agent=agent.agent, plan_id=wide.plan.pk, token=wide.token)
    assert [warning.path for warning in renewed.warnings] == ["steps[0].args.repo"]


# --- a deny rule with args, read with the same relation (the fail-closed way, 0016) ---------


def secrets_denied() -> dict:
    """POLICY with calls on acme/secret* repositories forbidden: its rule is rules[4]."""
    document = copy.deepcopy(POLICY)
    document["rules"].append(
        {
            "effect": "deny",
            "name": "no secrets",
            "tools": ["github_*"],
            "args": {"repo": {"glob": "acme/secret*"}},
        }
    )
    return document


def test_a_deny_rule_refuses_the_plan_pinned_inside_it_and_warns_of_the_wider_one(agent):
    secret = issue(agent, goal="secret", steps=repo_step({"eq": "acme/secret-keys"}))
    wide = issue(agent, goal="wide", steps=repo_step({"glob": "acme/*"}))
    public = issue(agent, goal="public", steps=repo_step({"eq": "acme/public-app"}))

    impact = policy_impact(policy=agent.agent.policy, document=secrets_denied())

    assert (impact.plans_checked, impact.plans_affected, impact.plans_warned) == (3, 1, 1)
    (refused,) = impact.plans
    assert refused.id == secret.pk
    (step,) = refused.steps
    assert (step.index, step.path, step.rule) == (0, "steps[0].args.repo", 4)
    assert 'deny rule "no secrets" forbids every call of this step' in step.reason
    assert 'repo {"glob":"acme/secret*"}' in step.reason
    (warned,) = impact.warned
    assert warned.id == wide.pk
    (warning,) = warned.warnings
    assert (warning.path, warning.code, warning.rule) == (
        "steps[0].args.repo",
        POLICY_DENY_OVERLAPS,
        4,
    )
    assert "some calls will be refused" in warning.detail
    assert public.pk not in {plan.id for plan in (*impact.plans, *impact.warned)}
    answer = impact.as_json()
    assert (answer["plansAffected"], answer["plansWarned"]) == (1, 1)


def test_the_rollback_page_names_the_plan_a_deny_rule_would_refuse(team_admin_client, team, agent):
    denied = policy_set(team=team, slug="default", document=secrets_denied())
    policy_set(team=team, slug="default", document=POLICY)
    secret = issue(agent, goal="secret", steps=repo_step({"eq": "acme/secret-keys"}))
    wide = issue(agent, goal="wide", steps=repo_step({"glob": "acme/*"}))
    versions = denied.policy.versions.count()

    page = team_admin_client.get(
        reverse("admin:policies_policyversion_publish_again", args=[denied.pk])
    )

    assert page.status_code == 200
    html = " ".join(page.content.decode().split())
    assert "1 of 2 live plans would be refused (<code>policy_denied</code>)" in html
    assert secret.pk in html and wide.pk in html
    assert "steps[0].args.repo" in html
    assert POLICY_DENY_OVERLAPS in html
    assert denied.policy.versions.count() == versions  # asking writes nothing
