"""The simulator answers what issuance and the agent's guard answer: compared here with a
real token issued by the API and checked by a real guard (over an in-process transport)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO

import httpx
import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.management import CommandError, call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from audit.models import AuditRecord
from guard.agent import Guard, GuardError
from kernel.problems import Code, DomainError
from plans.models import Plan
from policies.services import policy_set
from rehearsal.simulator import simulate_call, simulate_plan
from tests.conftest import PLAN, POLICY, plan_document
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, no_mail

CALLS = [
    ("github_list_issues", {"repo": "acme/public-app"}),  # allowed, step 0, rules[0]
    ("github_list_issues", {"repo": "acme/other"}),  # not in the plan
    ("github_get_issue", {"repo": "acme/public-app", "number": 7}),  # allowed, step 1
    ("send_email", {"to": "x@acme.dev"}),  # not in the plan
    ("github_list_issues", []),  # arguments not an object
    ("github_list_issues", {"repo": "acme/public-app", "n": float("inf")}),  # not JSON
]


@pytest.fixture
def guard_for(agent) -> Iterator:
    """A real guard of the `agent` persona, served by the Django app in-process on the
    test's database connection (as tests/guard/conftest.py does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    guards: list[Guard] = []

    def make() -> Guard:
        guard = Guard(
            "http://testserver",
            agent.api_key,
            issuer=settings.PLANGATE_ISSUER,
            transport=httpx.WSGITransport(app=WSGIHandler()),
            auto_refresh=False,
            watch_status=False,
            report=False,
        )
        guards.append(guard)
        return guard

    try:
        yield make
    finally:
        for guard in guards:
            guard.close()
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.mark.parametrize(("tool", "args"), CALLS)
def test_a_simulated_call_gets_the_real_guards_answer(
    guard_for, agent, member, policy_version, tool, args
):
    real = guard_for()
    real.declare(plan_document())

    simulated = simulate_call(
        version=policy_version, member=member, document=plan_document(), tool=tool, args=args
    )
    actual = real.check(tool, args)

    assert simulated.guard is not None
    assert (simulated.guard.code, simulated.guard.step, simulated.guard.rule) == (
        actual.code,
        actual.step,
        actual.rule,
    )
    assert simulated.guard.reason == actual.reason
    assert simulated.guard.rule_description == actual.rule_description
    assert simulated.allowed == actual.allowed


def test_a_call_the_policy_denies_names_the_rule_as_the_guard_does(guard_for, agent, member, team):
    # The plan may mail anyone; the policy allows mail only to the team's domain.
    document = plan_document(steps=[{"tool": "send_email"}])
    policy = {
        **POLICY,
        "rules": [
            *POLICY["rules"][:2],
            {"effect": "allow", "tools": ["send_email"], "args": {"to": {"glob": "*@acme.dev"}}},
        ],
    }
    version = policy_set(team=team, slug="default", document=policy)
    real = guard_for()
    real.declare(document)

    simulated = simulate_call(
        version=version,
        member=member,
        document=document,
        tool="send_email",
        args={"to": "x@evil.test"},
    )
    actual = real.check("send_email", {"to": "x@evil.test"})

    assert actual.code.value == "policy_denied"
    assert simulated.as_json()["call"] == {
        "tool": "send_email",
        "decision": "policy_denied",
        "step": actual.step,
        "stepIndex": actual.step,
        "stepNumber": actual.step_number,
        "rule": actual.rule,
        "ruleDescription": actual.rule_description,
        "reason": actual.reason,
    }


def test_a_plan_issuance_refuses_is_policy_denied_with_its_steps_and_rules(
    guard_for, member, team, agent
):
    version = policy_set(team=team, slug="default", document=no_mail())
    document = plan_document(steps=MAIL_PLAN_STEPS)
    with pytest.raises(GuardError) as refused:
        guard_for().declare(document)
    assert refused.value.code == "policy_denied"

    simulated = simulate_plan(version=version, member=member, document=document)

    assert simulated.decision == "policy_denied"
    assert [(step.index, step.tool, step.rule) for step in simulated.denials] == [
        (1, "send_email", 4)
    ]
    call = simulate_call(
        version=version, member=member, document=document, tool="send_email", args={}
    )
    assert call.guard is None and not call.allowed
    assert call.as_json()["call"] is None


def test_an_older_version_is_simulated_as_it_was(member, team, agent):
    old = agent.agent.policy.versions.get(number=1)
    policy_set(team=team, slug="default", document=no_mail())
    document = plan_document(steps=MAIL_PLAN_STEPS)
    assert simulate_plan(version=old, member=member, document=document).allowed


def test_issuance_warnings_are_part_of_the_plans_answer(member, policy_version):
    # github_* is allowed only for repo acme/*: a step that pins no repo is warned about.
    document = plan_document(steps=[{"tool": "github_list_issues"}])
    answer = simulate_plan(version=policy_version, member=member, document=document).as_json()
    assert answer["decision"] == "allowed"
    assert [warning["path"] for warning in answer["warnings"]] == ["plan.steps[0].args.repo"]


def test_the_simulated_member_is_the_one_chosen_and_of_the_team(
    sre_member, outsider, policy_version
):
    deploy = plan_document(steps=[{"tool": "deploy", "maxCalls": 1}])  # user: alice
    assert simulate_plan(version=policy_version, member=sre_member, document=deploy).allowed
    with pytest.raises(DomainError) as foreign:
        simulate_plan(version=policy_version, member=outsider, document=deploy)
    assert foreign.value.code == Code.UNKNOWN_USER


def test_a_disabled_member_is_answered_user_disabled(disabled_member, policy_version):
    answer = simulate_plan(version=policy_version, member=disabled_member, document=PLAN)
    assert answer.decision == "user_disabled" and not answer.allowed


def test_a_bad_plan_names_its_paths_and_nothing_is_written(member, policy_version):
    before = (Plan.objects.count(), AuditRecord.objects.count())
    with pytest.raises(DomainError) as invalid:
        simulate_plan(
            version=policy_version,
            member=member,
            document=plan_document(steps=[{"tool": "x", "args": {"a": {"regx": "."}}}]),
        )
    assert invalid.value.code == Code.INVALID_PLAN
    assert [error.path for error in invalid.value.errors] == ["plan.steps[0].args.a.regx"]
    assert (Plan.objects.count(), AuditRecord.objects.count()) == before


# --- manage.py simulate_policy ---------------------------------------------------------


def simulate(tmp_path, plan, *args) -> tuple[dict, int]:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    out = StringIO()
    try:
        call_command(
            "simulate_policy",
            "default",
            "--member",
            "alice@acme.dev",
            "--plan",
            str(path),
            *args,
            stdout=out,
        )
    except CommandError as exc:
        return json.loads(out.getvalue()) if out.getvalue() else {}, exc.returncode
    return json.loads(out.getvalue()), 0


def test_simulate_policy_prints_the_plans_answer_and_exits_0_when_allowed(agent, member, tmp_path):
    answer, status = simulate(tmp_path, PLAN)
    assert status == 0
    assert answer["plan"]["decision"] == "allowed" and answer["plan"]["version"] == 1


def test_simulate_policy_exits_1_for_a_refused_plan_or_a_blocked_call(
    agent, member, team, tmp_path
):
    policy_set(team=team, slug="default", document=no_mail())
    answer, status = simulate(tmp_path, plan_document(steps=MAIL_PLAN_STEPS))
    assert status == 1 and answer["plan"]["steps"][0]["rule"] == 4
    # the refused step: its index from 0 beside its number from 1, as the reason counts
    refused = answer["plan"]["steps"][0]
    assert (refused["index"], refused["number"], refused["path"]) == (1, 2, "steps[1]")

    answer, status = simulate(tmp_path, PLAN, "--version", "1", "--call", "send_email", "{}")
    assert status == 1
    assert answer["call"]["decision"] == "not_in_plan"

    answer, status = simulate(
        tmp_path, PLAN, "--call", "github_get_issue", '{"repo": "acme/public-app"}'
    )
    assert status == 0 and answer["call"]["step"] == 1 and answer["call"]["rule"] == 0
    assert (answer["call"]["stepIndex"], answer["call"]["stepNumber"]) == (1, 2)


def test_simulate_policy_exits_2_for_input_it_cannot_use(agent, member, outsider, tmp_path):
    assert simulate(tmp_path, PLAN, "--call", "github_get_issue", "{nope")[1] == 2
    assert simulate(tmp_path, PLAN, "--version", "9")[1] == 2
    assert simulate(tmp_path, {"version": 1, "goal": "", "user": "x", "steps": []})[1] == 2
    assert simulate(tmp_path, PLAN, "--team", "globex")[1] == 2  # no such policy there


def test_the_simulation_names_the_steps_a_person_must_approve(team, member, policy_version):
    version = policy_set(
        team=team,
        slug="default",
        document={
            "version": 1,
            "default": "deny",
            "rules": [
                {"effect": "allow", "tools": ["github_*"]},
                {"effect": "review", "tools": ["send_email"]},
            ],
        },
    )
    document = plan_document(steps=[{"tool": "github_list_issues"}, {"tool": "send_email"}])

    simulated = simulate_plan(version=version, member=member, document=document)

    assert simulated.allowed
    assert simulated.as_json()["review"] == [
        {
            "path": "plan.steps[1]",
            "stepIndex": 1,
            "stepNumber": 2,
            "tool": "send_email",
            "rule": 1,
        }
    ]
