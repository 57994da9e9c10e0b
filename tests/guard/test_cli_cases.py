"""A policy's cases file is declared once (guard.policy_cases): the validator names every bad
path, and the JSON Schema given to editors accepts and refuses the same files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from guard.errors import DocumentInvalid
from guard.policy import validate_policy
from guard.policy_cases import cases_json_schema, run_case, validate_cases
from tests.conftest import PLAN, POLICY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy_tests"
SCHEMA = Draft202012Validator(cases_json_schema())


def example_cases() -> dict:
    return json.loads((EXAMPLE / "cases.json").read_text())


def test_the_schema_is_a_valid_json_schema():
    Draft202012Validator.check_schema(cases_json_schema())


def test_the_example_is_valid_for_both():
    assert not list(SCHEMA.iter_errors(example_cases()))
    assert len(validate_cases(example_cases()).cases) == len(example_cases()["cases"])


PLAN_CASE = {"name": "issued", "plan": PLAN, "expect": {"plan": "issued"}}
CALL_CASE = {
    "name": "a call",
    "plan": PLAN,
    "call": {"tool": "github_list_issues", "args": {}},
    "expect": {"decision": "allowed"},
}


@pytest.mark.parametrize(
    ("document", "paths"),
    [
        ([], [""]),
        ({"cases": [PLAN_CASE]}, ["version"]),
        ({"version": 1, "cases": []}, ["cases"]),
        ({"version": 1, "cases": [PLAN_CASE], "extra": 1}, ["extra"]),
        ({"version": 1, "cases": [{**PLAN_CASE, "expect": {"plan": "maybe"}}]}, []),
        (
            {"version": 1, "cases": [{**PLAN_CASE, "expect": {"decision": "allowed"}}]},
            ["cases[0].expect.decision", "cases[0].expect.plan"],
        ),
        ({"version": 1, "cases": [{**CALL_CASE, "expect": {"decision": "ok"}}]}, []),
        ({"version": 1, "cases": [{**CALL_CASE, "call": {"args": {}}}]}, []),
        ({"version": 1, "cases": [{**PLAN_CASE, "before": []}]}, []),
        ({"version": 1, "cases": [{**PLAN_CASE, "plan": 3}]}, []),
        ({"version": 1, "cases": [{**PLAN_CASE, "groups": ["ok", ""]}]}, []),
        (
            {"version": 1, "cases": [{**CALL_CASE, "expect": {"decision": "allowed", "step": -1}}]},
            [],
        ),
    ],
)
def test_a_bad_file_is_refused_by_both_with_paths(document, paths):
    with pytest.raises(DocumentInvalid) as refused:
        validate_cases(document)

    assert list(SCHEMA.iter_errors(document)), "the schema accepts what the validator refuses"
    found = [error.path for error in refused.value.errors]
    assert found
    if paths:
        assert sorted(found) == sorted(paths)


def test_a_named_plan_must_exist_and_names_are_unique():
    document = {
        "version": 1,
        "plans": {"known": PLAN},
        "cases": [
            {**PLAN_CASE, "plan": "known"},
            {**PLAN_CASE, "plan": "unknown"},
            {**CALL_CASE, "name": "issued"},
        ],
    }

    with pytest.raises(DocumentInvalid) as refused:
        validate_cases(document)

    assert [(error.path, error.detail) for error in refused.value.errors] == [
        ("cases[1].plan", "names no plan of plans (named: known)"),
        ("cases[2].name", "is also the name of cases[0]"),
    ]


def test_a_case_reports_what_it_expected_and_got():
    policy = validate_policy(POLICY)
    (case,) = validate_cases(
        {
            "version": 1,
            "cases": [
                {
                    **CALL_CASE,
                    "call": {"tool": "github_list_issues", "args": {"repo": "evil/x"}},
                    "expect": {"decision": "allowed", "step": 0},
                }
            ],
        }
    ).cases

    result = run_case(policy, case)

    assert not result.passed
    assert result.expected == {"decision": "allowed", "step": 0}
    assert result.actual == {"decision": "not_in_plan", "step": None}
    assert result.differences() == [
        'decision: expected "allowed", got "not_in_plan"',
        "step: expected 0, got null",
    ]


def test_the_steps_a_person_approves_are_told_as_people_count_them():
    policy = validate_policy(
        {
            "version": 1,
            "default": "deny",
            "rules": [
                {"effect": "allow", "tools": ["github_*"]},
                {"effect": "review", "tools": ["send_email"]},
            ],
        }
    )
    plan = {
        **PLAN,
        "steps": [{"tool": "github_list_issues"}, {"tool": "send_email"}],
    }
    (case,) = validate_cases(
        {
            "version": 1,
            "cases": [{**PLAN_CASE, "plan": plan, "expect": {"plan": "issued", "review": [1]}}],
        }
    ).cases

    result = run_case(policy, case)

    # The expectation compares indexes (from 0); the text for people counts from 1.
    assert result.passed
    assert result.detail == "issued; a person approves step(s) 2 first"
