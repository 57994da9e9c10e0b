"""plan_json_schema() and validate_plan() must agree wherever JSON Schema can express a rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from guard.errors import DocumentInvalid
from guard.plan import plan_json_schema, validate_plan

from .strategies import plans

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
