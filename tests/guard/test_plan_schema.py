"""plan_json_schema() and validate_plan() must agree wherever JSON Schema can express a rule,
for version 1 and version 2 (and the schema of each version alone)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from guard import urls
from guard.constraints import OPERATORS, OPERATORS_V2
from guard.errors import DocumentInvalid
from guard.plan import _constraint_schema, plan_json_schema, validate_plan

from .strategies import plans
from .strategies_v2 import v2_plans

SCHEMA = plan_json_schema()
SCHEMA_VALIDATOR = Draft202012Validator(SCHEMA)

BASE = {"version": 1, "goal": "Summarise open issues", "user": "alice@acme.dev"}


def plan(*steps: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**BASE, "steps": list(steps), **changes}


def accepted_by_validate_plan(document: object) -> bool:
    try:
        validate_plan(document)
    except DocumentInvalid:
        return False
    return True


EXAMPLES: list[tuple[str, object, bool]] = [
    ("minimal", plan({"tool": "search"}), True),
    (
        "every field",
        plan(
            {
                "tool": "github_get_issue",
                "args": {
                    "repo": {"eq": "acme/app"},
                    "n": {"lte": 5},
                    "m": {"gte": 1.5},
                    "state": {"in": ["open", "closed"]},
                    "path": {"glob": "docs/*.md"},
                    "ref": {"regex": "v[0-9]+"},
                },
                "maxCalls": 3,
                "required": True,
            }
        ),
        True,
    ),
    ("fifty steps", plan(*[{"tool": "t"}] * 50), True),
    ("eq object", plan({"tool": "t", "args": {"q": {"eq": {"a": [1, None]}}}}), True),
    ("not an object", [BASE], False),
    ("unknown top-level key", plan({"tool": "t"}, extra=1), False),
    ("unknown step key", plan({"tool": "t", "maxcalls": 1}), False),
    ("misspelt operator", plan({"tool": "t", "args": {"repo": {"regx": "a"}}}), False),
    ("two operators", plan({"tool": "t", "args": {"repo": {"eq": "a", "glob": "a"}}}), False),
    ("no operator", plan({"tool": "t", "args": {"repo": {}}}), False),
    ("constraint not an object", plan({"tool": "t", "args": {"repo": "a"}}), False),
    ("empty in", plan({"tool": "t", "args": {"repo": {"in": []}}}), False),
    ("glob not a string", plan({"tool": "t", "args": {"repo": {"glob": 1}}}), False),
    ("lte boolean", plan({"tool": "t", "args": {"n": {"lte": True}}}), False),
    ("lte string", plan({"tool": "t", "args": {"n": {"lte": "5"}}}), False),
    ("empty argument name", plan({"tool": "t", "args": {"": {"eq": 1}}}), False),
    ("no steps", plan(), False),
    ("51 steps", plan(*[{"tool": "t"}] * 51), False),
    ("glob tool", plan({"tool": "github_*"}), False),
    ("long tool", plan({"tool": "t" * 65}), False),
    ("step without tool", plan({"maxCalls": 1}), False),
    ("maxCalls 0", plan({"tool": "t", "maxCalls": 0}), False),
    ("maxCalls true", plan({"tool": "t", "maxCalls": True}), False),
    ("maxCalls fraction", plan({"tool": "t", "maxCalls": 1.5}), False),
    ("required string", plan({"tool": "t", "required": "yes"}), False),
    ("version true", plan({"tool": "t"}, version=True), False),
    ("version 3", plan({"tool": "t"}, version=3), False),
    ("goal empty", plan({"tool": "t"}, goal=""), False),
    ("goal blank", plan({"tool": "t"}, goal="   "), False),
    ("goal too long", plan({"tool": "t"}, goal="g" * 1001), False),
    ("user not an email", plan({"tool": "t"}, user="alice"), False),
    ("user without dot", plan({"tool": "t"}, user="alice@localhost"), False),
    ("user with space", plan({"tool": "t"}, user="alice @acme.dev"), False),
    ("user missing", {k: v for k, v in plan({"tool": "t"}).items() if k != "user"}, False),
]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(
    ("document", "valid"),
    [(document, valid) for _, document, valid in EXAMPLES],
    ids=[name for name, _, _ in EXAMPLES],
)
def test_schema_and_validate_plan_agree_on_examples(document: object, valid: bool) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document) is valid
    assert accepted_by_validate_plan(document) is valid


@pytest.mark.parametrize(
    "document",
    [
        # Rules JSON Schema cannot express: validate_plan is the authority.
        plan({"tool": "t", "args": {"r": {"regex": "(unclosed"}}}),
        plan({"tool": "t", "args": {"r": {"glob": "[unterminated"}}}),
        plan({"tool": "t", "args": {"n": {"eq": 2**53}}}),
    ],
)
def test_rules_beyond_json_schema_are_enforced_by_validate_plan(document: object) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document)
    assert not accepted_by_validate_plan(document)


@given(plans())
def test_every_valid_plan_satisfies_the_schema(document: dict[str, Any]) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document)
    assert SCHEMA_VALIDATOR.is_valid(validate_plan(document))


MUTATIONS: dict[str, Any] = {
    "extra top-level key": lambda doc, i: doc.__setitem__("extra", 1),
    "extra step key": lambda doc, i: doc["steps"][i].__setitem__("note", "x"),
    "glob tool": lambda doc, i: doc["steps"][i].__setitem__("tool", "tool*"),
    "zero maxCalls": lambda doc, i: doc["steps"][i].__setitem__("maxCalls", 0),
    "boolean maxCalls": lambda doc, i: doc["steps"][i].__setitem__("maxCalls", False),
    "numeric required": lambda doc, i: doc["steps"][i].__setitem__("required", 0),
    "misspelt operator": lambda doc, i: doc["steps"][i].__setitem__(
        "args", {"repo": {"regx": "a"}}
    ),
    "second operator": lambda doc, i: doc["steps"][i].__setitem__(
        "args", {"repo": {"eq": 1, "lte": 2}}
    ),
    "boolean bound": lambda doc, i: doc["steps"][i].__setitem__("args", {"n": {"gte": True}}),
    "no version": lambda doc, i: doc.pop("version"),
    "too many steps": lambda doc, i: doc.__setitem__("steps", doc["steps"] * 51),
}


@given(plans(max_steps=3), st.sampled_from(sorted(MUTATIONS)), st.data())
def test_schema_and_validate_plan_reject_the_same_mutations(
    document: dict[str, Any], mutation: str, data: Any
) -> None:
    mutated = copy.deepcopy(document)
    index = data.draw(st.integers(min_value=0, max_value=len(mutated["steps"]) - 1))
    MUTATIONS[mutation](mutated, index)
    assert not SCHEMA_VALIDATOR.is_valid(mutated)
    assert not accepted_by_validate_plan(mutated)


# --- version 2 ---------------------------------------------------------------------------

SCHEMA_V2 = plan_json_schema(version=2)
SCHEMA_V2_VALIDATOR = Draft202012Validator(SCHEMA_V2)

BASE_V2 = {**BASE, "version": 2}


def plan_v2(*steps: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**BASE_V2, "steps": list(steps), **changes}


def one_arg(constraint: object) -> dict[str, Any]:
    return plan_v2({"tool": "t", "args": {"a": constraint}})


PAY = {"tool": "refunds_pay", "id": "pay"}
REFUND = {"id": "refunds", "arg": "amount", "steps": ["pay"], "max": 500}

EXAMPLES_V2: list[tuple[str, object, bool]] = [
    ("v2 minimal", plan_v2({"tool": "search"}), True),
    (
        "v2 every field",
        plan_v2(
            {"tool": "orders_get", "id": "read", "args": {"order": {"type": "string"}}},
            {
                "tool": "refunds_pay",
                "id": "pay",
                "after": ["read"],
                "args": {
                    "amount": {"lte": 500},
                    "note": {"maxLength": 200},
                    "file": {"subpath": "/srv/repo/src"},
                    "callback": {
                        "url": {
                            "scheme": ["https"],
                            "host": ["api.github.com", "*.acme.dev"],
                            "pathPrefix": "/repos/acme/",
                            "ports": [8443],
                        }
                    },
                    "peer": {"cidr": ["10.0.0.0/8", "2001:db8::/32"]},
                    "command": {"argv": {"cmd": ["git"], "maxArgs": 8, "options": ["-C"]}},
                    "kind": {"in": ["full", "partial"]},
                },
                "additionalArgs": False,
                "maxCalls": 3,
                "required": True,
            },
            budgets=[REFUND],
        ),
        True,
    ),
    ("v2 empty budgets", plan_v2({"tool": "t"}, budgets=[]), True),
    ("v2 fractional max", plan_v2(PAY, budgets=[{**REFUND, "max": 0.5}]), True),
    ("v2 unknown step key", plan_v2({"tool": "t", "before": []}), False),
    ("v2 unknown top-level key", plan_v2({"tool": "t"}, order=[]), False),
    ("v2 id uppercase", plan_v2({"tool": "t", "id": "Pay"}), False),
    ("v2 id too long", plan_v2({"tool": "t", "id": "p" * 33}), False),
    ("v2 after a string", plan_v2({"tool": "t", "after": "read"}), False),
    (
        "v2 after twice",
        plan_v2({"tool": "t", "id": "a"}, {"tool": "t", "after": ["a", "a"]}),
        False,
    ),
    ("v2 after 51", plan_v2({"tool": "t", "after": [f"s{i}" for i in range(51)]}), False),
    ("v2 additionalArgs string", plan_v2({"tool": "t", "additionalArgs": "no"}), False),
    ("v2 budgets an object", plan_v2(PAY, budgets=REFUND), False),
    ("v2 21 budgets", plan_v2(PAY, budgets=[{**REFUND, "id": f"b{i}"} for i in range(21)]), False),
    ("v2 budget without max", plan_v2(PAY, budgets=[{**REFUND, "max": None}]), False),
    ("v2 budget max 0", plan_v2(PAY, budgets=[{**REFUND, "max": 0}]), False),
    ("v2 budget max true", plan_v2(PAY, budgets=[{**REFUND, "max": True}]), False),
    ("v2 budget max too big", plan_v2(PAY, budgets=[{**REFUND, "max": 1e300}]), False),
    ("v2 budget no steps", plan_v2(PAY, budgets=[{**REFUND, "steps": []}]), False),
    ("v2 budget empty arg", plan_v2(PAY, budgets=[{**REFUND, "arg": ""}]), False),
    ("v2 budget extra key", plan_v2(PAY, budgets=[{**REFUND, "cap": 1}]), False),
    ("type unknown", one_arg({"type": "str"}), False),
    ("type null", one_arg({"type": "null"}), False),
    ("maxLength negative", one_arg({"maxLength": -1}), False),
    ("maxLength fraction", one_arg({"maxLength": 1.5}), False),
    ("maxLength boolean", one_arg({"maxLength": True}), False),
    ("maxLength too big", one_arg({"maxLength": 1_000_001}), False),
    ("subpath relative", one_arg({"subpath": "srv/repo"}), False),
    ("subpath array", one_arg({"subpath": ["/srv"]}), False),
    ("url without host", one_arg({"url": {"scheme": ["https"]}}), False),
    ("url ftp", one_arg({"url": {"scheme": ["ftp"], "host": ["acme.dev"]}}), False),
    ("url port 0", one_arg({"url": {"scheme": ["https"], "host": ["a.dev"], "ports": [0]}}), False),
    (
        "url prefix relative",
        one_arg({"url": {"scheme": ["https"], "host": ["a.dev"], "pathPrefix": "x"}}),
        False,
    ),
    ("url extra key", one_arg({"url": {"scheme": ["https"], "host": ["a.dev"], "q": 1}}), False),
    ("cidr empty", one_arg({"cidr": []}), False),
    ("cidr a string", one_arg({"cidr": "10.0.0.0/8"}), False),
    ("argv without cmd", one_arg({"argv": {"maxArgs": 1}}), False),
    ("argv empty cmd", one_arg({"argv": {"cmd": []}}), False),
    ("argv negative maxArgs", one_arg({"argv": {"cmd": ["git"], "maxArgs": -1}}), False),
    ("two v2 operators", one_arg({"type": "string", "maxLength": 3}), False),
    ("v1 with an id", plan({"tool": "t", "id": "a"}), False),
    ("v1 with after", plan({"tool": "t", "after": []}), False),
    ("v1 with additionalArgs", plan({"tool": "t", "additionalArgs": True}), False),
    ("v1 with budgets", plan({"tool": "t"}, budgets=[]), False),
    ("v1 with type", plan({"tool": "t", "args": {"a": {"type": "string"}}}), False),
    ("v1 with cidr", plan({"tool": "t", "args": {"a": {"cidr": ["10.0.0.0/8"]}}}), False),
]


@pytest.mark.parametrize(
    ("document", "valid"),
    [(document, valid) for _, document, valid in EXAMPLES_V2],
    ids=[name for name, _, _ in EXAMPLES_V2],
)
def test_schema_and_validate_plan_agree_on_version_2_examples(
    document: object, valid: bool
) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document) is valid
    assert accepted_by_validate_plan(document) is valid
    if isinstance(document, dict) and document.get("version") == 2:
        assert SCHEMA_V2_VALIDATOR.is_valid(document) is valid


def test_the_schema_is_one_of_the_versions_told_apart_by_const() -> None:
    branches = SCHEMA["oneOf"]

    assert [branch["properties"]["version"]["const"] for branch in branches] == [1, 2]
    assert {key: value for key, value in SCHEMA_V2.items() if key != "$schema"} == branches[1]
    assert {key: value for key, value in plan_json_schema(version=1).items()} == {
        "$schema": SCHEMA["$schema"],
        **branches[0],
    }
    assert "$ref" not in json.dumps(SCHEMA)
    Draft202012Validator.check_schema(SCHEMA_V2)
    with pytest.raises(ValueError, match="no plan version 3"):
        plan_json_schema(version=3)


def test_the_version_2_constraint_schema_names_every_operator_once() -> None:
    def operators(version: int) -> list[str]:
        return [next(iter(branch["properties"])) for branch in _constraint_schema(version)["oneOf"]]

    assert operators(1) == list(OPERATORS)
    assert sorted(operators(2)) == sorted(OPERATORS_V2)
    for branch in _constraint_schema(2)["oneOf"]:
        (operand,) = branch["properties"].values()
        assert operand["description"]


def test_the_url_operand_limits_are_the_url_modules() -> None:
    url = next(
        branch["properties"]["url"]
        for branch in _constraint_schema(2)["oneOf"]
        if "url" in branch["properties"]
    )["properties"]

    assert url["scheme"]["items"]["enum"] == list(urls.SCHEMES)
    assert url["host"]["maxItems"] == urls.MAX_HOSTS
    assert url["ports"]["maxItems"] == urls.MAX_PORTS
    assert url["pathPrefix"]["maxLength"] == urls.MAX_PATH_PREFIX_LENGTH


@pytest.mark.parametrize(
    "document",
    [
        # Version 2's rules that JSON Schema cannot express: validate_plan is the authority.
        plan_v2({"tool": "t", "after": ["read"]}),
        plan_v2({"tool": "t", "id": "a", "after": ["a"]}),
        plan_v2({"tool": "t", "id": "a", "after": ["b"]}, {"tool": "t", "id": "b", "after": ["a"]}),
        plan_v2({"tool": "t", "id": "a"}, {"tool": "t", "id": "a"}),
        plan_v2(PAY, budgets=[{**REFUND, "steps": ["refunds_pay"]}]),
        plan_v2(PAY, budgets=[REFUND, REFUND]),
        one_arg({"subpath": "/srv/repo/"}),
        one_arg({"subpath": "/srv/../etc"}),
        one_arg({"cidr": ["10.0.0.1/8"]}),
        one_arg({"url": {"scheme": ["https"], "host": ["ACME.dev"]}}),
        one_arg({"argv": {"cmd": ["git;rm"]}}),
    ],
)
def test_version_2_rules_beyond_json_schema_are_enforced_by_validate_plan(
    document: object,
) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document)
    assert SCHEMA_V2_VALIDATOR.is_valid(document)
    assert not accepted_by_validate_plan(document)


# Half the profile: each example validates a plan against two JSON Schemas, which is slow.
@settings(max_examples=settings.default.max_examples // 2)
@given(v2_plans())
def test_every_valid_version_2_plan_satisfies_the_schemas(document: dict[str, Any]) -> None:
    normalized = validate_plan(document)

    for validator in (SCHEMA_VALIDATOR, SCHEMA_V2_VALIDATOR):
        assert validator.is_valid(document)
        assert validator.is_valid(normalized)


MUTATIONS_V2: dict[str, Any] = {
    "extra budget key": lambda doc, i: doc.__setitem__("budgets", [{"id": "b", "extra": 1}]),
    "boolean additionalArgs": lambda doc, i: doc["steps"][i].__setitem__("additionalArgs", 1),
    "uppercase id": lambda doc, i: doc["steps"][i].__setitem__("id", "ID"),
    "after not an array": lambda doc, i: doc["steps"][i].__setitem__("after", "s0"),
    "unknown type": lambda doc, i: doc["steps"][i].__setitem__("args", {"a": {"type": "int"}}),
    "version 1": lambda doc, i: doc.__setitem__("budgets", []) or doc.__setitem__("version", 1),
}


@settings(max_examples=settings.default.max_examples // 2)
@given(v2_plans(max_steps=3), st.sampled_from(sorted(MUTATIONS_V2)), st.data())
def test_schema_and_validate_plan_reject_the_same_version_2_mutations(
    document: dict[str, Any], mutation: str, data: Any
) -> None:
    mutated = copy.deepcopy(document)
    index = data.draw(st.integers(min_value=0, max_value=len(mutated["steps"]) - 1))
    MUTATIONS_V2[mutation](mutated, index)

    assert not SCHEMA_VALIDATOR.is_valid(mutated)
    assert not accepted_by_validate_plan(mutated)
