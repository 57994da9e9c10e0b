"""The cells an admin export writes: formulas defused, values in one spelling."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from kernel.admin_export import column_value, csv_cell, csv_lines, json_lines


@pytest.mark.parametrize("text", ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "\tx", "\rx"])
def test_a_text_cell_that_a_spreadsheet_would_evaluate_is_quoted(text: str) -> None:
    assert csv_cell(text) == "'" + text


def test_numbers_and_plain_text_are_left_alone() -> None:
    assert csv_cell(-5) == "-5"
    assert csv_cell(1.5) == "1.5"
    assert csv_cell("plan_refused") == "plan_refused"
    assert csv_cell(None) == ""
    assert csv_cell(True) == "true"


def test_json_in_a_cell_is_compact_and_quoted_when_it_could_be_a_formula() -> None:
    assert csv_cell({"b": 1, "a": "x"}) == '{"a": "x", "b": 1}'
    assert csv_cell(["=cmd"]) == '["=cmd"]'


def test_a_datetime_cell_is_iso_8601() -> None:
    moment = datetime(2026, 12, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert csv_cell(moment) == "2026-12-01T02:03:04.000005+00:00"


def test_an_attribute_path_follows_relations_and_stops_at_none() -> None:
    row = SimpleNamespace(agent=SimpleNamespace(name="bot"), policy=None)
    assert column_value(row, "agent.name") == "bot"
    assert column_value(row, "policy.slug") is None
    assert column_value(row, lambda r: r.agent.name.upper()) == "BOT"


def test_csv_and_json_lines_carry_the_same_rows() -> None:
    columns = (("user", "user"), ("details", "details"))
    rows = [
        SimpleNamespace(user="=HYPERLINK()", details={"errors": [1]}),
        SimpleNamespace(user="bob", details={}),
    ]
    parsed = list(csv.reader(io.StringIO("".join(csv_lines(columns, rows)))))
    assert parsed == [["user", "details"], ["'=HYPERLINK()", '{"errors": [1]}'], ["bob", "{}"]]
    documents = [json.loads(line) for line in json_lines(columns, rows)]
    assert documents == [
        {"user": "=HYPERLINK()", "details": {"errors": [1]}},
        {"user": "bob", "details": {}},
    ]
