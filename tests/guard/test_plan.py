"""Plan validation, normalisation, hashing and the compiled plan."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.errors import DocumentInvalid
from guard.plan import (
    DEFAULT_MAX_CALLS,
    MAX_GOAL_LENGTH,
    MAX_STEPS,
    CompiledPlan,
    plan_hash,
    validate_plan,
)

from .strategies import plans, wild_values

DESIGN_EXAMPLE = {
    "version": 1,
    "goal": "Summarise open issues",
    "user": "alice@acme.dev",
    "steps": [
        {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}, "maxCalls": 3},
        {"tool": "github_get_issue", "args": {"repo": {"eq": "acme/public-app"}}},
    ],
}


def plan_with(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(DESIGN_EXAMPLE)
    document.update(changes)
    return document


def plan_with_step(**step: Any) -> dict[str, Any]:
    return plan_with(steps=[step])


def error_paths(document: object) -> list[str]:
    with pytest.raises(DocumentInvalid) as caught:
        validate_plan(document)
    return [error.path for error in caught.value.errors]


# --- normalisation -------------------------------------------------------------------------


def test_design_example_is_valid_and_gets_defaults_filled_in() -> None:
    assert validate_plan(DESIGN_EXAMPLE) == {
        "version": 1,
        "goal": "Summarise open issues",
        "user": "alice@acme.dev",
        "steps": [
            {
                "tool": "github_list_issues",
                "args": {"repo": {"eq": "acme/public-app"}},
                "maxCalls": 3,
                "required": False,
            },
            {
                "tool": "github_get_issue",
                "args": {"repo": {"eq": "acme/public-app"}},
                "maxCalls": DEFAULT_MAX_CALLS,
                "required": False,
            },
        ],
    }


def test_step_without_args_gets_an_empty_args_object() -> None:
    plan = validate_plan(plan_with_step(tool="search", required=True))
    assert plan["steps"] == [{"tool": "search", "args": {}, "maxCalls": 20, "required": True}]


def test_validation_returns_a_new_document() -> None:
    document = copy.deepcopy(DESIGN_EXAMPLE)
    plan = validate_plan(document)
    plan["steps"][0]["args"]["repo"]["eq"] = "changed"
    plan["steps"].append({})
    assert document == DESIGN_EXAMPLE


def test_user_is_kept_as_given() -> None:
    assert validate_plan(plan_with(user="Alice@ACME.dev"))["user"] == "Alice@ACME.dev"


@given(plans())
def test_validate_plan_is_idempotent_on_its_output(document: dict[str, Any]) -> None:
    plan = validate_plan(document)
    assert validate_plan(plan) == plan
    assert plan_hash(validate_plan(plan)) == plan_hash(plan)


# --- hashing -------------------------------------------------------------------------------


def test_plan_hash_is_lowercase_hex_sha256_of_the_canonical_json() -> None:
    plan = validate_plan(DESIGN_EXAMPLE)
    # For ASCII strings and small integers, RFC 8785 is sorted compact json.dumps.
    expected = hashlib.sha256(
        json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert plan_hash(plan) == expected
    assert len(expected) == 64


def test_defaults_filled_and_explicit_defaults_hash_alike() -> None:
    implicit = plan_with_step(tool="search")
    explicit = plan_with_step(tool="search", args={}, maxCalls=20, required=False)
    assert plan_hash(validate_plan(implicit)) == plan_hash(validate_plan(explicit))


@given(plans(), st.randoms(use_true_random=False))
def test_key_order_does_not_change_the_hash(document: dict[str, Any], random: Any) -> None:
    def shuffled(value: Any) -> Any:
        if isinstance(value, dict):
            items = list(value.items())
            random.shuffle(items)
            return {key: shuffled(item) for key, item in items}
        if isinstance(value, list):
            return [shuffled(item) for item in value]
        return value

    plan = validate_plan(document)
    assert plan_hash(validate_plan(shuffled(document))) == plan_hash(plan)
    assert plan_hash(shuffled(plan)) == plan_hash(plan)


@given(plans(), st.data())
def test_any_change_of_a_value_changes_the_hash(document: dict[str, Any], data: Any) -> None:
    plan = validate_plan(document)
    changed = copy.deepcopy(plan)
    step = data.draw(st.integers(min_value=0, max_value=len(plan["steps"]) - 1))
    field = data.draw(st.sampled_from(["goal", "user", "tool", "maxCalls", "required", "args"]))
    if field == "goal":
        changed["goal"] += "!"
    elif field == "user":
        changed["user"] = "x" + changed["user"]
    elif field == "tool":
        tool = changed["steps"][step]["tool"]
        changed["steps"][step]["tool"] = ("y" if tool.startswith("x") else "x") + tool[1:]
    elif field == "maxCalls":
        budget = changed["steps"][step]["maxCalls"]
        changed["steps"][step]["maxCalls"] = budget + 1 if budget < 1_000_000 else budget - 1
    elif field == "required":
        changed["steps"][step]["required"] = not changed["steps"][step]["required"]
    else:
        changed["steps"][step]["args"]["pinned-by-test"] = {"eq": "x"}
    assert changed != plan
    assert plan_hash(validate_plan(changed)) != plan_hash(plan)


def test_order_of_steps_changes_the_hash() -> None:
    document = copy.deepcopy(DESIGN_EXAMPLE)
    reordered = plan_with(steps=list(reversed(document["steps"])))
    assert plan_hash(validate_plan(document)) != plan_hash(validate_plan(reordered))


def test_numbers_hash_by_value_not_spelling() -> None:
    integer = plan_with_step(tool="t", args={"n": {"lte": 1}})
    floating = plan_with_step(tool="t", args={"n": {"lte": 1.0}})
    assert plan_hash(validate_plan(integer)) == plan_hash(validate_plan(floating))


# --- validation: the rules of the plan table -----------------------------------------------


def test_misspelt_operator_is_rejected_with_its_full_path() -> None:
    document = plan_with_step(tool="github_get_issue", args={"repo": {"regx": "acme/.*"}})
    assert error_paths(document) == ["steps[0].args.repo.regx"]


def test_unknown_keys_are_rejected_at_every_level() -> None:
    document = plan_with(
        extra=1,
        steps=[{"tool": "t", "maxcalls": 3, "args": {"repo": {"eq": "a", "ne": "b"}}}],
    )
    assert error_paths(document) == [
        "extra",
        "steps[0].maxcalls",
        "steps[0].args.repo.ne",
        "steps[0].args.repo",
    ]


def test_two_operators_in_one_constraint_are_rejected() -> None:
    document = plan_with_step(tool="t", args={"repo": {"eq": "a", "glob": "a*"}})
    assert error_paths(document) == ["steps[0].args.repo"]


def test_bad_regex_is_rejected() -> None:
    document = plan_with_step(tool="t", args={"repo": {"regex": "acme/(.*"}})
    assert error_paths(document) == ["steps[0].args.repo.regex"]


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"version": True}, "version"),
        ({"version": 3}, "version"),
        ({"version": "1"}, "version"),
        ({"version": 1.0}, "version"),
        ({"goal": 5}, "goal"),
        ({"goal": ""}, "goal"),
        ({"goal": "   \n"}, "goal"),
        ({"goal": "x" * (MAX_GOAL_LENGTH + 1)}, "goal"),
        ({"user": "alice"}, "user"),
        ({"user": "alice@acme"}, "user"),
        ({"user": "@acme.dev"}, "user"),
        ({"user": "al ice@acme.dev"}, "user"),
        ({"user": "a@b@acme.dev"}, "user"),
        ({"user": "alice@acme..dev"}, "user"),
        ({"user": "alice@acme.dev."}, "user"),
        ({"user": "alice@acme.dev\n"}, "user"),
        ({"user": "a" * 250 + "@x.io"}, "user"),
        ({"user": ["alice@acme.dev"]}, "user"),
        ({"steps": []}, "steps"),
        ({"steps": {"tool": "t"}}, "steps"),
        ({"steps": [{"tool": "t"}] * (MAX_STEPS + 1)}, "steps"),
        ({"steps": ["t"]}, "steps[0]"),
    ],
)
def test_top_level_rules(changes: dict[str, Any], path: str) -> None:
    assert error_paths(plan_with(**changes)) == [path]


def test_the_limits_themselves_are_accepted() -> None:
    validate_plan(plan_with(goal="x" * MAX_GOAL_LENGTH, steps=[{"tool": "t"}] * MAX_STEPS))
    validate_plan(plan_with_step(tool="t" * 64, maxCalls=1_000_000))


@pytest.mark.parametrize("field", ["version", "goal", "user", "steps"])
def test_required_fields(field: str) -> None:
    document = copy.deepcopy(DESIGN_EXAMPLE)
    del document[field]
    assert error_paths(document) == [field]


@pytest.mark.parametrize(
    ("step", "path"),
    [
        ({}, "steps[0].tool"),
        ({"tool": "github_*"}, "steps[0].tool"),
        ({"tool": "github_?"}, "steps[0].tool"),
        ({"tool": "a.b"}, "steps[0].tool"),
        ({"tool": ""}, "steps[0].tool"),
        ({"tool": "t" * 65}, "steps[0].tool"),
        ({"tool": "tool\n"}, "steps[0].tool"),
        ({"tool": 7}, "steps[0].tool"),
        ({"tool": "t", "args": []}, "steps[0].args"),
        ({"tool": "t", "args": {"repo": "acme/app"}}, "steps[0].args.repo"),
        ({"tool": "t", "maxCalls": 0}, "steps[0].maxCalls"),
        ({"tool": "t", "maxCalls": -1}, "steps[0].maxCalls"),
        ({"tool": "t", "maxCalls": True}, "steps[0].maxCalls"),
        ({"tool": "t", "maxCalls": 2.5}, "steps[0].maxCalls"),
        ({"tool": "t", "maxCalls": "3"}, "steps[0].maxCalls"),
        ({"tool": "t", "maxCalls": 1_000_001}, "steps[0].maxCalls"),
        ({"tool": "t", "required": "yes"}, "steps[0].required"),
        ({"tool": "t", "required": 1}, "steps[0].required"),
        ({"tool": "t", "args": {"n": {"eq": 2**60}}}, "steps[0].args.n.eq"),
    ],
)
def test_step_rules(step: dict[str, Any], path: str) -> None:
    assert error_paths(plan_with_step(**step)) == [path]


def test_glob_tool_name_error_says_it_is_not_a_glob() -> None:
    with pytest.raises(DocumentInvalid) as caught:
        validate_plan(plan_with_step(tool="github_*"))
    assert "never a glob" in caught.value.errors[0].detail


def test_all_errors_are_reported_together() -> None:
    document = {
        "version": True,
        "goal": "",
        "user": "nobody",
        "steps": [
            {"tool": "ok"},
            {"tool": "bad*", "maxCalls": 0},
            {"tool": "t", "args": {"repo": {"regx": "a"}}},
        ],
        "typo": 1,
    }
    assert error_paths(document) == [
        "typo",
        "version",
        "goal",
        "user",
        "steps[1].tool",
        "steps[1].maxCalls",
        "steps[2].args.repo.regx",
    ]


def test_document_that_is_not_an_object_has_the_root_path() -> None:
    assert error_paths([DESIGN_EXAMPLE]) == [""]
    assert error_paths(None) == [""]


def test_error_message_is_readable() -> None:
    with pytest.raises(DocumentInvalid) as caught:
        validate_plan(plan_with(goal=""))
    assert "goal" in str(caught.value)
    assert isinstance(caught.value, ValueError)


@given(wild_values)
def test_garbage_only_ever_raises_document_invalid(document: object) -> None:
    try:
        plan = validate_plan(document)
    except DocumentInvalid as invalid:
        assert invalid.errors
        for error in invalid.errors:
            assert isinstance(error.path, str)
            assert error.detail
            if isinstance(document, dict):
                assert error.path  # only a non-object document is blamed as a whole
    else:
        plan_hash(plan)


@given(plans(), st.data())
def test_garbage_inside_a_valid_plan_only_raises_document_invalid(
    document: dict[str, Any], data: Any
) -> None:
    step = data.draw(st.sampled_from(document["steps"]))
    field = data.draw(st.sampled_from(["tool", "args", "maxCalls", "required", "extra"]))
    step[field] = data.draw(wild_values)
    if field == "args" and isinstance(step["args"], dict):
        step["args"]["x"] = data.draw(wild_values)
    try:
        plan = validate_plan(document)
    except DocumentInvalid as invalid:
        assert all(error.path.startswith("steps[") for error in invalid.errors)
    else:
        assert validate_plan(plan) == plan
        plan_hash(plan)  # hashing a validated plan never raises


# --- compiled plan -------------------------------------------------------------------------


def compiled(*steps: dict[str, Any]) -> CompiledPlan:
    return CompiledPlan(validate_plan(plan_with(steps=list(steps))))


def test_step_candidates_lists_steps_by_tool_in_order() -> None:
    plan = compiled({"tool": "a"}, {"tool": "b"}, {"tool": "a"})
    assert plan.step_candidates("a") == (0, 2)
    assert plan.step_candidates("b") == (1,)
    assert plan.step_candidates("c") == ()


def test_matching_steps_checks_constraints_in_plan_order() -> None:
    plan = compiled(
        {"tool": "get", "args": {"repo": {"eq": "acme/app"}}},
        {"tool": "list"},
        {"tool": "get", "args": {"repo": {"glob": "acme/*"}}},
        {"tool": "get"},
    )
    assert plan.matching_steps("get", {"repo": "acme/app"}) == [0, 2, 3]
    assert plan.matching_steps("get", {"repo": "acme/other"}) == [2, 3]
    assert plan.matching_steps("get", {}) == [3]
    assert plan.matching_steps("list", {"anything": 1}) == [1]
    assert plan.matching_steps("delete", {}) == []


def test_pinned_argument_missing_from_the_call_does_not_match() -> None:
    plan = compiled({"tool": "get", "args": {"repo": {"eq": "acme/app"}}})
    assert plan.matching_steps("get", {}) == []
    assert plan.matching_steps("get", {"other": "acme/app"}) == []


def test_choose_step_takes_the_first_matching_step_with_calls_left() -> None:
    plan = compiled(
        {"tool": "get", "maxCalls": 1},
        {"tool": "get", "maxCalls": 2},
        {"tool": "other"},
    )
    matching = plan.matching_steps("get", {})
    assert plan.choose_step(matching, [0, 0, 0]) == 0
    assert plan.choose_step(matching, [1, 0, 0]) == 1
    assert plan.choose_step(matching, [1, 1, 0]) == 1
    assert plan.choose_step(matching, [1, 2, 0]) is None
    assert plan.choose_step([], [0, 0, 0]) is None


def test_compiled_plan_exposes_budgets_and_required_steps() -> None:
    plan = compiled({"tool": "a", "maxCalls": 3, "required": True}, {"tool": "b"})
    assert plan.max_calls == (3, 20)
    assert plan.required_steps == (0,)
    assert plan.tools == ("a", "b")
    assert len(plan) == 2


def test_compiled_plan_never_raises_on_odd_calls() -> None:
    plan = compiled({"tool": "get", "args": {"repo": {"regex": "a.*"}}})
    assert plan.matching_steps("get", ["repo"]) == []
    assert plan.matching_steps("get", None) == []
    assert plan.matching_steps(["get"], {}) == []  # type: ignore[arg-type]
    assert plan.step_candidates({"get": 1}) == ()  # type: ignore[arg-type]
