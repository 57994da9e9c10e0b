"""The simulator's admin page: the answers of rehearsal.simulator, team-scoped, bad input shown
as form errors with paths (never a 500), nothing written."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from audit.models import AuditRecord
from plans.models import Plan
from rehearsal.simulator import simulate_call
from tests.admin.conftest import logged_in
from tests.conftest import PLAN


def url(version) -> str:
    return reverse("admin:policies_policyversion_simulate", args=[version.pk])


def post(client, version, member, plan=PLAN, tool="", args="{}"):
    return client.post(
        url(version),
        {
            "member": member.pk,
            "plan": plan if isinstance(plan, str) else json.dumps(plan),
            "tool": tool,
            "args": args,
        },
    )


def test_the_version_and_the_policy_pages_link_to_the_simulator(team_admin_client, agent):
    version = agent.agent.policy.versions.get()
    for page in (
        reverse("admin:policies_policyversion_change", args=[version.pk]),
        reverse("admin:policies_policy_change", args=[version.policy_id]),
    ):
        assert url(version) in team_admin_client.get(page).content.decode()


def test_the_page_offers_the_teams_members_only(
    team_admin_client, policy_version, member, outsider
):
    page = team_admin_client.get(url(policy_version))
    assert page.status_code == 200
    html = page.content.decode()
    assert member.email in html and outsider.email not in html


def test_a_plan_and_a_call_get_the_simulators_answers(team_admin_client, policy_version, member):
    before = (Plan.objects.count(), AuditRecord.objects.count())
    args = '{"repo": "acme/public-app", "number": 7}'

    page = post(team_admin_client, policy_version, member, tool="github_get_issue", args=args)

    assert page.status_code == 200
    html = page.content.decode()
    expected = simulate_call(
        version=policy_version,
        member=member,
        document=PLAN,
        tool="github_get_issue",
        args=json.loads(args),
    )
    assert 'id="plan-decision">allowed<' in html
    assert 'id="call-decision">allowed<' in html
    assert "Step 2 (index 1)" in html
    assert f"#rules-{expected.guard.rule}" in html
    assert json.dumps(expected.as_json()["call"]["reason"])[1:-1] in page.context["result_json"]
    # the JSON offered counts the step as the page does: "Step 2 (index 1)"
    call = json.loads(page.context["result_json"])["call"]
    assert (call["stepIndex"], call["stepNumber"]) == (1, 2)
    assert (Plan.objects.count(), AuditRecord.objects.count()) == before


def test_a_refused_plan_names_its_steps_and_rules(team_admin_client, policy_version, member):
    plan = {**PLAN, "steps": [{"tool": "github_delete_repo"}]}
    page = post(team_admin_client, policy_version, member, plan=plan)
    html = page.content.decode()
    assert 'id="plan-decision">policy_denied<' in html
    assert "step 1 <code>github_delete_repo</code>" in html and "rules[1]" in html
    # the JSON offered names the same step 1, beside its index 0
    [step] = json.loads(page.context["result_json"])["steps"]
    assert (step["index"], step["number"], step["tool"]) == (0, 1, "github_delete_repo")


@pytest.mark.parametrize(
    ("plan", "args", "tool", "message"),
    [
        ('{"version": 1,\n "steps": [}', "{}", "", "Not valid JSON: Expecting value (line 2"),
        (
            json.dumps({**PLAN, "steps": [{"tool": "x", "args": {"a": {"regx": "."}}}]}),
            "{}",
            "",
            "plan.steps[0].args.a.regx",
        ),
        (json.dumps(PLAN), "{nope", "github_get_issue", "Not valid JSON: Expecting property name"),
        ("[1, 2]", "{}", "", "plan: a plan must be a JSON object"),
    ],
)
def test_bad_input_is_a_form_error_with_its_path(
    team_admin_client, policy_version, member, plan, args, tool, message
):
    page = post(team_admin_client, policy_version, member, plan=plan, tool=tool, args=args)
    assert page.status_code == 200
    html = page.content.decode()
    assert "errorlist" in html and message in html.replace("&#x27;", "'")
    assert page.context["result"] is None


def test_arguments_that_are_not_an_object_get_the_guards_answer(
    team_admin_client, policy_version, member
):
    html = post(
        team_admin_client, policy_version, member, tool="github_get_issue", args="[]"
    ).content.decode()
    assert 'id="call-decision">invalid_arguments<' in html


def test_another_teams_member_or_version_is_not_simulated(
    team_admin_client, other_team_admin, policy_version, outsider, member
):
    chosen = post(team_admin_client, policy_version, outsider)
    assert chosen.status_code == 200 and chosen.context["result"] is None
    assert "Select a valid choice" in chosen.content.decode()
    assert logged_in(other_team_admin).get(url(policy_version)).status_code in (302, 404)
    assert post(logged_in(other_team_admin), policy_version, member).status_code in (302, 404)


def test_an_auditor_may_simulate_since_it_writes_nothing(auditor_client, policy_version, member):
    assert (
        'id="plan-decision">allowed<'
        in post(auditor_client, policy_version, member).content.decode()
    )
