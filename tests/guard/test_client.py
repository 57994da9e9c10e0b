"""The guard decides every call locally: plan, policy snapshot, budgets, declare rules.

Each test declares against the real control plane, served in-process (see conftest).
"""

from __future__ import annotations

import threading

import pytest

from guard.agent.errors import (
    CONTROL_PLANE_UNAVAILABLE,
    DECLARE_AFTER_OUTPUT,
    INVALID_PLAN,
    CallBlocked,
    GuardError,
)
from guard.decisions import Decision
from kernel.problems import Code
from plans.models import Plan, PlanToken
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

REPO = {"repo": "acme/public-app"}


def test_declare_returns_the_signed_plan_and_a_planned_call_is_allowed(make_any_guard, agent):
    guard = make_any_guard()

    declared = guard.declare(plan_document())
    decision = guard.check("github_list_issues", {**REPO, "state": "open"})

    plan = Plan.objects.get(pk=declared.plan_id)
    assert declared.plan_hash == plan.hash
    assert declared.plan == plan.document
    assert declared.policy["version"] == 1
    assert decision.allowed and decision.code == Decision.ALLOWED
    assert decision.step == 0
    assert decision.rule == 0
    assert "step 1 (github_list_issues)" in decision.reason  # people count from 1


def test_before_any_declaration_every_call_is_no_plan(make_any_guard):
    guard = make_any_guard()

    decision = guard.check("github_list_issues", REPO)

    assert decision.code == Decision.NO_PLAN
    assert "declare_plan" in decision.reason
    assert guard.status().state == "no_plan"


def test_a_tool_the_plan_does_not_name_is_not_in_plan(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())

    decision = guard.check("send_email", {"to": "bob@acme.dev"})

    assert decision.code == Decision.NOT_IN_PLAN
    assert decision.step is None
    assert "no step of the plan calls send_email" in decision.reason


@pytest.mark.parametrize(
    ("args", "explained"),
    [
        ({"repo": "acme/other-app"}, 'repo must satisfy {"eq": "acme/public-app"}'),
        ({"state": "open"}, "repo must satisfy"),  # a pinned argument that is missing
    ],
)
def test_arguments_outside_the_steps_constraints_are_not_in_plan(make_any_guard, args, explained):
    guard = make_any_guard()
    guard.declare(plan_document())

    decision = guard.check("github_list_issues", args)

    assert decision.code == Decision.NOT_IN_PLAN
    assert explained in decision.reason


def test_a_call_the_plan_allows_but_the_policy_snapshot_refuses_is_policy_denied(make_any_guard):
    # The step pins nothing, so the plan admits any repo; the policy admits only acme/*.
    guard = make_any_guard()
    guard.declare(plan_document(steps=[{"tool": "github_get_issue"}]))

    inside = guard.check("github_get_issue", {"repo": "acme/app", "number": 1})
    outside = guard.check("github_get_issue", {"repo": "evil/app", "number": 1})

    assert inside.allowed
    assert outside.code == Decision.POLICY_DENIED
    assert outside.step == 0
    assert "policy version 1" in outside.reason
    assert guard.status().steps[0].used == 1  # a refused call spends no budget


def test_a_deny_rule_with_arguments_applies_per_call(make_any_guard, team):
    policy_set(
        team=team,
        slug="default",
        document={
            **POLICY,
            "rules": [
                {"effect": "deny", "tools": ["github_*"], "args": {"number": {"gte": 100}}},
                *POLICY["rules"],
            ],
        },
    )
    guard = make_any_guard()
    guard.declare(plan_document())

    small = guard.check("github_get_issue", {**REPO, "number": 7})
    large = guard.check("github_get_issue", {**REPO, "number": 150})

    assert small.allowed
    assert large.code == Decision.POLICY_DENIED
    assert large.rule == 0


def test_budgets_count_per_step_and_a_spent_step_is_max_calls_exceeded(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())

    decisions = [guard.check("github_list_issues", REPO) for _ in range(4)]
    other_step = guard.check("github_get_issue", REPO)

    assert [d.code for d in decisions] == [Decision.ALLOWED] * 3 + [Decision.MAX_CALLS_EXCEEDED]
    assert decisions[3].step == 0
    assert "maxCalls" in decisions[3].reason
    assert other_step.allowed
    assert [step.used for step in guard.status().steps] == [3, 1]


def test_a_call_counts_against_the_first_matching_step_with_calls_left(make_any_guard):
    guard = make_any_guard()
    guard.declare(
        plan_document(
            steps=[
                {"tool": "github_get_issue", "args": {"repo": {"eq": "acme/app"}}, "maxCalls": 1},
                {"tool": "github_get_issue", "args": {"repo": {"glob": "acme/*"}}, "maxCalls": 2},
            ]
        )
    )

    steps = [guard.check("github_get_issue", {"repo": "acme/app"}) for _ in range(4)]

    assert [d.step for d in steps] == [0, 1, 1, 0]
    assert [d.code for d in steps][-1] == Decision.MAX_CALLS_EXCEEDED


def test_threads_hammering_one_step_get_exactly_its_max_calls(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document(steps=[{"tool": "github_get_issue", "maxCalls": 37}]))
    results: list[Decision] = []
    results_lock = threading.Lock()
    start = threading.Barrier(8)

    def hammer() -> None:
        start.wait()
        mine = [guard.check("github_get_issue", {"repo": "acme/app"}).code for _ in range(50)]
        with results_lock:
            results.extend(mine)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 400
    assert results.count(Decision.ALLOWED) == 37
    assert results.count(Decision.MAX_CALLS_EXCEEDED) == 400 - 37
    assert guard.status().steps[0].used == 37


@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        ("github_get_issue", ["acme/app"], "arguments must be a JSON object"),
        ("github_get_issue", None, "arguments must be a JSON object"),
        (["github_get_issue"], {}, "tool name must be a string"),
    ],
)
def test_malformed_calls_are_invalid_arguments(make_any_guard, tool, args, reason):
    guard = make_any_guard()
    guard.declare(plan_document())

    decision = guard.check(tool, args)

    assert decision.code == Decision.INVALID_ARGUMENTS
    assert reason in decision.reason


def test_an_invalid_plan_is_refused_locally_with_each_path(make_any_guard, switchboard):
    guard = make_any_guard()
    bad = plan_document(steps=[{"tool": "github_get_issue", "args": {"repo": {"regx": "a"}}}])

    with pytest.raises(GuardError) as refused:
        guard.declare(bad)

    assert refused.value.code == INVALID_PLAN
    assert [error["path"] for error in refused.value.errors] == ["steps[0].args.repo.regx"]
    assert switchboard.count("/v1/plans") == 0
    assert Plan.objects.count() == 0


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"user": "mallory@acme.dev"}, Code.UNKNOWN_USER),
        ({"steps": [{"tool": "github_delete_repo"}]}, Code.POLICY_DENIED),
    ],
)
def test_a_refusal_of_the_control_plane_keeps_its_code(make_any_guard, overrides, code):
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document(**overrides))

    assert refused.value.code == code
    assert guard.check("github_list_issues", REPO).code == Decision.NO_PLAN


def test_an_unreachable_control_plane_is_reported_at_declare(make_any_guard, switchboard):
    switchboard.down = True
    guard = make_any_guard()

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == CONTROL_PLANE_UNAVAILABLE


# --- declare before reading any tool output ------------------------------------------------


def test_a_new_plan_after_a_tool_returned_output_is_refused(make_any_guard):
    guard = make_any_guard()
    first = guard.declare(plan_document())
    guard.call("github_list_issues", REPO, lambda **args: ["issue 1"])

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document(goal="Do something else"))

    assert refused.value.code == DECLARE_AFTER_OUTPUT
    assert "before any tool output" in refused.value.message
    assert Plan.objects.count() == 1  # nothing was even asked of the control plane
    assert guard.status().plan_id == first.plan_id


def test_the_declare_plan_tool_explains_the_refusal_to_the_model(make_any_guard):
    guard = make_any_guard()
    guard.handle_declare_plan(plan_document())
    assert guard.check("github_list_issues", REPO).allowed  # the tool runs: output is read

    result = guard.handle_declare_plan(plan_document(goal="Exfiltrate"))

    assert result["ok"] is False
    assert result["code"] == DECLARE_AFTER_OUTPUT


def test_a_plan_may_be_replaced_while_no_tool_has_run(make_any_guard):
    messages: list[dict] = []
    guard = make_any_guard(acp_sink=messages.append)
    first = guard.declare(plan_document())
    assert guard.check("send_email", {"to": "bob@acme.dev"}).code == Decision.NOT_IN_PLAN

    second = guard.declare(
        plan_document(steps=[{"tool": "send_email", "args": {"to": {"glob": "*@acme.dev"}}}])
    )

    assert second.plan_id != first.plan_id
    assert guard.check("send_email", {"to": "bob@acme.dev"}).allowed
    removed = [m for m in messages if m["params"]["update"]["sessionUpdate"] == "plan_removed"]
    assert [m["params"]["update"]["planId"] for m in removed] == [first.plan_id]


def test_a_new_session_may_declare_again(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())
    guard.call("github_list_issues", REPO, lambda **args: [])

    guard.new_session("session-2")
    declared = guard.declare(plan_document(goal="Next task"))

    assert guard.session_id == "session-2"
    assert guard.status().plan_id == declared.plan_id
    assert guard.status().steps[0].used == 0


def test_the_declare_plan_tool_accepts_json_text_and_returns_a_summary(make_any_guard):
    import json

    guard = make_any_guard()

    result = guard.handle_declare_plan(json.dumps(plan_document()))
    broken = guard.handle_declare_plan("{not json")
    invalid = guard.handle_declare_plan({"version": 1})

    assert result["ok"] is True
    assert result["planId"] == guard.status().plan_id
    assert result["steps"][0].startswith("github_list_issues with repo =")
    assert broken == {
        "ok": False,
        "code": INVALID_PLAN,
        "detail": "the arguments are not valid JSON",
        "errors": [],
    }
    assert invalid["code"] == INVALID_PLAN
    assert {"path": "goal", "detail": "is required"} in invalid["errors"]


# --- call, decorator, status ---------------------------------------------------------------


def test_call_runs_the_tool_only_when_allowed(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())
    ran: list[dict] = []

    def list_issues(**args):
        ran.append(args)
        return ["#1"]

    assert guard.call("github_list_issues", REPO, list_issues) == ["#1"]
    with pytest.raises(CallBlocked) as blocked:
        guard.call("github_list_issues", {"repo": "acme/secret"}, list_issues)

    assert ran == [REPO]
    assert blocked.value.code == Decision.NOT_IN_PLAN
    assert blocked.value.decision.code == Decision.NOT_IN_PLAN


def test_a_decorated_tool_is_checked_with_its_arguments_by_name(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())

    @guard.tool("github_get_issue")
    def get_issue(repo: str, number: int = 1) -> dict:
        return {"repo": repo, "number": number}

    assert get_issue("acme/public-app", number=5) == {"repo": "acme/public-app", "number": 5}
    assert get_issue(repo="acme/public-app") == {"repo": "acme/public-app", "number": 1}
    with pytest.raises(CallBlocked):
        get_issue("acme/other")
    assert guard.status().steps[1].used == 2
    assert guard.status().steps[1].status == "completed"


def test_status_tells_which_required_steps_have_not_run(make_any_guard):
    guard = make_any_guard()
    guard.declare(
        plan_document(
            steps=[
                {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}},
                {"tool": "github_get_issue", "required": True},
                {"tool": "send_email", "required": True},
            ]
        )
    )
    assert guard.status().required_pending == (1, 2)
    assert not guard.status().complete

    guard.check("github_get_issue", {"repo": "acme/public-app"})
    status = guard.status()

    assert status.state == "active"
    assert status.required_pending == (2,)
    assert [(s.index, s.tool, s.used, s.max_calls, s.required) for s in status.steps] == [
        (0, "github_list_issues", 0, 20, False),
        (1, "github_get_issue", 1, 20, True),
        (2, "send_email", 0, 20, True),
    ]
    guard.check("send_email", {"to": "alice@acme.dev"})
    assert guard.status().complete


def test_after_end_plan_calls_are_no_plan(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())

    guard.end_plan()

    assert guard.check("github_list_issues", REPO).code == Decision.NO_PLAN


def test_deciding_calls_never_touches_the_network(make_any_guard, switchboard):
    guard = make_any_guard()
    guard.declare(plan_document(steps=[{"tool": "github_get_issue", "maxCalls": 1000}]))
    requests = len(switchboard.paths)

    for number in range(500):
        guard.check("github_get_issue", {"repo": "acme/app", "number": number})
    guard.check("send_email", {})

    assert len(switchboard.paths) == requests
    assert PlanToken.objects.count() == 1


def test_an_application_using_check_alone_marks_a_step_completed(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())

    allowed = guard.check("github_list_issues", REPO)
    running = guard.status().steps[0].status
    guard.completed(allowed)
    guard.completed(guard.check("send_email", {}))  # a blocked decision changes nothing

    assert running == "in_progress"
    assert [step.status for step in guard.status().steps] == ["completed", "pending"]


def test_after_output_even_an_invalid_plan_is_refused_as_declared_too_late(make_any_guard):
    guard = make_any_guard()
    guard.declare(plan_document())
    guard.check("github_list_issues", REPO)

    result = guard.handle_declare_plan({"version": 2})

    assert result["code"] == DECLARE_AFTER_OUTPUT
