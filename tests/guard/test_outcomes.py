"""The SEP-2643 structured denial of a blocked call (guard.agent.outcomes): its shape for
every code, and a remediation step that is a valid plan step whose addition admits the call."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guard.agent.errors import GuardError
from guard.agent.outcomes import (
    PLAN_STEP_HINT,
    admitting_step,
    authorization_context_id,
    authorization_denial,
    blocked_text,
    declare_plan_outcome,
)
from guard.agent.session import NO_PLAN, CallDecision
from guard.agent.tools import declare_plan_result
from guard.decisions import Decision
from guard.gateway.results import declare_plan_call_result
from guard.offline import call_decide, simulated_token
from guard.plan import validate_plan
from guard.policy import validate_policy
from tests.guard.strategies import argument_names, json_values, plans, tool_names
from tests.guard.strategies_v2 import v2_plans

ALLOW_ALL = validate_policy({"version": 1, "default": "allow", "rules": []})
PLAN_CHANGE_CODES = {
    Decision.NO_PLAN,
    Decision.NOT_IN_PLAN,
    Decision.MAX_CALLS_EXCEEDED,
    Decision.UNEXPECTED_ARGUMENT,
}
# Every blocked code but invalid_arguments, with its remediation posture.
POSTURES = {
    Decision.NO_PLAN: "available",
    Decision.NOT_IN_PLAN: "available",
    Decision.MAX_CALLS_EXCEEDED: "available",
    Decision.UNEXPECTED_ARGUMENT: "available",
    Decision.APPROVAL_PENDING: "available",
    Decision.OUT_OF_ORDER: "available",
    Decision.TOKEN_EXPIRED: "available",
    Decision.POLICY_DENIED: "unavailable",
    Decision.BUDGET_EXCEEDED: "unavailable",
    Decision.PLAN_REVOKED: "unavailable",
    Decision.PLAN_EXPIRED: "unavailable",
    Decision.TOKEN_INVALID: "unavailable",
    Decision.USER_DISABLED: "unavailable",
    Decision.AGENT_DISABLED: "unavailable",
}
PLAN_ID = "01JD0000000000000000000000"
APPROVAL_URL = "https://plangate.example/approvals/01JD0000000000000000000000"


def test_every_blocked_code_but_invalid_arguments_has_a_posture_here():
    blocked = {
        code for code in Decision if code not in (Decision.ALLOWED, Decision.INVALID_ARGUMENTS)
    }
    assert set(POSTURES) == blocked


@pytest.mark.parametrize("code", sorted(POSTURES, key=str))
def test_each_blocked_code_gets_the_envelope_with_its_posture(code):
    decision = CallDecision(
        code, "why it was blocked", step=0 if code is not Decision.NO_PLAN else None
    )
    envelope = authorization_denial(
        decision, tool="echo", arguments={"text": "hi"}, plan_id=PLAN_ID, approval_url=APPROVAL_URL
    )

    assert envelope is not None
    assert envelope["reason"] == "insufficient_authorization"
    assert envelope["remediation"] == POSTURES[code]
    assert envelope["code"] == code.value
    assert envelope["detail"] == blocked_text(decision)
    assert envelope["authorizationContextId"].startswith("authzctx_")
    hints = envelope.get("remediationHints", [])
    if code in PLAN_CHANGE_CODES:
        assert hints == [
            {
                "type": PLAN_STEP_HINT,
                "step": {"tool": "echo", "args": {"text": {"eq": "hi"}}, "maxCalls": 1},
            }
        ]
    elif code is Decision.APPROVAL_PENDING:
        assert hints == [{"type": "url", "url": APPROVAL_URL}]
    else:
        assert hints == []


def test_a_plan_awaiting_approval_with_no_page_named_is_still_remediable_without_a_hint():
    decision = CallDecision(Decision.APPROVAL_PENDING, "waits")
    envelope = authorization_denial(decision, tool="echo", arguments={}, plan_id=PLAN_ID)

    assert envelope is not None
    assert envelope["remediation"] == "available"
    assert "remediationHints" not in envelope


def test_allowed_and_malformed_calls_carry_no_denial():
    allowed = CallDecision(Decision.ALLOWED, "", step=0)
    malformed = CallDecision(
        Decision.INVALID_ARGUMENTS, "the call's arguments must be a JSON object"
    )

    assert authorization_denial(allowed, tool="echo", arguments={}) is None
    assert authorization_denial(malformed, tool="echo", arguments=[]) is None


def test_a_call_no_plan_could_hold_gets_no_step_but_stays_remediable():
    # A tool name the plan schema refuses: no step can name it.
    envelope = authorization_denial(NO_PLAN, tool="files.list", arguments={})

    assert envelope is not None
    assert envelope["remediation"] == "available"
    assert "remediationHints" not in envelope
    assert admitting_step("files.list", {}) is None


def test_the_context_id_is_stable_and_names_the_plan_the_call_and_the_decision():
    def context(decision: CallDecision = NO_PLAN, **changes: Any) -> str:
        call: dict[str, Any] = {"tool": "echo", "arguments": {"text": "hi"}, "plan_id": PLAN_ID}
        call.update(changes)
        return authorization_context_id(decision, **call)

    assert context() == context()
    assert context() == context(arguments={"text": "hi"})  # the same call, another object
    others = {
        context(plan_id=None),
        context(tool="add"),
        context(arguments={"text": "bye"}),
        context(CallDecision(Decision.NOT_IN_PLAN, "x")),
    }
    assert context() not in others
    assert len(others) == 4
    # Not JSON (a non-finite number): still an id.
    assert context(arguments={"n": float("nan")}).startswith("authzctx_")


def token_for(plan: dict[str, Any]):
    return simulated_token(plan=validate_plan(plan), policy=ALLOW_ALL, role=None, groups=())


def with_step(plan: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(plan)
    changed["steps"] = [*changed["steps"], step]
    return changed


calls = st.tuples(tool_names, st.dictionaries(argument_names, json_values, max_size=3))


def holds(condition: object) -> None:
    assert condition


def admits(
    plan: dict[str, Any],
    tool: str,
    arguments: dict[str, Any],
    repeat: int,
    given_that: Callable[[object], object] = assume,
) -> None:
    """The plan blocks the call (made `repeat` times) for a reason a plan change answers;
    the remediation's step is a valid step, and the plan with it allows the same calls."""
    sequence = [(tool, arguments)] * repeat
    decisions = call_decide(token_for(plan), sequence)
    blocked = [i for i, decision in enumerate(decisions) if not decision.allowed]
    given_that(blocked and decisions[blocked[0]].code in PLAN_CHANGE_CODES)
    first = blocked[0]
    envelope = authorization_denial(
        decisions[first], tool=tool, arguments=arguments, plan_id=PLAN_ID
    )
    assert envelope is not None
    assert envelope["remediation"] == "available"
    step = admitting_step(tool, arguments)
    given_that(step is not None)  # an argument value too deep or long for a plan
    assert envelope["remediationHints"] == [{"type": PLAN_STEP_HINT, "step": step}]
    changed = with_step(plan, step)
    validate_plan(changed)  # a valid plan, whichever version
    again = call_decide(token_for(changed), sequence)
    assert again[first].allowed


@settings(max_examples=150, deadline=None)
@given(plan=plans(max_steps=4), call=calls, repeat=st.integers(min_value=1, max_value=3))
def test_the_plan_with_the_remediation_step_admits_the_call(plan, call, repeat):
    tool, arguments = call
    admits(plan, tool, arguments, repeat)


@settings(max_examples=150, deadline=None)
@given(
    plan=v2_plans(max_steps=4),
    call=calls,
    repeat=st.integers(min_value=1, max_value=3),
    data=st.data(),
)
def test_a_version_2_plan_with_the_remediation_step_admits_the_call(plan, call, repeat, data):
    tool, arguments = call
    # Often a tool the plan names, so that max_calls_exceeded and unexpected_argument come up.
    if data.draw(st.booleans()):
        tool = data.draw(st.sampled_from([step["tool"] for step in plan["steps"]]))
    admits(plan, tool, arguments, repeat)


def test_a_spent_step_is_answered_with_one_more_step_for_the_call():
    plan = {
        "version": 1,
        "goal": "Echo once",
        "user": "alice@acme.dev",
        "steps": [{"tool": "echo", "args": {"text": {"eq": "hi"}}, "maxCalls": 1}],
    }
    admits(plan, "echo", {"text": "hi"}, 2, holds)


def test_a_closed_step_is_answered_with_a_step_taking_the_argument():
    plan = {
        "version": 2,
        "goal": "Echo",
        "user": "alice@acme.dev",
        "steps": [{"tool": "echo", "args": {"text": {"eq": "hi"}}, "additionalArgs": False}],
    }
    decisions = call_decide(token_for(plan), [("echo", {"text": "hi", "loud": True})])
    assert decisions[0].code is Decision.UNEXPECTED_ARGUMENT
    admits(plan, "echo", {"text": "hi", "loud": True}, 1, holds)


def test_a_refused_declaration_reads_the_same_through_the_library_and_the_gateway():
    def refuse(plan: object) -> Any:
        raise GuardError("policy_denied", "step 1 (delete_repo) is denied by the policy")

    answer = declare_plan_result(refuse, {"version": 1})
    text, refused = declare_plan_outcome(answer)
    result = declare_plan_call_result(answer, modern=False)

    assert refused is True
    assert text.startswith("policy_denied: step 1 (delete_repo) is denied by the policy\n")
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": text}]
    assert result["structuredContent"] == answer
