"""policy_impact and `manage.py preview_policy`: what a stricter document would refuse among
the team's live plans (issued through the real issuance service), written nowhere."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from audit.models import AuditRecord
from guard.plan import validate_plan
from guard.policy import validate_policy
from guard.policy_evaluation import evaluate_plan
from kernel.problems import Code, DomainError
from members.services import agent_update, member_upsert
from plans.services import plan_issue, plan_refresh, plan_revoke
from policies.models import PolicyVersion
from policies.services import policy_set, policy_version_publish
from rehearsal import impact as impact_module
from rehearsal.impact import _StepVerdicts, policy_impact
from tests.conftest import POLICY, plan_document
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, issue, mail_plan, no_mail


def test_a_stricter_document_lists_the_live_plans_and_steps_it_would_refuse(
    agent, other_agent, member
):
    summary = issue(agent)
    mailing = mail_plan(agent)
    foreign = mail_plan(other_agent, user="olga@globex.test")

    impact = policy_impact(policy=agent.agent.policy, document=no_mail())

    assert (impact.plans_checked, impact.plans_affected) == (2, 1)
    (affected,) = impact.plans
    assert affected.id == mailing.pk
    assert (affected.agent, affected.user) == ("summariser", "alice@acme.dev")
    assert (affected.role, affected.groups) == ("engineer", ("platform",))
    (step,) = affected.steps
    assert (step.index, step.number, step.tool, step.rule) == (1, 2, "send_email", 4)
    assert "no mail" in step.reason
    assert summary.pk not in {plan.id for plan in impact.plans}
    assert foreign.pk not in {plan.id for plan in impact.plans}


def test_the_preview_agrees_with_the_refresh_that_follows_the_publication(agent):
    summary = issue(agent)
    held = plan_issue(
        agent=agent.agent, document=plan_document(goal="Mail it", steps=MAIL_PLAN_STEPS)
    )
    impact = policy_impact(policy=agent.agent.policy, document=no_mail())
    assert [plan.id for plan in impact.plans] == [held.plan.pk]

    policy_version_publish(policy=agent.agent.policy, document=no_mail())

    with pytest.raises(DomainError) as denied:
        plan_refresh(agent=agent.agent, plan_id=held.plan.pk, token=held.token)
    assert denied.value.code == Code.POLICY_DENIED
    assert [error.path for error in denied.value.errors] == ["plan.steps[1]"]
    assert summary.pk not in {plan.id for plan in impact.plans}


def test_role_and_groups_are_read_as_they_are_now(agent, sre_member):
    deploy = [{"tool": "deploy", "maxCalls": 2}]
    plan = issue(agent, user="sam@acme.dev", steps=deploy)
    policy = agent.agent.policy
    assert policy_impact(policy=policy, document=POLICY).plans_affected == 0

    member_upsert(team=agent.team, email="sam@acme.dev", role="engineer")

    impact = policy_impact(policy=policy, document=POLICY)
    (affected,) = impact.plans
    assert (affected.id, affected.role) == (plan.pk, "engineer")
    assert affected.steps[0].rule is None  # no allow rule admits deploy for an engineer


def test_plans_that_no_refresh_would_renew_are_not_counted(agent, team, member):
    revoked, expired, live = mail_plan(agent), mail_plan(agent), mail_plan(agent)
    plan_revoke(plan=revoked, by="test")
    expired.status = expired.Status.EXPIRED
    expired.save(update_fields=["status"])

    impact = policy_impact(policy=agent.agent.policy, document=no_mail())

    assert [plan.id for plan in impact.plans] == [live.pk]
    member_upsert(team=team, email=member.email, is_active=False)
    assert policy_impact(policy=agent.agent.policy, document=no_mail()).plans_checked == 0


def test_many_plans_are_read_in_chunks_counted_all_and_listed_up_to_the_limit(agent, monkeypatch):
    monkeypatch.setattr(impact_module, "CHUNK_SIZE", 2)
    plans = sorted(mail_plan(agent).pk for _ in range(5))

    impact = policy_impact(policy=agent.agent.policy, document=no_mail(), limit=3)

    assert (impact.plans_checked, impact.plans_affected) == (5, 5)
    assert [plan.id for plan in impact.plans] == plans[:3]
    assert not impact.listed_all


def test_computing_the_impact_writes_nothing(agent):
    mail_plan(agent)
    before = (PolicyVersion.objects.count(), AuditRecord.objects.count())

    policy_impact(policy=agent.agent.policy, document=no_mail())

    assert (PolicyVersion.objects.count(), AuditRecord.objects.count()) == before


def test_an_invalid_document_is_refused_with_its_paths(agent):
    document = no_mail()
    document["rules"][4]["effect"] = "forbid"
    with pytest.raises(DomainError) as refused:
        policy_impact(policy=agent.agent.policy, document=document)
    assert refused.value.code == Code.INVALID_POLICY
    assert [error.path for error in refused.value.errors] == ["rules[4].effect"]


def test_an_agent_moved_to_another_policy_takes_its_plans_along(agent, team):
    mail_plan(agent)
    first = agent.agent.policy
    other = policy_set(team=team, slug="other", document=POLICY).policy
    agent_update(agent=agent.agent, policy=other)

    assert policy_impact(policy=first, document=no_mail()).plans_checked == 0
    assert policy_impact(policy=other, document=no_mail()).plans_affected == 1


# --- manage.py preview_policy ----------------------------------------------------------


def preview(tmp_path, document, *args) -> dict:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(document))
    out = StringIO()
    call_command("preview_policy", "default", "--file", str(path), *args, stdout=out)
    return json.loads(out.getvalue())


def test_preview_policy_prints_the_affected_plans_as_json_and_exits_0(agent, tmp_path):
    mailing = mail_plan(agent)
    issue(agent)

    answer = preview(tmp_path, no_mail())

    assert answer["plansAffected"] == 1
    assert answer["plansChecked"] == 2
    assert answer["plans"] == [
        {
            "id": mailing.pk,
            "agent": "summariser",
            "user": "alice@acme.dev",
            "role": "engineer",
            "groups": ["platform"],
            "steps": [
                {
                    "index": 1,
                    "number": 2,
                    "tool": "send_email",
                    "rule": 4,
                    "reason": 'deny rule "no mail" forbids tool send_email',
                    "path": "steps[1]",
                }
            ],
        }
    ]
    assert PolicyVersion.objects.filter(policy=agent.agent.policy).count() == 1


def test_fail_on_impact_exits_1_when_a_plan_would_be_refused_and_0_otherwise(agent, tmp_path):
    mail_plan(agent)
    assert preview(tmp_path, POLICY, "--fail-on-impact")["plansAffected"] == 0

    with pytest.raises(CommandError) as failed:
        preview(tmp_path, no_mail(), "--fail-on-impact")
    assert failed.value.returncode == 1


def test_preview_policy_is_scoped_to_the_team_named(agent, other_agent, tmp_path):
    mail_plan(other_agent, user="olga@globex.test")
    mail_plan(agent)
    answer = preview(tmp_path, no_mail(), "--team", "globex")
    assert answer["team"] == "globex"
    assert [plan["user"] for plan in answer["plans"]] == ["olga@globex.test"]


def test_preview_policy_exits_2_for_a_bad_document_file_or_team(agent, tmp_path):
    document = no_mail()
    document["rules"][0]["tools"] = "github_*"
    with pytest.raises(CommandError) as invalid:
        preview(tmp_path, document)
    assert invalid.value.returncode == 2
    assert "rules[0].tools" in str(invalid.value)

    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(CommandError) as not_json:
        call_command("preview_policy", "default", "--file", str(tmp_path / "broken.json"))
    assert not_json.value.returncode == 2

    with pytest.raises(CommandError) as no_team:
        preview(tmp_path, POLICY, "--team", "nobody")
    assert no_team.value.returncode == 2


def test_a_policy_not_created_yet_affects_nothing(team, tmp_path):
    path = tmp_path / "new.json"
    path.write_text(json.dumps(POLICY))
    out = StringIO()
    call_command("preview_policy", "brand-new", "--file", str(path), stdout=out)
    assert json.loads(out.getvalue())["plansAffected"] == 0


def test_queries_grow_with_chunks_not_with_plans(agent, sre_member, monkeypatch):
    monkeypatch.setattr(impact_module, "CHUNK_SIZE", 4)
    for _ in range(4):
        mail_plan(agent)
        mail_plan(agent, user="sam@acme.dev")
    with CaptureQueriesContext(connection) as queries:
        impact = policy_impact(policy=agent.agent.policy, document=no_mail())
    assert impact.plans_affected == 8
    # the active version, then per chunk of 4: the plans and their members' groups; and
    # the empty read that ends the walk
    assert len(queries) == 1 + 2 * 2 + 1


CAPPED = {
    "version": 1,
    "default": "allow",
    "rules": [
        {"effect": "allow", "tools": ["github_*"], "maxCalls": 5},
        {"effect": "allow", "tools": ["github_list_*"], "maxCalls": 10, "groups": ["oncall"]},
        {"effect": "deny", "tools": ["deploy"], "roles": ["engineer"]},
    ],
}


@given(
    policy=st.sampled_from([POLICY, no_mail(), {**POLICY, "default": "allow"}, CAPPED]),
    steps=st.lists(
        st.fixed_dictionaries(
            {
                "tool": st.sampled_from(
                    ["github_list_issues", "github_delete_repo", "send_email", "deploy", "other"]
                ),
                "maxCalls": st.integers(1, 30),
            }
        ),
        min_size=1,
        max_size=6,
    ),
    role=st.sampled_from([None, "sre", "engineer"]),
    groups=st.sets(st.sampled_from(["oncall", "platform"])),
)
def test_remembered_step_verdicts_are_evaluate_plans_verdicts(policy, steps, role, groups):
    normalized = validate_policy(policy)
    plan = validate_plan({"version": 1, "goal": "g", "user": "a@b.test", "steps": steps})
    groups = tuple(sorted(groups))
    remembered = _StepVerdicts(normalized)
    remembered.denials(plan, role, groups)  # a second pass reads the remembered verdicts
    assert remembered.denials(plan, role, groups) == evaluate_plan(
        normalized, plan, role=role, groups=groups
    )
