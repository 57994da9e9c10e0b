"""The batch's validation (guard.events.validate_event_batch) names every bad field of an
event by its path, whether the event has unknown fields, lacks required ones, or both; a
valid event costs no error building (its checks test before they build)."""

from __future__ import annotations

from typing import Any

import pytest

from guard.errors import DocumentInvalid
from guard.events import validate_event_batch


def event(**changes: Any) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "at": "2026-11-30T09:00:00.250Z",
        "tool": "github_list_issues",
        "decision": "allowed",
        "step": 0,
        "rule": {"index": 0, "description": "allow github_* (rules[0])"},
    }
    wire.update(changes)
    return {key: value for key, value in wire.items() if value is not None}


def errors_of(*events: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(DocumentInvalid) as raised:
        validate_event_batch({"events": list(events)}, steps=2)
    return [(error.path, error.detail) for error in raised.value.errors]


def test_valid_events_are_accepted_as_they_came() -> None:
    batch = validate_event_batch({"events": [event(), event(step=1, rule=None)]}, steps=2)

    assert [(item.tool, item.step) for item in batch.events] == [
        ("github_list_issues", 0),
        ("github_list_issues", 1),
    ]
    assert batch.events[0].rule is not None and batch.events[0].rule.index == 0
    assert batch.events[1].rule is None


def test_an_unknown_field_of_an_event_is_named_by_its_path() -> None:
    assert errors_of(event(), event(regx="x")) == [("events[1].regx", "unknown field")]


def test_each_missing_required_field_is_named_in_order() -> None:
    wire = event()
    del wire["at"], wire["decision"]

    assert errors_of(wire) == [
        ("events[0].at", "this field is required"),
        ("events[0].decision", "this field is required"),
    ]


def test_unknown_and_missing_fields_are_both_named_unknown_first() -> None:
    wire = event(extra=1)
    del wire["tool"]

    assert errors_of(wire) == [
        ("events[0].extra", "unknown field"),
        ("events[0].tool", "this field is required"),
    ]


def test_unknown_fields_of_a_rule_are_named_sorted() -> None:
    wire = event(rule={"index": 0, "description": "d", "zeta": 1, "alpha": 2})

    assert errors_of(wire) == [
        ("events[0].rule.alpha", "unknown field"),
        ("events[0].rule.zeta", "unknown field"),
    ]
