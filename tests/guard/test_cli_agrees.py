"""`plangate check` answers what the control plane's policy simulator answers (and so what
the guard's own Decider answers, which the simulator's tests prove against a real guard):
for generated policies, plans, members and calls, the same plan refusal, or the same call
decision, step, rule and reason. The command runs in-process here (`guard.cli.main`):
hundreds of examples would otherwise each start an interpreter; test_cli.py runs it as a
subprocess."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from guard.cli import main
from policies.services import policy_set
from rehearsal.simulator import simulate_call

from .strategies import policies

# Tools the generated policies' globs (alphabet "ab_-*?") can match, and one they cannot.
TOOLS = ["a", "b", "ab", "a_b", "ba-a"]
ARGUMENTS = {
    "repo": st.sampled_from([{"eq": "a"}, {"eq": "b"}, {"glob": "a*"}, {"in": ["a", 1]}]),
    "n": st.sampled_from([{"lte": 2}, {"gte": 1}, {"eq": 1}]),
}


@st.composite
def plan_steps(draw: st.DrawFn) -> list[dict[str, Any]]:
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        step: dict[str, Any] = {"tool": draw(st.sampled_from(TOOLS))}
        names = draw(st.lists(st.sampled_from(sorted(ARGUMENTS)), unique=True, max_size=2))
        if names:
            step["args"] = {name: draw(ARGUMENTS[name]) for name in names}
        if draw(st.booleans()):
            step["maxCalls"] = draw(st.integers(1, 40))
        steps.append(step)
    return steps


calls = st.tuples(
    st.sampled_from([*TOOLS, "zz"]),
    st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "repo": st.sampled_from(["a", "b", "ab", 1]),
                "n": st.sampled_from([0, 1, 2, 3, "1"]),
            },
        ),
        st.just([]),
    ),
)

# The guard's reason names the policy's version number; offline the file has none (0).
_VERSION = re.compile(r"policy version \d+")


def same_reason(reason: str) -> str:
    return _VERSION.sub("policy version N", reason)


def plangate_check(tmp: Path, *args: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["check", "--json", *args])
    return status, json.loads(out.getvalue())


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    policy=policies(),
    steps=plan_steps(),
    call=calls,
    sre=st.booleans(),
)
def test_plangate_check_agrees_with_the_simulator(
    team, member, sre_member, tmp_path, policy, steps, call, sre
):
    version = policy_set(team=team, slug="default", document=policy)
    person = sre_member if sre else member
    role = person.role.name if person.role else None
    plan = {"version": 1, "goal": "generated", "user": person.email, "steps": steps}
    tool, arguments = call
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    member_options = [f"--group={group}" for group in person.group_names()]
    if role is not None:
        member_options.append(f"--role={role}")

    status, answer = plangate_check(
        tmp_path,
        f"--plan={tmp_path / 'plan.json'}",
        f"--policy={tmp_path / 'policy.json'}",
        *member_options,
        tool,
        json.dumps(arguments),
    )
    simulated = simulate_call(
        version=version, member=person, document=plan, tool=tool, args=arguments
    )

    event(simulated.plan.decision if simulated.guard is None else simulated.guard.code.value)
    assert answer["plan"]["decision"] == simulated.plan.decision
    if simulated.guard is None:
        assert status == 1
        assert answer["call"] is None
        # A refusal names the argument that no rule lets through, else the step (0055).
        assert [error["path"] for error in answer["plan"]["errors"]] == [
            f"plan.{step.path or f'steps[{step.index}]'}" for step in simulated.plan.denials
        ]
        return
    decision = simulated.guard
    call_answer = answer["call"]
    assert status == (0 if decision.allowed else 1)
    assert (
        call_answer["decision"],
        call_answer["step"],
        call_answer["rule"],
        call_answer["ruleDescription"],
        same_reason(call_answer["reason"]),
    ) == (
        decision.code.value,
        decision.step,
        decision.rule,
        decision.rule_description,
        same_reason(decision.reason),
    )
    assert answer["plan"]["review"] == [
        {"path": f"plan.{review.path}", "tool": review.tool, "rule": review.rule}
        for review in simulated.plan.reviews
    ]
