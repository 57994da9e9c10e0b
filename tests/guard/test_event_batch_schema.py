"""event_batch_json_schema() and validate_event_batch() accept the same batches, wherever JSON
Schema can express a rule (the schema's docstring lists where it cannot)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from guard.decisions import (
    DECISION_CODES,
    MAX_BATCH_SEQUENCE,
    MAX_END_REASON_LENGTH,
    MAX_EVENT_REASON_LENGTH,
    MAX_EVENT_RULE_DESCRIPTION_LENGTH,
    MAX_EVENT_TOOL_LENGTH,
    MAX_EVENTS_PER_BATCH,
    MAX_LOST_PER_BATCH,
    PLAN_OUTCOMES,
    PlanOutcome,
)
from guard.errors import DocumentInvalid
from guard.events import (
    DISPLAY_UPDATE_KEYS,
    END_KEYS,
    EVENT_BATCH_KEYS,
    EVENT_KEYS,
    RULE_KEYS,
    display_update_json,
    event_batch_json,
    event_batch_json_schema,
    guard_event_json,
    plan_end_json,
    validate_event_batch,
)
from guard.policy import MAX_RULES

SCHEMA = event_batch_json_schema()
SCHEMA_VALIDATOR = Draft202012Validator(SCHEMA)
AT = "2026-11-30T09:00:00.250000Z"
DIGEST = "0123456789abcdef" * 4


def accepted_by_the_validator(batch: object) -> bool:
    try:
        validate_event_batch(batch)
    except DocumentInvalid:
        return False
    return True


def one_of(*values: object) -> st.SearchStrategy[Any]:
    return st.sampled_from(values)


def mostly(valid: st.SearchStrategy[Any], wrong: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid nine times in ten, so that whole batches are often valid too."""
    return st.integers(0, 9).flatmap(lambda n: wrong if n == 0 else valid)


@st.composite
def objects(
    draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """An object with some of `fields` (a required one is seldom left out), and now and then
    a key that is not one of them."""
    found: dict[str, Any] = {}
    for key, strategy in fields.items():
        if draw(st.integers(0, 9)) >= (1 if key in required else 5):
            found[key] = draw(strategy)
    if draw(st.integers(0, 9)) == 0:
        found["extra"] = 1
    return found


# Each field: valid values, edges, and values of the wrong type. Left out: what the schema's
# docstring says JSON Schema does not express (1.0 for an integer, a date-time without a zone
# or not ISO 8601, null for an absent stream, seq or list, a message over the size limit).
times = mostly(
    one_of(AT, "2026-11-30T09:00:00+02:00"), one_of("2026-11-30T09:00:00Z" + " " * 30, 5, None)
)
rules = mostly(
    objects(
        {
            "index": mostly(one_of(0, MAX_RULES - 1, None), one_of(MAX_RULES, -1, True, "0")),
            "description": mostly(
                one_of("allow github_*", "d" * MAX_EVENT_RULE_DESCRIPTION_LENGTH),
                one_of("", "d" * (MAX_EVENT_RULE_DESCRIPTION_LENGTH + 1), None, 1),
            ),
        },
        required=("description",),
    )
    | st.none(),
    one_of([], "rule", 0),
)
events = objects(
    {
        "at": times,
        "tool": mostly(
            st.text(min_size=1, max_size=3) | one_of("t" * MAX_EVENT_TOOL_LENGTH),
            one_of("", "t" * (MAX_EVENT_TOOL_LENGTH + 1), 5, None, ["tool"]),
        ),
        "decision": mostly(st.sampled_from(sorted(DECISION_CODES)), one_of("maybe", None, 1)),
        "step": mostly(one_of(0, 1, 7, None), one_of(-1, True, "1")),
        "reason": mostly(
            one_of("", "why", "r" * MAX_EVENT_REASON_LENGTH),
            one_of("r" * (MAX_EVENT_REASON_LENGTH + 1), None, 3),
        ),
        "rule": rules,
        "policyVersion": mostly(one_of(1, 3, None), one_of(0, -1, True, "1")),
        "argsDigest": mostly(one_of("", DIGEST), one_of(DIGEST.upper(), "abc", DIGEST + "0", 1)),
        "args": mostly(one_of({}, {"repo": "acme/app"}), one_of(None, [], "repo")),
        "amounts": mostly(
            one_of({}, {"refunds": 120}, {"b" * 32: 0.25, "c_2-x": 0}),
            one_of(
                {"refunds": -1},
                {"refunds": True},
                {"refunds": "1"},
                {"Refunds": 1},
                {"b" * 33: 1},
                {f"b{index}": 1 for index in range(21)},
                [],
                None,
            ),
        ),
    },
    required=("at", "tool", "decision"),
)
display_updates = objects(
    {
        "at": times,
        "message": mostly(one_of({}, {"sessionUpdate": "plan"}), one_of([], None, "plan")),
    },
    required=("message",),
)
ends = mostly(
    objects(
        {
            "outcome": mostly(st.sampled_from(sorted(PLAN_OUTCOMES)), one_of("done", None, 1)),
            "reason": mostly(
                one_of("", "why", "r" * MAX_END_REASON_LENGTH),
                one_of("r" * (MAX_END_REASON_LENGTH + 1), 2),
            ),
        },
        required=("outcome",),
    ),
    one_of(None, [], "completed"),
)
VALID_EVENT = {"at": AT, "tool": "search", "decision": "allowed", "step": 0}
batches = objects(
    {
        "stream": mostly(
            one_of("a" * 8, "A_b-" * 16), one_of("a" * 7, "a" * 65, "bad stream!", 5, "")
        ),
        "seq": mostly(
            one_of(1, 7, MAX_BATCH_SEQUENCE), one_of(MAX_BATCH_SEQUENCE + 1, 0, -1, True, "1")
        ),
        "lost": mostly(
            one_of(0, 1, MAX_LOST_PER_BATCH), one_of(MAX_LOST_PER_BATCH + 1, -1, None, False, "1")
        ),
        "events": mostly(
            st.lists(events, max_size=3),
            one_of("events", {}, [VALID_EVENT] * (MAX_EVENTS_PER_BATCH + 1)),
        ),
        "displayUpdates": mostly(st.lists(display_updates, max_size=2), one_of("updates", {})),
        "end": ends,
    }
)


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_validator_knows_the_keys_the_schema_declares() -> None:
    event = SCHEMA["properties"]["events"]["items"]
    assert set(SCHEMA["properties"]) == EVENT_BATCH_KEYS
    assert set(event["properties"]) == EVENT_KEYS
    assert set(event["properties"]["rule"]["properties"]) == RULE_KEYS
    assert set(SCHEMA["properties"]["end"]["properties"]) == END_KEYS
    assert set(SCHEMA["properties"]["displayUpdates"]["items"]["properties"]) == (
        DISPLAY_UPDATE_KEYS
    )


@settings(max_examples=1500, deadline=None)
@given(batches)
def test_the_schema_accepts_exactly_what_the_validator_accepts(batch: dict[str, Any]) -> None:
    assert SCHEMA_VALIDATOR.is_valid(batch) is accepted_by_the_validator(batch), list(
        SCHEMA_VALIDATOR.iter_errors(batch)
    )


@given(st.lists(events, max_size=3), st.lists(display_updates, max_size=2))
def test_a_batch_of_valid_parts_is_judged_alike(events: list, updates: list) -> None:
    batch = {"events": events, "displayUpdates": updates}
    assert SCHEMA_VALIDATOR.is_valid(batch) is accepted_by_the_validator(batch)


def test_every_batch_the_reporter_builds_satisfies_the_schema() -> None:
    batch = event_batch_json(
        events=[
            guard_event_json(at=0.25, tool="search", decision="allowed", step=0),
            guard_event_json(
                at=1.5,
                tool=["not", "a", "name"],
                decision="not_in_plan",
                step=None,
                reason="r" * (MAX_EVENT_REASON_LENGTH + 10),
                args_digest=DIGEST,
                args={"q": 1},
                rule_index=None,
                rule_description="",
                policy_version=3,
            ),
            guard_event_json(
                at=2.0, tool="refund", decision="allowed", step=1, amounts={"refunds": 12.5}
            ),
        ],
        display_updates=[display_update_json(at=2.0, message={"sessionUpdate": "plan"})],
        stream="stream-0123456789",
        seq=4,
        lost=MAX_LOST_PER_BATCH + 5,
        end=plan_end_json(outcome=PlanOutcome.ENDED, reason="stopped"),
    )

    assert SCHEMA_VALIDATOR.is_valid(batch), list(SCHEMA_VALIDATOR.iter_errors(batch))
    assert accepted_by_the_validator(batch)


@pytest.mark.parametrize(
    "batch",
    [
        # Rules JSON Schema does not express: validate_event_batch is the authority.
        {"events": [{**VALID_EVENT, "at": "yesterday"}]},
        {"events": [{**VALID_EVENT, "at": "2026-11-30T09:00:00"}]},
        {"lost": 1.0},
        {"displayUpdates": [{"message": {"text": "x" * 70_000}}]},
        {"events": [{**VALID_EVENT, "amounts": {"refunds": float("inf")}}]},
    ],
)
def test_rules_beyond_json_schema_are_enforced_by_the_validator(batch: object) -> None:
    assert SCHEMA_VALIDATOR.is_valid(batch)
    assert not accepted_by_the_validator(batch)


def test_a_step_beyond_the_plan_is_refused_by_the_validator_alone() -> None:
    batch = {"events": [{**VALID_EVENT, "step": 3}]}

    assert SCHEMA_VALIDATOR.is_valid(batch)
    with pytest.raises(DocumentInvalid):
        validate_event_batch(batch, steps=2)
