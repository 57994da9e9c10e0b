"""policy_json_schema() and validate_policy() agree wherever JSON Schema can express a rule:
the console's editor checks a policy against the schema as it is typed, and the server's
validation stays the authority."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from guard.errors import DocumentInvalid
from guard.policy import policy_json_schema, validate_policy

from .strategies import policies

SCHEMA = policy_json_schema()
SCHEMA_VALIDATOR = Draft202012Validator(SCHEMA)


def policy(*rules: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {"version": 1, "default": "deny", "rules": list(rules), **changes}


def accepted_by_validate_policy(document: object) -> bool:
    try:
        validate_policy(document)
    except DocumentInvalid:
        return False
    return True


EXAMPLES: list[tuple[str, object, bool]] = [
    ("no rules", {"version": 1, "default": "allow"}, True),
    ("minimal rule", policy({"effect": "allow", "tools": ["github_*"]}), True),
    (
        "every field",
        policy(
            {
                "effect": "review",
                "tools": ["deploy", "db_[a-z]*", "x?"],
                "args": {"env": {"eq": "prod"}, "n": {"lte": 3}, "repo": {"glob": "acme/*"}},
                "roles": ["sre"],
                "groups": ["oncall"],
                "maxCalls": 5,
                "name": "deploys need a person",
                "description": "…",
            }
        ),
        True,
    ),
    ("not an object", [], False),
    ("no default", {"version": 1}, False),
    ("default review", policy(default="review"), False),
    ("version 3", policy(version=3), False),
    ("unknown top-level key", policy(extra=1), False),
    ("unknown rule key", policy({"effect": "allow", "tools": ["t"], "tool": "t"}), False),
    ("effect misspelt", policy({"effect": "alow", "tools": ["t"]}), False),
    ("no tools", policy({"effect": "allow"}), False),
    ("empty tools", policy({"effect": "allow", "tools": []}), False),
    ("tools a string", policy({"effect": "allow", "tools": "t"}), False),
    ("regex-like glob", policy({"effect": "deny", "tools": ["github.*"]}), False),
    (
        "misspelt operator",
        policy({"effect": "allow", "tools": ["t"], "args": {"a": {"glb": "x"}}}),
        False,
    ),
    ("empty roles", policy({"effect": "allow", "tools": ["t"], "roles": []}), False),
    ("maxCalls 0", policy({"effect": "allow", "tools": ["t"], "maxCalls": 0}), False),
    ("maxCalls true", policy({"effect": "allow", "tools": ["t"], "maxCalls": True}), False),
    ("rules an object", policy(rules={}), False),
    ("501 rules", policy(*[{"effect": "allow", "tools": ["t"]}] * 501), False),
]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize(
    ("document", "valid"),
    [(document, valid) for _, document, valid in EXAMPLES],
    ids=[name for name, _, _ in EXAMPLES],
)
def test_schema_and_validate_policy_agree_on_examples(document: object, valid: bool) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document) is valid
    assert accepted_by_validate_policy(document) is valid


def test_the_schema_names_the_path_the_server_names() -> None:
    document = policy({"effect": "allow", "tools": ["t"]}, {"effect": "permit", "tools": ["t"]})
    (error,) = SCHEMA_VALIDATOR.iter_errors(document)
    assert list(error.absolute_path) == ["rules", 1, "effect"]
    with pytest.raises(DocumentInvalid) as refused:
        validate_policy(document)
    assert [field.path for field in refused.value.errors] == ["rules[1].effect"]


def test_a_glob_of_allowed_characters_but_bad_syntax_is_left_to_validate_policy() -> None:
    document = policy({"effect": "allow", "tools": ["[unterminated"]})
    assert SCHEMA_VALIDATOR.is_valid(document)
    assert not accepted_by_validate_policy(document)


@given(policies())
def test_every_valid_policy_satisfies_the_schema(document: dict[str, Any]) -> None:
    assert SCHEMA_VALIDATOR.is_valid(document) is accepted_by_validate_policy(document)
    if accepted_by_validate_policy(document):
        assert SCHEMA_VALIDATOR.is_valid(validate_policy(document))


MUTATIONS: dict[str, Any] = {
    "extra rule key": lambda rule: rule.__setitem__("note", "x"),
    "unknown effect": lambda rule: rule.__setitem__("effect", "permit"),
    "no tools": lambda rule: rule.pop("tools"),
    "bad glob character": lambda rule: rule.__setitem__("tools", ["a.b"]),
    "zero maxCalls": lambda rule: rule.__setitem__("maxCalls", 0),
    "empty groups": lambda rule: rule.__setitem__("groups", []),
    "second operator": lambda rule: rule.__setitem__("args", {"n": {"eq": 1, "lte": 2}}),
}


@given(policies(), st.sampled_from(sorted(MUTATIONS)), st.data())
def test_a_broken_rule_fails_both(document: dict[str, Any], mutation: str, data) -> None:
    if not document["rules"]:
        document["rules"].append({"effect": "allow", "tools": ["t"]})
    broken = copy.deepcopy(document)
    index = data.draw(st.integers(0, len(broken["rules"]) - 1))
    MUTATIONS[mutation](broken["rules"][index])
    assert not SCHEMA_VALIDATOR.is_valid(broken)
    assert not accepted_by_validate_policy(broken)
