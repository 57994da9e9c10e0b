"""The decision log: batches reach the real events endpoint, off the call path, each stored
once; an unreachable control plane is retried in order, and a refusal for good costs
counted (and reported) decisions, never a call. The queue's bound and the loss it causes
are in test_reporter_delivery."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.agent.http import ControlPlaneClient, ControlPlaneError
from guard.agent.reporter import DecisionReporter, args_digest, canonical_args
from guard.agent.session import CallDecision
from guard.decisions import (
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    Decision,
)
from guard.errors import DocumentInvalid
from guard.events import validate_event_batch
from kernel.problems import Code
from plans.models import PlanDisplayUpdate, PlanEvent, PlanEventBatch
from tests.conftest import plan_document

REPO = {"repo": "acme/public-app"}
PLAN = plan_document(
    steps=[
        {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 1},
        {"tool": "github_get_issue"},
    ]
)


def digest(args: dict[str, Any]) -> str:
    return hashlib.sha256(rfc8785.dumps(args)).hexdigest()


def decided(
    code: Decision = Decision.ALLOWED,
    step: int | None = 0,
    reason: str = "",
    rule: int | None = None,
    rule_description: str | None = None,
) -> CallDecision:
    return CallDecision(code, reason, step, rule, rule_description)


ALLOWED = decided()
NOT_IN_PLAN = decided(Decision.NOT_IN_PLAN, None, "no step of the plan calls t")


def test_decisions_and_display_updates_arrive_at_the_events_endpoint(live_any_guard):
    shown: list[dict[str, Any]] = []
    guard = live_any_guard(acp_sink=shown.append)
    declared = guard.declare(PLAN)
    calls = [
        ("github_list_issues", {**REPO, "state": "open"}),  # allowed, step 0
        ("github_list_issues", REPO),  # max_calls_exceeded
        ("github_get_issue", {"repo": "evil/app"}),  # policy_denied
        ("send_email", {"to": "x@evil.example"}),  # not_in_plan
        ("github_get_issue", {"repo": "acme/app", "blob": b"\x00"}),  # allowed, not JSON
        (["not", "a", "name"], {}),  # invalid_arguments
    ]
    decisions = [guard.check(tool, args) for tool, args in calls]
    guard.close()

    events = list(PlanEvent.objects.filter(plan_id=declared.plan_id).order_by("id"))
    assert [(e.tool, e.decision, e.step) for e in events] == [
        ("github_list_issues", Decision.ALLOWED, 0),
        ("github_list_issues", Decision.MAX_CALLS_EXCEEDED, 0),
        ("github_get_issue", Decision.POLICY_DENIED, 1),
        ("send_email", Decision.NOT_IN_PLAN, None),
        ("github_get_issue", Decision.ALLOWED, 1),
        ("['not', 'a', 'name']", Decision.INVALID_ARGUMENTS, None),
    ]
    assert [e.decision for e in events] == [d.code.value for d in decisions]
    assert events[0].args_digest == digest({**REPO, "state": "open"})
    assert events[3].args_digest == digest({"to": "x@evil.example"})
    assert events[4].args_digest == ""  # arguments that are not JSON have no digest
    assert events[0].reason == decisions[0].reason  # allowed: its step and rule
    # The rule that decided, and the version of the policy snapshot that decided.
    assert (events[0].rule_index, events[0].rule_description) == (0, "allow github_* (rules[0])")
    assert events[2].rule_description == "the policy default (deny)"
    assert (events[3].rule_index, events[3].rule_description) == (None, "")  # not consulted
    assert {event.policy_version for event in events} == {declared.policy["version"]}
    assert "no step of the plan calls send_email" in events[3].reason
    assert all(event.args is None for event in events)  # the team keeps digests only
    stored = list(
        PlanDisplayUpdate.objects.filter(plan_id=declared.plan_id)
        .order_by("id")
        .values_list("message", flat=True)
    )
    assert stored == [message["params"] for message in shown]
    assert stored[-1]["update"]["sessionUpdate"] == "plan_removed"
    stats = guard.reporter_stats()
    assert (stats.sent, stats.dropped, stats.queued) == (len(events) + len(stored), 0, 0)
    batches = list(PlanEventBatch.objects.filter(plan_id=declared.plan_id).order_by("id"))
    assert [batch.seq for batch in batches] == list(range(1, len(batches) + 1))
    assert batches[-1].end_outcome == "completed"  # the plan has no required step


def test_arguments_themselves_are_reported_when_the_team_asks(live_any_guard, team):
    team.log_call_arguments = True
    team.save(update_fields=["log_call_arguments"])
    guard = live_any_guard()
    declared = guard.declare(PLAN)

    guard.check("github_get_issue", {"repo": "acme/app", "number": 7})
    guard.check("github_get_issue", {"repo": "acme/app", "blob": b"\x00"})
    guard.flush()

    assert declared.report_arguments is True
    assert list(
        PlanEvent.objects.filter(plan_id=declared.plan_id).order_by("id").values_list("args")
    ) == [({"repo": "acme/app", "number": 7},), (None,)]


def test_recording_never_waits_for_a_hanging_control_plane():
    release = threading.Event()
    posting = threading.Event()

    def hanging_post(plan_id: str, batch: dict) -> None:
        posting.set()
        release.wait()

    reporter = DecisionReporter(hanging_post, max_queue=100, batch_size=10, interval=0.01)
    reporter.record("p", 0.0, "t", ALLOWED, {}, False)
    assert posting.wait(30)  # the reporter thread is now stuck in the network

    recorder = threading.Thread(
        target=lambda: [
            reporter.record("p", 0.0, "t", ALLOWED, {"n": n}, False) for n in range(5000)
        ]
    )
    recorder.start()
    recorder.join(60)
    finished_while_hanging = not recorder.is_alive()
    during = reporter.stats()
    release.set()
    reporter.close()
    after = reporter.stats()

    assert finished_while_hanging
    assert during.queued == 1 + 100  # the batch in flight, and the full queue
    assert during.dropped == 5001 - 1 - 100
    assert after.sent + after.dropped == 5001
    assert after.queued == 0


def test_batches_respect_the_endpoints_limits_and_group_by_plan():
    batches: list[tuple[str, dict]] = []
    reporter = DecisionReporter(
        lambda plan_id, batch: batches.append((plan_id, batch)), batch_size=500, interval=60
    )
    for n in range(1200):
        reporter.record("p1" if n % 3 else "p2", 1_800_000_000.5, "t", ALLOWED, {}, False)
    for n in range(120):
        reporter.display("p1", 1_800_000_000.0, {"sessionId": "s", "update": {"n": n}})

    assert reporter.flush()
    reporter.close()

    assert all(len(batch.get("events", [])) <= 500 for _, batch in batches)
    assert all(len(batch.get("displayUpdates", [])) <= 50 for _, batch in batches)
    assert sum(len(b.get("events", [])) for plan, b in batches if plan == "p2") == 400
    assert sum(len(b.get("displayUpdates", [])) for _, b in batches) == 120
    assert {batch["stream"] for _, batch in batches} == {reporter.stream}
    for plan in ("p1", "p2"):  # numbered per plan, from 1
        numbers = [batch["seq"] for to, batch in batches if to == plan]
        assert numbers == list(range(1, len(numbers) + 1))
    event = batches[0][1]["events"][0]
    assert event == {
        "at": "2027-01-15T08:00:00.500000Z",
        "tool": "t",
        "decision": Decision.ALLOWED,
        "step": 0,
        "argsDigest": digest({}),
    }
    assert reporter.stats().sent == 1320


def test_another_agents_plan_is_not_found_and_nothing_is_stored(
    live_any_guard, live_server, other_agent
):
    guard = live_any_guard()
    declared = guard.declare(PLAN)
    intruder = ControlPlaneClient(live_server.url, other_agent.api_key)
    reporter = DecisionReporter(intruder.post_events, interval=0.01)

    try:
        intruder.post_events(
            declared.plan_id,
            {
                "events": [
                    {"at": "2026-01-01T00:00:00Z", "tool": "t", "decision": Decision.NOT_IN_PLAN}
                ]
            },
        )
    except ControlPlaneError as error:
        refused = error
    for _ in range(3):
        reporter.record(declared.plan_id, 0.0, "t", NOT_IN_PLAN, {}, False)
    reporter.close()
    intruder.close()

    assert (refused.status, refused.code) == (404, Code.PLAN_NOT_FOUND)
    assert reporter.stats().dropped == 3
    assert reporter.stats().failed_batches == 1
    assert PlanEvent.objects.filter(plan_id=declared.plan_id).count() == 0


def test_args_digest_is_the_rfc8785_sha256():
    args = {"b": [1, 2.0, "é"], "a": {"z": None, "y": True}}

    assert args_digest(args) == hashlib.sha256(rfc8785.dumps(args)).hexdigest()
    assert args_digest({"x": float("nan")}) is None
    assert args_digest({"x": object()}) is None


def test_a_call_without_a_plan_has_no_plan_to_be_reported_to(make_any_guard):
    guard = make_any_guard(report=True)

    decision = guard.check("github_get_issue", REPO)

    assert decision.code == Decision.NO_PLAN
    assert guard.flush()
    stats = guard.reporter_stats()
    assert (stats.sent, stats.dropped, stats.queued) == (0, 0, 0)


awkward_text = st.text(
    st.characters(codec="utf-8")
    | st.sampled_from(["\x00", "\x1f", "\x7f", '"', "\\", "\u2028", "\ue000", "\U0001f600"])
    | st.characters(categories=["Cs"]),
    max_size=6,
)
argument_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats()
    | awkward_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(awkward_text, children, max_size=3)
    ),
    max_leaves=12,
)


# Five times the profile: the fast path must equal rfc8785 on every value, byte for byte.
@settings(max_examples=5 * settings.default.max_examples)
@given(value=argument_values)
def test_the_fast_canonical_form_is_byte_for_byte_rfc8785(value):
    try:
        expected = rfc8785.dumps(value)
    except Exception:
        expected = None

    assert canonical_args(value) == expected


def test_the_agent_may_attach_its_own_acp_updates(live_any_guard):
    guard = live_any_guard()
    declared = guard.declare(PLAN)
    markdown = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "plan_update",
            "plan": {"type": "markdown", "planId": "mine", "content": "# My plan"},
        },
    }

    guard.report_display_update(markdown)
    guard.flush()

    assert list(
        PlanDisplayUpdate.objects.filter(plan_id=declared.plan_id).values_list("message", flat=True)
    ) == [markdown]


def test_the_server_refuses_the_step_of_another_plan_with_the_shared_validator():
    event = {"at": "2026-01-01T00:00:00Z", "tool": "t", "decision": Decision.ALLOWED, "step": 2}

    assert validate_event_batch({"events": [event]}).events[0].step == 2
    with pytest.raises(DocumentInvalid) as refused:
        validate_event_batch({"events": [event]}, steps=2)

    assert [error.path for error in refused.value.errors] == ["events[0].step"]


# The reporter's side of the shape and the server's side are one declaration (guard.events):
# whatever the agent passes in, every batch the reporter posts passes the server's validator.
recorded_calls = st.lists(
    st.tuples(
        st.one_of(awkward_text, st.text(min_size=190, max_size=260), argument_values),
        st.sampled_from(list(Decision)),
        st.integers(min_value=0, max_value=len(PLAN["steps"]) - 1),
        st.one_of(awkward_text, st.text(min_size=490, max_size=600)),
        argument_values,
        st.booleans(),
    ),
    min_size=1,
    max_size=30,
)


@given(calls=recorded_calls, displays=st.integers(min_value=0, max_value=60))
def test_every_batch_the_reporter_posts_passes_the_servers_validator(calls, displays):
    batches: list[tuple[str, dict]] = []
    reporter = DecisionReporter(
        lambda plan_id, batch: batches.append((plan_id, batch)), batch_size=7, interval=60
    )
    for tool, decision, step, reason, args, include_args in calls:
        # A decision that names no step (not_in_plan, no_plan, ...) reports none.
        named = step if decision in {Decision.ALLOWED, Decision.POLICY_DENIED} else None
        rule = named if decision == Decision.ALLOWED else None
        outcome = decided(decision, named, reason, rule, reason or None)
        reporter.record("p", 1_800_000_000.25, tool, outcome, args, include_args, 3)
    for n in range(displays):
        reporter.display("p", 1_800_000_000.0, {"sessionId": "s", "update": {"n": n}})
    assert reporter.flush()
    reporter.close()

    validated = [validate_event_batch(batch, steps=len(PLAN["steps"])) for _, batch in batches]

    assert sum(len(batch.events) for batch in validated) == len(calls)
    assert sum(len(batch.display_updates) for batch in validated) == displays
    assert all(
        len(event.tool) <= MAX_EVENT_TOOL_LENGTH and len(event.reason) <= MAX_EVENT_REASON_LENGTH
        for batch in validated
        for event in batch.events
    )
    assert [event.decision for batch in validated for event in batch.events] == [
        call[1] for call in calls
    ]


def test_a_full_batch_of_the_reporter_is_within_the_servers_limit():
    batches: list[dict] = []
    reporter = DecisionReporter(
        lambda plan_id, batch: batches.append(batch), batch_size=MAX_EVENTS_PER_BATCH, interval=60
    )
    for _ in range(MAX_EVENTS_PER_BATCH + 1):
        reporter.record("p", 0.0, "t", NOT_IN_PLAN, {}, False)
    assert reporter.flush()
    reporter.close()

    assert [len(validate_event_batch(batch).events) for batch in batches] == [
        MAX_EVENTS_PER_BATCH,
        1,
    ]
