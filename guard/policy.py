"""The policy document (versions 1 and 2): validation and hashing. What a policy decides,
for a plan at issuance and for a call, is guard.policy_evaluation.

``{"version": 1, "default": "allow" | "deny", "rules": [...]}``; each rule names an
``effect`` ("allow", "deny", or "review": an allow that needs a person's approval of the
plan), the ``tools`` globs it concerns, and optionally ``args`` (constraints, as in plans),
``roles`` / ``groups`` (whom it applies to) and ``maxCalls`` (see `validate_policy`).

Version 2 (docs/decisions/0066) reads the same, and its rules may also constrain arguments
with every operator of plan version 2 (guard.constraints.OPERATORS_V2), and an allow or
review rule may set ``"additionalArgs": false`` (it admits only calls whose every argument
it pins) and ``"maxSum": {"amount": 1000}`` (a plan step it admits must be covered by a plan
budget over ``amount`` of at most 1000). Version 1 is validated, normalised and hashed as it
always was; a guard that knows only version 1 refuses a version-2 policy by its version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from guard._document import (
    check_integer,
    check_number,
    check_string,
    check_unknown_keys,
    clone_literal,
    index_path,
    key_path,
    type_name,
)
from guard.canonical import sha256_hex
from guard.constraints import MAX_ARG_NAME_LENGTH, MAX_ARGS, OPERATORS_V2, validate_args
from guard.errors import DocumentInvalid, FieldError
from guard.patterns import GlobSyntaxError, glob_to_re2
from guard.plan import _constraint_schema

__all__ = [
    "MAX_RULES",
    "POLICY_VERSION",
    "POLICY_VERSIONS",
    "policy_hash",
    "policy_json_schema",
    "validate_policy",
]

POLICY_VERSION: Final = 1
#: the versions `validate_policy` reads (0066): 1 as it always was, 2 with the plan's
#: version-2 operators, ``additionalArgs`` and ``maxSum`` in its rules
POLICY_VERSIONS: Final = (1, 2)
MAX_RULES: Final = 500
MAX_RULE_TOOLS: Final = 100
MAX_TOOL_GLOB_LENGTH: Final = 200
MAX_SCOPE_NAMES: Final = 100
MAX_SCOPE_NAME_LENGTH: Final = 200
MAX_RULE_NAME_LENGTH: Final = 200
MAX_DESCRIPTION_LENGTH: Final = 10_000
MAX_RULE_MAX_CALLS: Final = 1_000_000

# Tool names only use [a-zA-Z0-9_-]; a glob with any other character (say `github.*`,
# written as if it were a regex) could never match one, and a deny rule that silently
# matches nothing is worse than an error.
TOOL_GLOB_PATTERN: Final = r"^[a-zA-Z0-9_\-*?\[\]!]+$"
_TOOL_GLOB_CHARACTERS = re.compile(TOOL_GLOB_PATTERN[1:-1])

_POLICY_FIELDS: Final = ("version", "default", "rules")
_RULE_FIELDS: Final = (
    "effect",
    "tools",
    "args",
    "roles",
    "groups",
    "maxCalls",
    "name",
    "description",
)
_OPTIONAL_RULE_FIELDS: Final = _RULE_FIELDS[2:]
_RULE_FIELDS_V2: Final = (*_RULE_FIELDS, "additionalArgs", "maxSum")
_OPTIONAL_RULE_FIELDS_V2: Final = _RULE_FIELDS_V2[2:]
#: a policy's `default`
_EFFECTS: Final = ("allow", "deny")
#: a rule's `effect`: "review" admits a step as "allow" does, once a person approved the plan
_RULE_EFFECTS: Final = ("allow", "deny", "review")


# --- validation --------------------------------------------------------------------------


def _check_effect(value: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, str) or value not in _EFFECTS:
        errors.append(FieldError(path, 'must be "allow" or "deny"'))


def _check_rule_effect(value: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, str) or value not in _RULE_EFFECTS:
        errors.append(FieldError(path, 'must be "allow", "deny" or "review"'))


def _check_tool_globs(value: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, list):
        errors.append(FieldError(path, f"must be an array, not {type_name(value)}"))
        return
    if not value:
        errors.append(FieldError(path, "must name at least one tool glob"))
        return
    if len(value) > MAX_RULE_TOOLS:
        errors.append(FieldError(path, f"must have at most {MAX_RULE_TOOLS} globs"))
        return
    for index, glob in enumerate(value):
        glob_path = index_path(path, index)
        if not check_string(glob, glob_path, errors, max_length=MAX_TOOL_GLOB_LENGTH, min_length=1):
            continue
        assert isinstance(glob, str)
        if _TOOL_GLOB_CHARACTERS.fullmatch(glob) is None:
            errors.append(
                FieldError(
                    glob_path,
                    "a tool glob may only use a-z, A-Z, 0-9, _, - and the glob characters"
                    " * ? [ ] !",
                )
            )
            continue
        try:
            glob_to_re2(glob)
        except GlobSyntaxError as error:
            errors.append(FieldError(glob_path, f"invalid glob: {error}"))


def _check_scope(value: object, path: str, errors: list[FieldError], what: str) -> None:
    if not isinstance(value, list):
        errors.append(FieldError(path, f"must be an array, not {type_name(value)}"))
        return
    if not value:
        # An empty list would make the rule apply to nobody: surely a mistake.
        errors.append(FieldError(path, f"must not be empty (omit it to apply to all {what})"))
        return
    if len(value) > MAX_SCOPE_NAMES:
        errors.append(FieldError(path, f"must have at most {MAX_SCOPE_NAMES} names"))
        return
    for index, name in enumerate(value):
        check_string(
            name, index_path(path, index), errors, max_length=MAX_SCOPE_NAME_LENGTH, min_length=1
        )


def _check_max_sum(value: object, path: str, errors: list[FieldError]) -> None:
    """``maxSum``: argument name (as ``args`` names one) to a ceiling, a number > 0."""
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(value)}"))
        return
    if not value:
        errors.append(FieldError(path, "must name at least one argument (omit it for none)"))
        return
    if len(value) > MAX_ARGS:
        errors.append(FieldError(path, f"must name at most {MAX_ARGS} arguments"))
        return
    for name, ceiling in value.items():
        name_path = key_path(path, name)
        if not isinstance(name, str) or not name:
            errors.append(FieldError(name_path, "argument names must be non-empty strings"))
            continue
        if not check_string(name, name_path, errors, max_length=MAX_ARG_NAME_LENGTH):
            continue
        if check_number(ceiling, name_path, errors) and not ceiling > 0:
            errors.append(FieldError(name_path, "must be greater than 0"))


def _check_allow_only(
    rule: Mapping[Any, Any], field: str, path: str, errors: list[FieldError]
) -> bool:
    """False (with an error at the field) when a deny rule sets ``field``, which only an
    allow or review rule can mean: a deny rule refuses calls, it bounds nothing."""
    if rule.get("effect") == "deny":
        errors.append(
            FieldError(
                key_path(path, field),
                f"is for allow and review rules only: a deny rule refuses the calls its args"
                f" match, and {field} would bound nothing",
            )
        )
        return False
    return True


def _validate_rule(
    rule: object, path: str, errors: list[FieldError], version: int = POLICY_VERSION
) -> dict[str, Any] | None:
    if not isinstance(rule, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(rule)}"))
        return None
    before = len(errors)
    check_unknown_keys(rule, _RULE_FIELDS if version == 1 else _RULE_FIELDS_V2, path, errors)
    for required in ("effect", "tools"):
        if required not in rule:
            errors.append(FieldError(key_path(path, required), "is required"))
    if "effect" in rule:
        _check_rule_effect(rule["effect"], key_path(path, "effect"), errors)
    if "tools" in rule:
        _check_tool_globs(rule["tools"], key_path(path, "tools"), errors)
    if "args" in rule:
        if version == 1:
            errors.extend(validate_args(rule["args"], key_path(path, "args")))
        else:
            errors.extend(
                validate_args(rule["args"], key_path(path, "args"), operators=OPERATORS_V2)
            )
    if (
        "additionalArgs" in rule
        and _check_allow_only(rule, "additionalArgs", path, errors)
        and not isinstance(rule["additionalArgs"], bool)
    ):
        errors.append(
            FieldError(
                key_path(path, "additionalArgs"),
                f"must be a boolean, not {type_name(rule['additionalArgs'])}",
            )
        )
    if "maxSum" in rule and _check_allow_only(rule, "maxSum", path, errors):
        _check_max_sum(rule["maxSum"], key_path(path, "maxSum"), errors)
    if "roles" in rule:
        _check_scope(rule["roles"], key_path(path, "roles"), errors, "roles")
    if "groups" in rule:
        _check_scope(rule["groups"], key_path(path, "groups"), errors, "members")
    if "maxCalls" in rule:
        check_integer(
            rule["maxCalls"],
            key_path(path, "maxCalls"),
            errors,
            minimum=1,
            maximum=MAX_RULE_MAX_CALLS,
        )
    if "name" in rule:
        check_string(rule["name"], key_path(path, "name"), errors, max_length=MAX_RULE_NAME_LENGTH)
    if "description" in rule:
        check_string(
            rule["description"],
            key_path(path, "description"),
            errors,
            max_length=MAX_DESCRIPTION_LENGTH,
        )
    if len(errors) > before:
        return None
    normalized: dict[str, Any] = {"effect": rule["effect"], "tools": list(rule["tools"])}
    for field in _OPTIONAL_RULE_FIELDS if version == 1 else _OPTIONAL_RULE_FIELDS_V2:
        if field in rule:
            normalized[field] = clone_literal(rule[field])
    return normalized


def validate_policy(document: object) -> dict[str, Any]:
    """Validate a policy document and return a new, normalised copy.

    ``{"version": 1, "default": "allow" | "deny", "rules": [...]}``; `version` and
    `default` are required, `rules` defaults to ``[]`` (at most 500). Each rule:
    ``effect`` ("allow" | "deny" | "review") and ``tools`` (1 to 100 tool-name globs) are required;
    ``args`` (constraints, as in plans), ``roles`` / ``groups`` (non-empty lists of names),
    ``maxCalls`` (integer >= 1), ``name`` (<= 200 characters) and ``description`` (<= 10,000
    characters) are optional and kept only when present. Unknown keys at any level are
    errors; every problem is raised together as DocumentInvalid.

    ``"version": 2`` (docs/decisions/0066) also admits, in a rule: ``args`` with every
    operator of guard.constraints.OPERATORS_V2; on an allow or review rule (a deny rule
    refuses both, at their path) ``additionalArgs`` (a boolean; false admits only calls
    whose every argument the rule pins) and ``maxSum`` (1 to 100 argument names, each to a
    number > 0: the most a plan's budget over that argument may allow a step the rule
    admits). Both are kept only when present.
    """
    if not isinstance(document, Mapping):
        raise DocumentInvalid(
            [FieldError("", f"a policy must be a JSON object, not {type_name(document)}")]
        )
    errors: list[FieldError] = []
    check_unknown_keys(document, _POLICY_FIELDS, "", errors)
    # A document of no known version is read as version 1, as it always was.
    version = POLICY_VERSION
    if "version" not in document:
        errors.append(FieldError("version", "is required"))
    else:
        given = document["version"]
        if isinstance(given, bool) or not isinstance(given, int) or given not in POLICY_VERSIONS:
            known = " or ".join(str(known) for known in POLICY_VERSIONS)
            errors.append(FieldError("version", f"must be the integer {known}"))
        else:
            version = given
    if "default" not in document:
        errors.append(FieldError("default", 'is required ("allow" or "deny")'))
    else:
        _check_effect(document["default"], "default", errors)

    rules: list[dict[str, Any] | None] = []
    raw_rules = document.get("rules", [])
    if not isinstance(raw_rules, list):
        errors.append(FieldError("rules", f"must be an array, not {type_name(raw_rules)}"))
    else:
        if len(raw_rules) > MAX_RULES:
            errors.append(FieldError("rules", f"must have at most {MAX_RULES} rules"))
        rules = [
            _validate_rule(rule, index_path("rules", index), errors, version)
            for index, rule in enumerate(raw_rules)
        ]
    if errors:
        raise DocumentInvalid(errors)
    return {"version": version, "default": document["default"], "rules": rules}


def policy_hash(policy: Mapping[str, Any]) -> str:
    """`polh`: lowercase hex SHA-256 of the RFC 8785 canonical JSON of a validated policy."""
    return sha256_hex(policy)


def _scope_schema(whom: str) -> dict[str, Any]:
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_SCOPE_NAMES,
        "items": {"type": "string", "minLength": 1, "maxLength": MAX_SCOPE_NAME_LENGTH},
        "description": f"The rule applies only to {whom}; omit it to apply to everyone.",
    }


def _rule_schema(version: int) -> dict[str, Any]:
    argument_names = {"minLength": 1, "maxLength": MAX_ARG_NAME_LENGTH}
    properties: dict[str, Any] = {
        "effect": {
            "enum": list(_RULE_EFFECTS),
            "description": (
                "allow, deny (wins over any allow), or review: allow once a person"
                " approved the plan."
            ),
        },
        "tools": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_RULE_TOOLS,
            "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TOOL_GLOB_LENGTH,
                "pattern": TOOL_GLOB_PATTERN,
            },
            "description": "Globs over tool names: * any run, ? one character, [a-z] a class.",
        },
        "args": {
            "type": "object",
            "description": "Argument name to one constraint, as in plans.",
            "maxProperties": MAX_ARGS,
            "propertyNames": argument_names,
            "additionalProperties": _constraint_schema(version),
        },
        "roles": _scope_schema("members with one of these roles"),
        "groups": _scope_schema("members in one of these groups"),
        "maxCalls": {"type": "integer", "minimum": 1, "maximum": MAX_RULE_MAX_CALLS},
        "name": {"type": "string", "maxLength": MAX_RULE_NAME_LENGTH},
        "description": {"type": "string", "maxLength": MAX_DESCRIPTION_LENGTH},
    }
    rule: dict[str, Any] = {
        "type": "object",
        "description": "Which calls of which tools this rule allows, denies or sends to review.",
        "properties": properties,
        "required": ["effect", "tools"],
        "additionalProperties": False,
    }
    if version == 1:
        return rule
    properties["additionalArgs"] = {
        "type": "boolean",
        "description": (
            "false: the rule admits a call only when it pins every argument of the call."
            " Allow and review rules only."
        ),
    }
    properties["maxSum"] = {
        "type": "object",
        "description": (
            "Argument name to a ceiling: a plan step the rule admits must be covered by a"
            " plan budget over that argument whose max is at most the ceiling. Allow and"
            " review rules only."
        ),
        "minProperties": 1,
        "maxProperties": MAX_ARGS,
        "propertyNames": argument_names,
        "additionalProperties": {"type": "number", "exclusiveMinimum": 0},
    }
    # A deny rule bounds nothing: both are refused there, at their own path.
    rule["if"] = {"properties": {"effect": {"const": "deny"}}, "required": ["effect"]}
    rule["then"] = {"properties": {"additionalArgs": False, "maxSum": False}}
    return rule


def _policy_schema(version: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "version": {"type": "integer", "const": version},
            "default": {"enum": list(_EFFECTS), "description": "What no rule decides."},
            "rules": {"type": "array", "maxItems": MAX_RULES, "items": _rule_schema(version)},
        },
        "required": ["version", "default"],
        "additionalProperties": False,
    }


def policy_json_schema(*, version: int | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the policy document, as strict as JSON Schema allows.

    Without `version`, every version: the version schemas told apart by the `const` of
    `version`, each under an ``if`` on it rather than in a ``oneOf`` (a ``oneOf`` reports a
    bad rule as one error at the root, where the editor needs the rule's own path); with
    it, that version's schema alone.

    The console's editor checks a document against it as it is typed. `validate_policy`
    remains the authority; JSON Schema cannot say a few of its rules: glob syntax beyond
    the characters, RE2 syntax, integers written as 1.0, the size and depth bounds of
    `eq`/`in` values, and the safe-integer, NUL and lone-surrogate checks; in version 2
    also the normal forms and bounds of the shape operators' operands.
    """
    marker = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if version is None:
        return {
            **marker,
            "title": "Plangate policy",
            "type": "object",
            "properties": {"version": {"type": "integer", "enum": list(POLICY_VERSIONS)}},
            "required": ["version", "default"],
            "allOf": [
                {
                    "if": {"properties": {"version": {"const": number}}, "required": ["version"]},
                    "then": _policy_schema(number),
                }
                for number in POLICY_VERSIONS
            ],
        }
    if version not in POLICY_VERSIONS:
        raise ValueError(f"no policy version {version!r}")
    return {**marker, "title": "Plangate policy", **_policy_schema(version)}
