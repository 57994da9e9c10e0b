"""JSON for people has one home, kernel.json_format, and never raises on what an
agent sent."""

from __future__ import annotations

import json

from kernel.json_format import compact_json, pretty_json, readable_json


def test_readable_json_keeps_what_fits_on_one_line():
    document = {"rules": [{"name": "read", "tools": ["github_*"]}], "default": "deny"}

    assert readable_json(document) == json.dumps(document, separators=(", ", ": "))
    assert readable_json(document, width=50) == (
        '{\n  "rules": [\n    {"name": "read", "tools": ["github_*"]}\n  ],\n  "default": "deny"\n}'
    )
    assert json.loads(readable_json(document, width=10)) == document


def test_compact_json_sorts_keys_and_pretty_json_keeps_their_order():
    assert compact_json({"b": 1, "a": "é"}) == '{"a": "é", "b": 1}'
    assert pretty_json({"b": 1, "a": "é"}) == '{"b": 1, "a": "é"}'


def test_what_json_cannot_hold_is_shown_as_its_repr():
    value = {"when": {1, 2}}

    assert compact_json(value) == repr(value)
    assert pretty_json(value) == repr(value)
    assert pretty_json(float("nan")) == "NaN"
