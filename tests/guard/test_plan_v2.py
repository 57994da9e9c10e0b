"""Plan version 2 (docs/decisions/0066): step ids, order, closed arguments and budgets,
validated with paths; version-1 documents keep meaning and refusing what they did."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard import cli
from guard.constraints import OPERATORS
from guard.errors import DocumentInvalid, index_path, key_path
from guard.plan import (
    DEFAULT_MAX_CALLS,
    MAX_AFTER,
    MAX_BUDGETS,
    MAX_STEPS,
    PLAN_VERSION,
    PLAN_VERSIONS,
    plan_hash,
    validate_plan,
)

from .strategies import wild_values
from .strategies_v2 import v2_plan_pairs

BASE: dict[str, Any] = {"version": 2, "goal": "Refund the order", "user": "alice@acme.dev"}

EXAMPLE: dict[str, Any] = {
    **BASE,
    "steps": [
        {"tool": "orders_get", "id": "read", "args": {"order": {"type": "string"}}},
        {"tool": "refunds_approve", "id": "approve", "after": ["read"]},
        {
            "tool": "refunds_pay",
            "id": "pay",
            "after": ["read", "approve"],
            "args": {"amount": {"lte": 500}, "note": {"maxLength": 200}},
            "additionalArgs": False,
            "maxCalls": 3,
        },
    ],
    "budgets": [{"id": "refunds", "arg": "amount", "steps": ["pay"], "max": 500}],
}


def plan(*steps: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**BASE, "steps": list(steps), **changes}


def errors_of(document: object) -> list[tuple[str, str]]:
    with pytest.raises(DocumentInvalid) as caught:
        validate_plan(document)
    return [(error.path, error.detail) for error in caught.value.errors]


def error_paths(document: object) -> list[str]:
    return [path for path, _ in errors_of(document)]


# --- the version and the normal form -----------------------------------------------------


def test_versions_are_1_and_2_and_the_current_one_stays_1() -> None:
    assert PLAN_VERSIONS == (1, 2)
    assert PLAN_VERSION == 1


def test_every_default_is_filled_in_and_ids_are_kept() -> None:
    assert validate_plan(EXAMPLE) == {
        **BASE,
        "steps": [
            {
                "tool": "orders_get",
                "args": {"order": {"type": "string"}},
                "maxCalls": DEFAULT_MAX_CALLS,
                "required": False,
                "id": "read",
                "after": [],
                "additionalArgs": True,
            },
            {
                "tool": "refunds_approve",
                "args": {},
                "maxCalls": DEFAULT_MAX_CALLS,
                "required": False,
                "id": "approve",
                "after": ["read"],
                "additionalArgs": True,
            },
            {
                "tool": "refunds_pay",
                "args": {"amount": {"lte": 500}, "note": {"maxLength": 200}},
                "maxCalls": 3,
                "required": False,
                "id": "pay",
                "after": ["read", "approve"],
                "additionalArgs": False,
            },
        ],
        "budgets": [{"id": "refunds", "arg": "amount", "steps": ["pay"], "max": 500}],
    }


def test_a_step_without_an_id_gets_none_and_a_plan_without_budgets_gets_an_empty_list() -> None:
    normalized = validate_plan(plan({"tool": "search"}))

    assert normalized["steps"] == [
        {
            "tool": "search",
            "args": {},
            "maxCalls": DEFAULT_MAX_CALLS,
            "required": False,
            "after": [],
            "additionalArgs": True,
        }
    ]
    assert normalized["budgets"] == []


def test_the_normal_form_is_a_copy() -> None:
    document = copy.deepcopy(EXAMPLE)
    normalized = validate_plan(document)

    normalized["steps"][2]["after"].append("x")
    normalized["budgets"][0]["steps"].append("x")

    assert document == EXAMPLE


@pytest.mark.parametrize("version", [2.0, True, "2", None, 3, 0])
def test_a_version_that_is_not_the_integer_1_or_2_is_refused(version: object) -> None:
    assert errors_of(plan({"tool": "t"}, version=version)) == [
        ("version", "must be the integer 1 or 2")
    ]


# --- ids and order -----------------------------------------------------------------------


def test_an_unknown_id_in_after_is_refused_at_its_index() -> None:
    document = plan({"tool": "a", "id": "write"}, {"tool": "b", "after": ["write", "read"]})

    assert errors_of(document) == [("steps[1].after[1]", "names no step id 'read'")]


def test_a_step_naming_itself_forms_a_cycle() -> None:
    document = plan({"tool": "a", "id": "read"}, {"tool": "b", "id": "pay", "after": ["pay"]})

    assert errors_of(document) == [("steps[1].after", "forms a cycle: pay -> pay")]


def test_a_two_step_cycle_names_both_from_the_step_that_closes_it() -> None:
    document = plan(
        {"tool": "a", "id": "approve", "after": ["pay"]},
        {"tool": "b", "id": "pay", "after": ["approve"]},
    )

    assert errors_of(document) == [("steps[1].after", "forms a cycle: pay -> approve -> pay")]


def test_a_long_cycle_is_named_in_full() -> None:
    # s0 waits for s1, which waits for s2, ... s49 waits for s0.
    steps = [
        {"tool": "t", "id": f"s{index}", "after": [f"s{(index + 1) % MAX_STEPS}"]}
        for index in range(MAX_STEPS)
    ]

    ((path, detail),) = errors_of(plan(*steps))

    assert path == "steps[49].after"
    names = ["s49", *(f"s{index}" for index in range(MAX_STEPS))]
    assert detail == "forms a cycle: " + " -> ".join(names)


def test_a_cycle_behind_an_acyclic_part_is_found() -> None:
    document = plan(
        {"tool": "t", "id": "a"},
        {"tool": "t", "id": "b", "after": ["a"]},
        {"tool": "t", "id": "c", "after": ["b", "d"]},
        {"tool": "t", "id": "d", "after": ["a", "e"]},
        {"tool": "t", "id": "e", "after": ["c"]},
    )

    assert errors_of(document) == [("steps[4].after", "forms a cycle: e -> c -> d -> e")]


def test_a_diamond_is_no_cycle() -> None:
    validate_plan(
        plan(
            {"tool": "t", "id": "a"},
            {"tool": "t", "id": "b", "after": ["a"]},
            {"tool": "t", "id": "c", "after": ["a"]},
            {"tool": "t", "id": "d", "after": ["b", "c", "a"]},
            {"tool": "t", "after": ["d"]},
        )
    )


def test_a_repeated_id_is_refused_at_the_later_step() -> None:
    document = plan({"tool": "a", "id": "x"}, {"tool": "b"}, {"tool": "c", "id": "x"})

    assert errors_of(document) == [("steps[2].id", "repeats the id of steps[0]")]


def test_ids_may_repeat_a_tool_name_and_one_tool_may_have_many_ids() -> None:
    validate_plan(plan({"tool": "pay", "id": "pay"}, {"tool": "pay", "id": "pay-2"}))


@pytest.mark.parametrize(
    ("step", "path", "detail"),
    [
        ({"tool": "t", "id": ""}, "steps[0].id", "must be 1 to 32 characters"),
        ({"tool": "t", "id": "Read"}, "steps[0].id", "must be 1 to 32 characters"),
        ({"tool": "t", "id": "a" * 33}, "steps[0].id", "must be 1 to 32 characters"),
        ({"tool": "t", "id": "read\n"}, "steps[0].id", "must be 1 to 32 characters"),
        ({"tool": "t", "id": 1}, "steps[0].id", "must be a string, not integer"),
        ({"tool": "t", "after": "read"}, "steps[0].after", "must be an array, not string"),
        ({"tool": "t", "after": [None]}, "steps[0].after[0]", "must be a string, not null"),
        ({"tool": "t", "after": ["R"]}, "steps[0].after[0]", "must be 1 to 32 characters"),
        ({"tool": "t", "additionalArgs": 0}, "steps[0].additionalArgs", "must be a boolean"),
        ({"tool": "t", "additionalArgs": None}, "steps[0].additionalArgs", "must be a boolean"),
        ({"tool": "t", "note": 1}, "steps[0].note", "unknown field"),
        ({"tool": "t", "args": {"a": {"typ": "string"}}}, "steps[0].args.a.typ", "unknown"),
        ({"tool": "t", "args": {"a": {"type": "str"}}}, "steps[0].args.a.type", "must be"),
    ],
)
def test_step_fields_are_checked_with_paths(step: dict[str, Any], path: str, detail: str) -> None:
    ((found_path, found_detail),) = errors_of(plan(step))

    assert found_path == path
    assert found_detail.startswith(detail)


def test_after_names_an_id_once_and_at_most_50() -> None:
    ids = [{"tool": "t", "id": f"s{index}"} for index in range(MAX_STEPS - 1)]
    names = [f"s{index}" for index in range(MAX_STEPS - 1)]
    validate_plan(plan(*ids, {"tool": "t", "after": names}))

    assert errors_of(plan({"tool": "t", "id": "a"}, {"tool": "t", "after": ["a", "a"]})) == [
        ("steps[1].after[1]", "names 'a' twice")
    ]
    assert errors_of(plan({"tool": "t", "after": ["a"] * (MAX_AFTER + 1)})) == [
        ("steps[0].after", f"must name at most {MAX_AFTER} steps")
    ]


def test_every_problem_is_reported_at_once() -> None:
    document = plan(
        {"tool": "t", "id": "a", "after": ["nope"]},
        {"tool": "t", "id": "a"},
        {"tool": "t*", "after": ["a"]},
        goal="",
        budgets=[{"id": "b", "arg": "amount", "steps": ["ghost"], "max": -1}],
    )

    assert error_paths(document) == [
        "goal",
        "steps[2].tool",
        "steps[1].id",
        "steps[0].after[0]",
        "budgets[0].steps[0]",
        "budgets[0].max",
    ]


# --- budgets -----------------------------------------------------------------------------

PAY = {"tool": "refunds_pay", "id": "pay"}
REFUND = {"id": "refunds", "arg": "amount", "steps": ["pay"], "max": 500}


def with_budget(**changes: Any) -> dict[str, Any]:
    return plan(PAY, budgets=[{**REFUND, **changes}])


@pytest.mark.parametrize(
    ("budget", "path", "detail"),
    [
        ({"steps": ["read"]}, "budgets[0].steps[0]", "names no step id 'read'"),
        ({"steps": ["refunds_pay"]}, "budgets[0].steps[0]", "names no step id 'refunds_pay'"),
        ({"steps": ["pay", "pay"]}, "budgets[0].steps[1]", "names 'pay' twice"),
        ({"steps": []}, "budgets[0].steps", "must name at least 1 step"),
        ({"steps": "pay"}, "budgets[0].steps", "must be an array, not string"),
        ({"steps": [7]}, "budgets[0].steps[0]", "must be a string, not integer"),
        ({"id": "Refunds"}, "budgets[0].id", "must be 1 to 32 characters"),
        ({"arg": ""}, "budgets[0].arg", "argument names must be non-empty strings"),
        ({"arg": 5}, "budgets[0].arg", "argument names must be non-empty strings"),
        ({"arg": "a" * 201}, "budgets[0].arg", "argument name is longer than 200"),
        ({"arg": "a\x00"}, "budgets[0].arg", "must not contain NUL"),
        ({"max": 0}, "budgets[0].max", "must be greater than 0"),
        ({"max": -0.5}, "budgets[0].max", "must be greater than 0"),
        ({"max": True}, "budgets[0].max", "must be a number, not boolean"),
        ({"max": "500"}, "budgets[0].max", "must be a number, not string"),
        ({"max": float("nan")}, "budgets[0].max", "must be a finite number"),
        ({"max": float("inf")}, "budgets[0].max", "must be a finite number"),
        ({"max": 2**53}, "budgets[0].max", "integer is outside"),
        ({"max": 1e300}, "budgets[0].max", "must be at most 9007199254740991"),
        ({"cap": 1}, "budgets[0].cap", "unknown field"),
    ],
)
def test_budget_fields_are_checked_with_paths(
    budget: dict[str, Any], path: str, detail: str
) -> None:
    ((found_path, found_detail),) = errors_of(with_budget(**budget))

    assert found_path == path
    assert found_detail.startswith(detail)


@pytest.mark.parametrize("field", ["id", "arg", "steps", "max"])
def test_every_budget_field_is_required(field: str) -> None:
    budget = {key: value for key, value in REFUND.items() if key != field}

    assert errors_of(plan(PAY, budgets=[budget])) == [(f"budgets[0].{field}", "is required")]


def test_budget_ids_are_unique_among_budgets_but_may_repeat_a_step_id() -> None:
    validate_plan(plan(PAY, budgets=[{**REFUND, "id": "pay"}]))

    assert errors_of(plan(PAY, budgets=[REFUND, REFUND])) == [
        ("budgets[1].id", "repeats the id of budgets[0]")
    ]


def test_at_most_20_budgets_and_budgets_is_an_array() -> None:
    many = [{**REFUND, "id": f"b{index}"} for index in range(MAX_BUDGETS)]
    validate_plan(plan(PAY, budgets=many))

    assert errors_of(plan(PAY, budgets=[*many, {**REFUND, "id": "extra"}])) == [
        ("budgets", f"must have at most {MAX_BUDGETS} budgets")
    ]
    assert errors_of(plan(PAY, budgets={})) == [("budgets", "must be an array, not object")]
    assert errors_of(plan(PAY, budgets=[None])) == [("budgets[0]", "must be an object, not null")]


def test_a_fractional_budget_is_kept_as_written() -> None:
    assert validate_plan(with_budget(max=0.3))["budgets"][0]["max"] == 0.3


# --- version 1 is unchanged --------------------------------------------------------------

V1 = {"version": 1, "goal": "g", "user": "alice@acme.dev"}


@pytest.mark.parametrize(
    ("document", "errors"),
    [
        (
            {**V1, "steps": [{"tool": "t", "id": "a"}]},
            [("steps[0].id", "unknown field (expected args, maxCalls, required, tool)")],
        ),
        (
            {**V1, "steps": [{"tool": "t", "after": []}]},
            [("steps[0].after", "unknown field (expected args, maxCalls, required, tool)")],
        ),
        (
            {**V1, "steps": [{"tool": "t", "additionalArgs": True}]},
            [
                (
                    "steps[0].additionalArgs",
                    "unknown field (expected args, maxCalls, required, tool)",
                )
            ],
        ),
        (
            {**V1, "steps": [{"tool": "t"}], "budgets": []},
            [("budgets", "unknown field (expected goal, steps, user, version)")],
        ),
    ],
)
def test_a_version_1_plan_with_a_version_2_field_is_refused_as_before(
    document: dict[str, Any], errors: list[tuple[str, str]]
) -> None:
    assert errors_of(document) == errors


@pytest.mark.parametrize(
    "constraint",
    [
        {"type": "string"},
        {"maxLength": 10},
        {"subpath": "/srv/repo"},
        {"url": {"scheme": ["https"], "host": ["acme.dev"]}},
        {"cidr": ["10.0.0.0/8"]},
        {"argv": {"cmd": ["git"]}},
    ],
    ids=lambda constraint: next(iter(constraint)),
)
def test_a_version_1_plan_with_a_version_2_operator_is_refused_as_before(
    constraint: dict[str, Any],
) -> None:
    operator = next(iter(constraint))
    document = {**V1, "steps": [{"tool": "t", "args": {"a": constraint}}]}

    ((path, detail),) = errors_of(document)

    assert path == f"steps[0].args.a.{operator}"
    assert detail.startswith("unknown operator (expected one of eq, in, glob, regex, lte, gte)")


# --- properties --------------------------------------------------------------------------


@given(v2_plan_pairs())
def test_defaults_left_out_and_written_hash_alike(pair: tuple[dict[str, Any], ...]) -> None:
    sparse, full = pair

    assert validate_plan(sparse) == validate_plan(full)
    assert plan_hash(validate_plan(sparse)) == plan_hash(validate_plan(full))


@given(v2_plan_pairs())
def test_validation_is_idempotent(pair: tuple[dict[str, Any], ...]) -> None:
    normalized = validate_plan(pair[0])

    assert validate_plan(normalized) == normalized
    assert plan_hash(validate_plan(normalized)) == plan_hash(normalized)


@given(v2_plan_pairs())
def test_read_as_version_1_a_plan_is_refused_exactly_where_it_uses_version_2(
    pair: tuple[dict[str, Any], ...],
) -> None:
    document = copy.deepcopy(pair[0])
    document["version"] = 1
    version_2_paths = {"budgets"} if "budgets" in document else set()
    for index, step in enumerate(document["steps"]):
        step_path = index_path("steps", index)
        version_2_paths |= {
            key_path(step_path, key) for key in ("id", "after", "additionalArgs") if key in step
        }
        for name, constraint in step.get("args", {}).items():
            version_2_paths |= {
                key_path(key_path(key_path(step_path, "args"), name), operator)
                for operator in constraint
                if operator not in OPERATORS
            }

    if version_2_paths:
        assert set(error_paths(document)) == version_2_paths
    else:
        steps = validate_plan(pair[0])["steps"]
        assert validate_plan(document)["steps"] == [
            {key: value for key, value in step.items() if key not in ("after", "additionalArgs")}
            for step in steps
        ]


# --- plangate validate -------------------------------------------------------------------


def test_plangate_validate_accepts_a_version_2_plan(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(EXAMPLE), encoding="utf-8")

    assert cli.main(["validate", str(path), "--json"]) == 0

    assert json.loads(capsys.readouterr().out) == {
        "valid": True,
        "kind": "plan",
        "hash": plan_hash(validate_plan(EXAMPLE)),
    }


def test_plangate_validate_prints_each_version_2_error_with_its_path(
    tmp_path: Path, capsys: Any
) -> None:
    document = copy.deepcopy(EXAMPLE)
    document["steps"][0]["after"] = ["pay", "write"]
    document["budgets"][0]["steps"] = ["refunds_pay"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    assert cli.main(["validate", str(path)]) == 1

    output = capsys.readouterr()
    assert output.out.splitlines() == [
        "plan.steps[0].after[1]: names no step id 'write'",
        "plan.steps[2].after: forms a cycle: pay -> read -> pay",
        "plan.budgets[0].steps[0]: names no step id 'refunds_pay'",
    ]
    assert output.err == f"invalid_plan: {path}: 3 errors\n"


# --- garbage -----------------------------------------------------------------------------

WILD_STEP_FIELDS = ["tool", "args", "maxCalls", "required", "id", "after", "additionalArgs", "x"]
WILD_BUDGET_FIELDS = ["id", "arg", "steps", "max", "x"]


@given(v2_plan_pairs(), st.data())
def test_a_version_2_plan_with_any_field_replaced_by_garbage_only_raises_document_invalid(
    pair: tuple[dict[str, Any], ...], data: st.DataObject
) -> None:
    document = copy.deepcopy(pair[0])
    step = data.draw(st.sampled_from(document["steps"]))
    step[data.draw(st.sampled_from(WILD_STEP_FIELDS))] = data.draw(wild_values)
    if data.draw(st.booleans()):
        step["after"] = data.draw(st.lists(wild_values | st.sampled_from(["s0", "s1"])))
    budget = {"id": "b", "arg": "amount", "steps": ["s0"], "max": 1}
    budget[data.draw(st.sampled_from(WILD_BUDGET_FIELDS))] = data.draw(wild_values)
    document["budgets"] = [budget, data.draw(wild_values)]

    try:
        plan = validate_plan(document)
    except DocumentInvalid as invalid:
        assert all(error.path and error.detail for error in invalid.errors)
    else:
        assert validate_plan(plan) == plan
        plan_hash(plan)


@given(st.dictionaries(st.sampled_from(["goal", "user", "steps", "budgets", "x"]), wild_values))
def test_a_version_2_document_of_garbage_only_raises_document_invalid(
    document: dict[str, Any],
) -> None:
    with pytest.raises(DocumentInvalid) as caught:
        validate_plan({**document, "version": 2})

    assert all(error.path and error.detail for error in caught.value.errors)
