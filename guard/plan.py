# Over 400 lines on purpose: one concern, the plan schema, whose parts share its limits.
"""The plan document (versions 1 and 2): validation, normalisation, hashing, JSON Schema and a
compiled form that answers "which steps does this call match?" in microseconds."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeGuard

from guard._document import (
    MAX_SAFE_INTEGER,
    check_integer,
    check_number,
    check_string,
    check_unknown_keys,
    clone_literal,
    index_path,
    key_path,
    type_name,
)
from guard.addresses import MAX_NETWORKS
from guard.budgets import amounts_matcher, compile_budgets
from guard.canonical import sha256_hex
from guard.commands import MAX_ARGUMENTS, MAX_OPTIONS, MAX_PROGRAMS
from guard.constraints import (
    JSON_TYPES,
    MAX_ARG_NAME_LENGTH,
    MAX_ARGS,
    MAX_IN_MEMBERS,
    MAX_LENGTH_LIMIT,
    MAX_PATTERN_LENGTH,
    OPERATORS,
    OPERATORS_V2,
    ArgsMatcher,
    compile_args,
    validate_args,
)
from guard.eq_index import EqIndex
from guard.errors import DocumentInvalid, FieldError
from guard.paths import MAX_BASE_LENGTH

__all__ = [
    "DEFAULT_MAX_CALLS",
    "MAX_AFTER",
    "MAX_BUDGETS",
    "MAX_BUDGET_STEPS",
    "MAX_GOAL_LENGTH",
    "MAX_MAX_CALLS",
    "MAX_STEPS",
    "MAX_USER_LENGTH",
    "PLAN_VERSION",
    "PLAN_VERSIONS",
    "STEP_ID_PATTERN",
    "TOOL_NAME_PATTERN",
    "CompiledPlan",
    "is_step_id",
    "is_tool_name",
    "plan_hash",
    "plan_json_schema",
    "validate_plan",
]

PLAN_VERSION: Final = 1
#: every version `validate_plan` reads (docs/decisions/0066 adds 2)
PLAN_VERSIONS: Final = (1, 2)
MAX_STEPS: Final = 50
MAX_GOAL_LENGTH: Final = 1000
DEFAULT_MAX_CALLS: Final = 20
# Far above any real plan; keeps budgets (and hashes) in a small, safe integer range.
MAX_MAX_CALLS: Final = 1_000_000
MAX_USER_LENGTH: Final = 254
TOOL_NAME_PATTERN: Final = r"^[a-zA-Z0-9_-]{1,64}$"
# Version 2: step and budget ids, what `after` and a budget may name, how many budgets.
STEP_ID_PATTERN: Final = r"^[a-z0-9_-]{1,32}$"
MAX_AFTER: Final = 50
MAX_BUDGETS: Final = 20
MAX_BUDGET_STEPS: Final = 50
# What the schema says of a url operand: guard.urls validates it (and imports ada_url,
# which the schema has no need of); tests/guard/test_plan_schema.py keeps them equal.
_URL_SCHEMES: Final = ("http", "https", "ws", "wss")
_MAX_URL_HOSTS: Final = 1_000
_MAX_URL_PORTS: Final = 1_000
_MAX_URL_PATH_PREFIX_LENGTH: Final = 1_000

# A deliberately simple e-mail check: one `@`, a non-empty local part, a domain made of at
# least two non-empty dot-separated labels, no whitespace or control characters. The
# server matches the address against real members, so this only has to catch nonsense.
EMAIL_PATTERN: Final = r"^[^@\s\x00-\x1f\x7f]+@[^@\s.\x00-\x1f\x7f]+(\.[^@\s.\x00-\x1f\x7f]+)+$"

# fullmatch, not match: Python's `$` also matches before a trailing newline.
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
_EMAIL = re.compile(EMAIL_PATTERN)
_STEP_ID = re.compile(STEP_ID_PATTERN)
_STEP_ID_RULE: Final = "must be 1 to 32 characters from a-z, 0-9, _ and -"

_PLAN_FIELDS: Final = ("version", "goal", "user", "steps")
_STEP_FIELDS: Final = ("tool", "args", "maxCalls", "required")
_PLAN_FIELDS_V2: Final = (*_PLAN_FIELDS, "budgets")
_STEP_FIELDS_V2: Final = (*_STEP_FIELDS, "id", "after", "additionalArgs")
_BUDGET_FIELDS: Final = ("id", "arg", "steps", "max")


def is_tool_name(value: object) -> bool:
    """True when `value` is a valid exact tool name (never a glob)."""
    return isinstance(value, str) and _TOOL_NAME.fullmatch(value) is not None


def _check_tool_name(value: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, str):
        errors.append(FieldError(path, f"must be a string, not {type_name(value)}"))
    elif not is_tool_name(value):
        detail = "must be 1 to 64 characters from a-z, A-Z, 0-9, _ and -"
        if any(character in value for character in "*?["):
            detail += " (an exact tool name, never a glob)"
        errors.append(FieldError(path, detail))


def _check_version(document: Mapping[Any, Any], errors: list[FieldError]) -> None:
    if "version" not in document:
        errors.append(FieldError("version", "is required"))
        return
    version = document["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version != PLAN_VERSION:
        versions = " or ".join(str(number) for number in PLAN_VERSIONS)
        errors.append(FieldError("version", f"must be the integer {versions}"))


def _check_user(value: object, errors: list[FieldError]) -> None:
    if check_string(value, "user", errors, max_length=MAX_USER_LENGTH, min_length=1):
        assert isinstance(value, str)
        if _EMAIL.fullmatch(value) is None:
            errors.append(FieldError("user", "must be an e-mail address"))


def _validate_step(
    step: object,
    path: str,
    errors: list[FieldError],
    *,
    fields: tuple[str, ...] = _STEP_FIELDS,
    operators: tuple[str, ...] = OPERATORS,
) -> dict[str, Any] | None:
    if not isinstance(step, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(step)}"))
        return None
    before = len(errors)
    check_unknown_keys(step, fields, path, errors)
    if "tool" in step:
        _check_tool_name(step["tool"], key_path(path, "tool"), errors)
    else:
        errors.append(FieldError(key_path(path, "tool"), "is required"))
    args = step.get("args", {})
    if "args" in step:
        errors.extend(validate_args(args, key_path(path, "args"), operators=operators))
    max_calls = step.get("maxCalls", DEFAULT_MAX_CALLS)
    if "maxCalls" in step:
        check_integer(
            max_calls, key_path(path, "maxCalls"), errors, minimum=1, maximum=MAX_MAX_CALLS
        )
    required = step.get("required", False)
    if not isinstance(required, bool):
        errors.append(
            FieldError(key_path(path, "required"), f"must be a boolean, not {type_name(required)}")
        )
    if len(errors) > before:
        return None
    return {
        "tool": step["tool"],
        "args": {name: clone_literal(constraint) for name, constraint in args.items()},
        "maxCalls": max_calls,
        "required": required,
    }


def _validate_step_v2(step: object, path: str, errors: list[FieldError]) -> dict[str, Any] | None:
    """A version-2 step: version 1's fields with its operators, and `id`, `after` (its
    shape: the names it holds are checked once every id is known) and `additionalArgs`."""
    normalized = _validate_step(step, path, errors, fields=_STEP_FIELDS_V2, operators=OPERATORS_V2)
    if not isinstance(step, Mapping):
        return None
    before = len(errors)
    if "id" in step:
        _check_step_id(step["id"], key_path(path, "id"), errors)
    after = step.get("after", [])
    if not isinstance(after, list):
        errors.append(
            FieldError(key_path(path, "after"), f"must be an array, not {type_name(after)}")
        )
    elif len(after) > MAX_AFTER:
        errors.append(FieldError(key_path(path, "after"), f"must name at most {MAX_AFTER} steps"))
    additional_args = step.get("additionalArgs", True)
    if not isinstance(additional_args, bool):
        errors.append(
            FieldError(
                key_path(path, "additionalArgs"),
                f"must be a boolean, not {type_name(additional_args)}",
            )
        )
    if normalized is None or len(errors) > before:
        return None
    if "id" in step:
        normalized["id"] = step["id"]
    normalized["after"] = list(after)
    normalized["additionalArgs"] = additional_args
    return normalized


def _check_goal_and_user(document: Mapping[Any, Any], errors: list[FieldError]) -> None:
    if "goal" in document:
        check_string(
            document["goal"],
            "goal",
            errors,
            max_length=MAX_GOAL_LENGTH,
            min_length=1,
            non_blank=True,
        )
    else:
        errors.append(FieldError("goal", "is required"))

    if "user" in document:
        _check_user(document["user"], errors)
    else:
        errors.append(FieldError("user", "is required"))


def _validate_steps(
    document: Mapping[Any, Any],
    errors: list[FieldError],
    validate_step: Callable[[object, str, list[FieldError]], dict[str, Any] | None],
) -> tuple[list[object], list[dict[str, Any] | None]]:
    """The raw steps (none unless `steps` is an array) and each one validated."""
    if "steps" not in document:
        errors.append(FieldError("steps", "is required"))
        return [], []
    raw_steps = document["steps"]
    if not isinstance(raw_steps, list):
        errors.append(FieldError("steps", f"must be an array, not {type_name(raw_steps)}"))
        return [], []
    if not raw_steps:
        errors.append(FieldError("steps", "must have at least 1 step"))
    elif len(raw_steps) > MAX_STEPS:
        errors.append(FieldError("steps", f"must have at most {MAX_STEPS} steps"))
    steps = [
        validate_step(step, index_path("steps", index), errors)
        for index, step in enumerate(raw_steps)
    ]
    return raw_steps, steps


def validate_plan(document: object) -> dict[str, Any]:
    """Validate a plan document and return a new, normalised copy.

    Strict: unknown keys at any level are errors (a misspelt `regx` ignored would widen the
    plan). Every problem is collected and raised together as DocumentInvalid, each with the
    path of the bad field. The result has every default filled in::

        {"version": 1, "goal": ..., "user": ..., "steps": [
            {"tool": ..., "args": {...} or {}, "maxCalls": n or 20, "required": bool}]}

    Version 2 (docs/decisions/0066) adds to every step `"after": [...]` (default `[]`),
    `"additionalArgs"` (default true) and its `"id"` when it has one, and to the plan
    `"budgets": [...]` (default `[]`); its constraints may use `OPERATORS_V2`. A document
    whose `version` is not 2 is read as version 1, so a version-1 plan holding any of
    those is refused as it always was.

    `goal` and `user` are kept exactly as given (the server matches `user` case-
    insensitively). Validating a normalised plan returns an equal dict.
    """
    if not isinstance(document, Mapping):
        raise DocumentInvalid(
            [FieldError("", f"a plan must be a JSON object, not {type_name(document)}")]
        )
    version = document.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version == 2:
        return _validate_plan_v2(document)
    return _validate_plan_v1(document)


def _validate_plan_v1(document: Mapping[Any, Any]) -> dict[str, Any]:
    errors: list[FieldError] = []
    check_unknown_keys(document, _PLAN_FIELDS, "", errors)
    _check_version(document, errors)
    _check_goal_and_user(document, errors)
    _, steps = _validate_steps(document, errors, _validate_step)
    if errors:
        raise DocumentInvalid(errors)
    return {
        "version": PLAN_VERSION,
        "goal": document["goal"],
        "user": document["user"],
        "steps": steps,
    }


def _validate_plan_v2(document: Mapping[Any, Any]) -> dict[str, Any]:
    errors: list[FieldError] = []
    check_unknown_keys(document, _PLAN_FIELDS_V2, "", errors)
    _check_goal_and_user(document, errors)
    raw_steps, steps = _validate_steps(document, errors, _validate_step_v2)
    step_ids, unique = _step_ids(raw_steps, errors)
    _check_order(raw_steps, step_ids, unique, errors)
    budgets = _validate_budgets(document, step_ids, errors)
    if errors:
        raise DocumentInvalid(errors)
    return {
        "version": 2,
        "goal": document["goal"],
        "user": document["user"],
        "steps": steps,
        "budgets": budgets,
    }


# --- version 2: ids, order and budgets ----------------------------------------------------


def is_step_id(value: object) -> TypeGuard[str]:
    """True when `value` is a valid step (or budget) id."""
    return isinstance(value, str) and _STEP_ID.fullmatch(value) is not None


def _check_step_id(value: object, path: str, errors: list[FieldError]) -> bool:
    if not isinstance(value, str):
        errors.append(FieldError(path, f"must be a string, not {type_name(value)}"))
        return False
    if not is_step_id(value):
        errors.append(FieldError(path, _STEP_ID_RULE))
        return False
    return True


def _step_ids(raw_steps: Sequence[object], errors: list[FieldError]) -> tuple[dict[str, int], bool]:
    """Each valid step id and the index of the first step holding it, and whether no id
    repeats (a repeat is reported at the later step's `id`)."""
    step_ids: dict[str, int] = {}
    unique = True
    for index, step in enumerate(raw_steps):
        step_id = step.get("id") if isinstance(step, Mapping) else None
        if not is_step_id(step_id):
            continue
        first = step_ids.setdefault(step_id, index)
        if first != index:
            unique = False
            errors.append(
                FieldError(
                    key_path(index_path("steps", index), "id"),
                    f"repeats the id of steps[{first}]",
                )
            )
    return step_ids, unique


def _resolve_step_ids(
    names: Sequence[object], path: str, step_ids: Mapping[str, int], errors: list[FieldError]
) -> list[int]:
    """The indexes of the steps `names` names, in order; an error at `path[j]` for each
    name that is no id, repeats or names no step."""
    indexes: list[int] = []
    seen: set[str] = set()
    for position, name in enumerate(names):
        name_path = index_path(path, position)
        if not _check_step_id(name, name_path, errors):
            continue
        assert isinstance(name, str)
        if name in seen:
            errors.append(FieldError(name_path, f"names {name!r} twice"))
            continue
        seen.add(name)
        index = step_ids.get(name)
        if index is None:
            errors.append(FieldError(name_path, f"names no step id {name!r}"))
        else:
            indexes.append(index)
    return indexes


def _check_order(
    raw_steps: Sequence[object],
    step_ids: Mapping[str, int],
    unique: bool,
    errors: list[FieldError],
) -> None:
    """Every `after` names existing steps, and no step waits, through any chain, on itself.
    Cycles are looked for only when ids are unique (a repeated id has no one meaning)."""
    waits_for: list[list[int]] = []
    for index, step in enumerate(raw_steps):
        after = step.get("after") if isinstance(step, Mapping) else None
        if isinstance(after, list) and len(after) <= MAX_AFTER:
            path = key_path(index_path("steps", index), "after")
            waits_for.append(_resolve_step_ids(after, path, step_ids, errors))
        else:
            waits_for.append([])
    if not unique:
        return
    cycle = _first_cycle(waits_for)
    if cycle is not None:
        names = {index: name for name, index in step_ids.items()}
        errors.append(
            FieldError(
                key_path(index_path("steps", cycle[0]), "after"),
                "forms a cycle: " + " -> ".join(names[index] for index in cycle),
            )
        )


def _first_cycle(edges: Sequence[Sequence[int]]) -> list[int] | None:
    """The first cycle an iterative three-colour depth-first search meets, as the node list
    `[n, ..., n]` starting at the node whose edge closes it (`[n, n]` for a self-loop);
    None when the graph is acyclic. Iterative, so no depth reaches Python's stack."""
    white, grey, black = 0, 1, 2
    colour = [white] * len(edges)
    for root in range(len(edges)):
        if colour[root] != white:
            continue
        colour[root] = grey
        stack = [(root, 0)]  # (node, position of its next edge)
        while stack:
            node, position = stack[-1]
            if position == len(edges[node]):
                colour[node] = black
                stack.pop()
                continue
            stack[-1] = (node, position + 1)
            target = edges[node][position]
            if colour[target] == grey:  # a back edge: node -> target closes a cycle
                path = [entry[0] for entry in stack]
                loop = path[path.index(target) :]  # target ... node, each waiting on the next
                return [node, *loop[:-1], node] if len(loop) > 1 else [node, node]
            if colour[target] == white:
                colour[target] = grey
                stack.append((target, 0))
    return None


def _check_argument_name(value: object, path: str, errors: list[FieldError]) -> None:
    """An argument name as `validate_args` checks one."""
    if not isinstance(value, str) or not value:
        errors.append(FieldError(path, "argument names must be non-empty strings"))
    elif len(value) > MAX_ARG_NAME_LENGTH:
        errors.append(FieldError(path, f"argument name is longer than {MAX_ARG_NAME_LENGTH}"))
    else:
        check_string(value, path, errors, max_length=MAX_ARG_NAME_LENGTH)


def _check_budget_max(value: object, path: str, errors: list[FieldError]) -> None:
    if not check_number(value, path, errors):
        return
    assert isinstance(value, int | float)
    if value <= 0:
        errors.append(FieldError(path, "must be greater than 0"))
    elif value > MAX_SAFE_INTEGER:
        errors.append(FieldError(path, f"must be at most {MAX_SAFE_INTEGER}"))


def _validate_budget(
    budget: object,
    path: str,
    step_ids: Mapping[str, int],
    budget_ids: dict[str, str],
    errors: list[FieldError],
) -> dict[str, Any] | None:
    if not isinstance(budget, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(budget)}"))
        return None
    before = len(errors)
    check_unknown_keys(budget, _BUDGET_FIELDS, path, errors)
    for field in _BUDGET_FIELDS:
        if field not in budget:
            errors.append(FieldError(key_path(path, field), "is required"))
    if "id" in budget and _check_step_id(budget["id"], key_path(path, "id"), errors):
        first = budget_ids.setdefault(budget["id"], path)
        if first != path:
            errors.append(FieldError(key_path(path, "id"), f"repeats the id of {first}"))
    if "arg" in budget:
        _check_argument_name(budget["arg"], key_path(path, "arg"), errors)
    if "steps" in budget:
        names, steps_path = budget["steps"], key_path(path, "steps")
        if not isinstance(names, list):
            errors.append(FieldError(steps_path, f"must be an array, not {type_name(names)}"))
        elif not names:
            errors.append(FieldError(steps_path, "must name at least 1 step"))
        elif len(names) > MAX_BUDGET_STEPS:
            errors.append(FieldError(steps_path, f"must name at most {MAX_BUDGET_STEPS} steps"))
        else:
            _resolve_step_ids(names, steps_path, step_ids, errors)
    if "max" in budget:
        _check_budget_max(budget["max"], key_path(path, "max"), errors)
    if len(errors) > before:
        return None
    return {
        "id": budget["id"],
        "arg": budget["arg"],
        "steps": list(budget["steps"]),
        "max": budget["max"],
    }


def _validate_budgets(
    document: Mapping[Any, Any], step_ids: Mapping[str, int], errors: list[FieldError]
) -> list[dict[str, Any]]:
    if "budgets" not in document:
        return []
    raw_budgets = document["budgets"]
    if not isinstance(raw_budgets, list):
        errors.append(FieldError("budgets", f"must be an array, not {type_name(raw_budgets)}"))
        return []
    if len(raw_budgets) > MAX_BUDGETS:
        errors.append(FieldError("budgets", f"must have at most {MAX_BUDGETS} budgets"))
        return []
    budget_ids: dict[str, str] = {}
    budgets = []
    for position, budget in enumerate(raw_budgets):
        path = index_path("budgets", position)
        normalized = _validate_budget(budget, path, step_ids, budget_ids, errors)
        if normalized is not None:
            budgets.append(normalized)
    return budgets


def plan_hash(plan: Mapping[str, Any]) -> str:
    """The plan hash `ph`: lowercase hex SHA-256 of the RFC 8785 canonical JSON.

    Pass the output of `validate_plan`: defaults must be filled in first, so that a step
    without `maxCalls` and one with `"maxCalls": 20` hash alike. The server and the guard
    both compute it this way.
    """
    return sha256_hex(plan)


def _operator_schema(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {**schema, "description": description}},
        "required": [name],
        "additionalProperties": False,
    }


def _shape_operators() -> list[dict[str, Any]]:
    """The operators version 2 adds (docs/decisions/0066, section 2), with the limits of
    the modules that validate their operands."""
    return [
        _operator_schema(
            "type",
            {"enum": list(JSON_TYPES)},
            "The argument's JSON type is this one. integer is a number with an integral"
            " value (1.0 counts); a boolean is never a number.",
        ),
        _operator_schema(
            "maxLength",
            {"type": "integer", "minimum": 0, "maximum": MAX_LENGTH_LIMIT},
            "The argument is a string of at most this many characters (Unicode code points).",
        ),
        _operator_schema(
            "subpath",
            {"type": "string", "pattern": "^/", "maxLength": MAX_BASE_LENGTH},
            "The argument is an absolute path that, once . and .. and repeated slashes are"
            " resolved, is this directory or lies under it. Write the directory in normal"
            " form (/srv/repo/src, not /srv/repo/src/ or /srv/./repo/src). A value with a"
            " backslash, a control character, a %-escape or a .. above the root is refused.",
        ),
        _operator_schema(
            "url",
            {
                "type": "object",
                "properties": {
                    "scheme": {
                        "type": "array",
                        "items": {"enum": list(_URL_SCHEMES)},
                        "minItems": 1,
                        "uniqueItems": True,
                        "description": "The schemes allowed.",
                    },
                    "host": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "minItems": 1,
                        "maxItems": _MAX_URL_HOSTS,
                        "uniqueItems": True,
                        "description": (
                            "The hosts allowed: lowercase DNS names (*.acme.dev matches every"
                            " name under acme.dev, not acme.dev itself) or IP addresses."
                        ),
                    },
                    "pathPrefix": {
                        "type": "string",
                        "pattern": "^/",
                        "maxLength": _MAX_URL_PATH_PREFIX_LENGTH,
                        "description": (
                            "The URL's path is this one or lies under it, by whole segments."
                        ),
                    },
                    "ports": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "minItems": 1,
                        "maxItems": _MAX_URL_PORTS,
                        "uniqueItems": True,
                        "description": "Ports allowed besides the scheme's default one.",
                    },
                },
                "required": ["scheme", "host"],
                "additionalProperties": False,
            },
            "The argument is a URL, parsed as browsers parse it, with one of these schemes"
            " and hosts, no user name or password, the default port or a listed one and,"
            " with pathPrefix, a path under it. Query and fragment are free.",
        ),
        _operator_schema(
            "cidr",
            {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_NETWORKS,
            },
            "The argument is an IP address string inside one of these networks, each"
            " written in normal form with no host bits set (10.0.0.0/8, 2001:db8::/32).",
        ),
        _operator_schema(
            "argv",
            {
                "type": "object",
                "properties": {
                    "cmd": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "minItems": 1,
                        "maxItems": MAX_PROGRAMS,
                        "description": "The programs allowed, each an exact element 0.",
                    },
                    "maxArgs": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_ARGUMENTS,
                        "description": "At most this many elements after the program.",
                    },
                    "options": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": MAX_OPTIONS,
                        "description": (
                            "When given, every element starting with - is one of these, or"
                            " one of these followed by =."
                        ),
                    },
                },
                "required": ["cmd"],
                "additionalProperties": False,
            },
            "The argument is a command: a list of strings, or one string split as a POSIX"
            " shell splits words. Element 0 is one of cmd, and no element holds whitespace,"
            " quotes or a shell metacharacter (; & | ` $ ( ) < > { } * ? [ ] ~ ! # \\).",
        ),
    ]


def _constraint_schema(version: int = 1) -> dict[str, Any]:
    """The schema of one constraint in a plan (or policy) of `version`."""
    operators = [
        _operator_schema(
            "eq", {}, "The argument equals this JSON value (1 is 1.0; true is not 1)."
        ),
        _operator_schema(
            "in",
            {"type": "array", "minItems": 1, "maxItems": MAX_IN_MEMBERS},
            "The argument equals one of these values.",
        ),
        _operator_schema(
            "glob",
            {"type": "string", "maxLength": MAX_PATTERN_LENGTH},
            "The argument is a string matching this whole glob: * any run of characters"
            " (including /), ? one character, [abc] / [a-z] / [!abc] a class."
            " Case-sensitive.",
        ),
        _operator_schema(
            "regex",
            {"type": "string", "maxLength": MAX_PATTERN_LENGTH},
            "The argument is a string and the whole string matches this RE2 regular expression.",
        ),
        _operator_schema("lte", {"type": "number"}, "The argument is a number <= this value."),
        _operator_schema("gte", {"type": "number"}, "The argument is a number >= this value."),
    ]
    if version >= 2:
        operators.extend(_shape_operators())
    return {
        "description": "Exactly one operator that the argument's value must satisfy.",
        "oneOf": operators,
    }


_STEP_ID_SCHEMA: Final = {"type": "string", "pattern": STEP_ID_PATTERN}


def _step_schema(version: int) -> dict[str, Any]:
    free = (
        "arguments not listed are free."
        if version == 1
        else "arguments not listed are free unless additionalArgs is false."
    )
    properties: dict[str, Any] = {
        "tool": {
            "type": "string",
            "pattern": TOOL_NAME_PATTERN,
            "description": "The exact tool name (never a glob).",
        },
        "args": {
            "type": "object",
            "description": (
                "Arguments pinned for this step: argument name to one constraint. Every"
                " pinned argument must be present in the call and satisfy its"
                f" constraint; {free}"
            ),
            "maxProperties": MAX_ARGS,
            "propertyNames": {"minLength": 1, "maxLength": MAX_ARG_NAME_LENGTH},
            "additionalProperties": _constraint_schema(version),
        },
        "maxCalls": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_MAX_CALLS,
            "default": DEFAULT_MAX_CALLS,
            "description": "How many calls this step allows.",
        },
        "required": {
            "type": "boolean",
            "default": False,
            "description": "Whether the step must run for the plan to complete.",
        },
    }
    if version >= 2:
        properties["id"] = {
            **_STEP_ID_SCHEMA,
            "description": (
                "A name for this step, unique in the plan, for after and budgets to refer to."
            ),
        }
        properties["after"] = {
            "type": "array",
            "items": _STEP_ID_SCHEMA,
            "maxItems": MAX_AFTER,
            "uniqueItems": True,
            "default": [],
            "description": (
                "Ids of the steps that must each have completed at least once before a"
                " call of this step is allowed (no cycles)."
            ),
        }
        properties["additionalArgs"] = {
            "type": "boolean",
            "default": True,
            "description": "false blocks a call passing any argument this step does not pin.",
        }
    return {
        "type": "object",
        "description": "One tool the agent will call, and how.",
        "properties": properties,
        "required": ["tool"],
        "additionalProperties": False,
    }


def _budget_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": (
            "A ceiling on the sum of one number argument over every call the named steps"
            " are allowed; a call that would pass it is blocked."
        ),
        "properties": {
            "id": {**_STEP_ID_SCHEMA, "description": "A name for this budget, unique."},
            "arg": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_ARG_NAME_LENGTH,
                "description": (
                    "The argument added up. Every call of the named steps must pass it as a"
                    " number of at least 0."
                ),
            },
            "steps": {
                "type": "array",
                "items": _STEP_ID_SCHEMA,
                "minItems": 1,
                "maxItems": MAX_BUDGET_STEPS,
                "uniqueItems": True,
                "description": "The ids of the steps whose calls count.",
            },
            "max": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_SAFE_INTEGER,
                "description": "The most the calls may add up to.",
            },
        },
        "required": list(_BUDGET_FIELDS),
        "additionalProperties": False,
    }


def _plan_schema(version: int) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "version": {"type": "integer", "const": version},
        "goal": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_GOAL_LENGTH,
            "pattern": r"\S",
            "description": "What the agent is trying to achieve.",
        },
        "user": {
            "type": "string",
            "maxLength": MAX_USER_LENGTH,
            "pattern": EMAIL_PATTERN,
            "description": "E-mail address of the person the agent acts for.",
        },
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_STEPS,
            "items": _step_schema(version),
        },
    }
    if version >= 2:
        properties["budgets"] = {
            "type": "array",
            "maxItems": MAX_BUDGETS,
            "default": [],
            "items": _budget_schema(),
        }
    return {
        "title": "Plangate plan" if version == 1 else f"Plangate plan, version {version}",
        "description": _PLAN_DESCRIPTION,
        "type": "object",
        "properties": properties,
        "required": list(_PLAN_FIELDS),
        "additionalProperties": False,
    }


_PLAN_DESCRIPTION: Final = (
    "Declare the goal, the person the agent acts for and every tool call it intends"
    " to make, before calling any tool."
)


def plan_json_schema(*, version: int | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the plan document, as strict as JSON Schema allows.

    Without `version`, every version: `oneOf` the version schemas, told apart by the
    `const` of `version`. With it, that version's schema alone (`declare_plan` embeds
    version 2's: tool-calling APIs want one object at the root).

    Self-contained (no `$ref`) so that language-model tool definitions can embed it as is.
    `validate_plan` remains the authority; a few rules are not expressible here: integer
    versions/maxCalls written as 1.0, glob class syntax, RE2 syntax, the size and depth
    bounds of `eq`/`in` values, and the safe-integer, NUL and lone-surrogate checks; in
    version 2 also step ids that `after` and budgets name, unique ids, cycles, and the
    normal forms and bounds of the shape operators' operands.
    """
    marker = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    if version is None:
        return {
            **marker,
            "title": "Plangate plan",
            "description": _PLAN_DESCRIPTION,
            "type": "object",
            "oneOf": [_plan_schema(number) for number in PLAN_VERSIONS],
        }
    if version not in PLAN_VERSIONS:
        raise ValueError(f"no plan version {version!r}")
    return {**marker, **_plan_schema(version)}


# The fewest steps naming one tool that a version-2 plan narrows by an `eq` pin.
_V2_MIN_NARROWED: Final = 3


class CompiledPlan:
    """A normalised plan (output of `validate_plan`) precompiled for call decisions.

    Budget counting is the caller's: it keeps a used-calls count per step and asks
    `choose_step` which matching step a call counts against.

    A version-2 plan (`version2`, docs/decisions/0066) also has, per step index: the steps
    it runs `after` (indexes), the argument names a closed step admits
    (`allowed_arguments`: its pinned arguments and those its budgets sum; None for a step
    open to any argument) and the budgets counting it (`step_budgets`). A budget's
    argument is an implicit constraint of each step it counts (present, an amount:
    `guard.budgets.is_amount`), part of `matching_steps`. For a version-1 plan these are
    empty and `version2` is False: its calls are decided as they always were.
    """

    __slots__ = (
        "_candidates",
        "_indexes",
        "_matchers",
        "after",
        "allowed_arguments",
        "budgets",
        "has_closed_steps",
        "ids",
        "max_calls",
        "pin_matchers",
        "plan",
        "required_steps",
        "step_budgets",
        "step_ids",
        "tools",
        "version2",
    )

    def __init__(self, plan: Mapping[str, Any]) -> None:
        self.plan = plan
        steps: Sequence[Mapping[str, Any]] = plan["steps"]
        candidates: dict[str, list[int]] = {}
        matchers: list[ArgsMatcher | None] = []
        for index, step in enumerate(steps):
            candidates.setdefault(step["tool"], []).append(index)
            args = step.get("args") or {}
            # None marks "no pinned arguments", which skips a call entirely.
            matchers.append(compile_args(args) if args else None)
        self._candidates: dict[str, tuple[int, ...]] = {
            tool: tuple(indexes) for tool, indexes in candidates.items()
        }
        # Per step: ``matcher(args)`` decides whether a call satisfies its pinned
        # arguments (None: every call does); a budgeted step's match also requires its
        # budgets' amounts, which `_matchers` (`matching_steps`) check and this does not.
        self.pin_matchers: tuple[ArgsMatcher | None, ...] = tuple(matchers)
        self._compile_version2(plan, steps, matchers)
        self._matchers: tuple[ArgsMatcher | None, ...] = tuple(matchers)
        # Many steps for one tool: narrow them by an argument they pin with `eq`.
        self._indexes: dict[str, EqIndex] = {}
        # A version-2 call is matched step by step up to the one taking it (`Decider`),
        # whose steps' matchers also read amounts: narrowing pays from fewer steps.
        min_entries = _V2_MIN_NARROWED if self.version2 else EqIndex.MIN_ENTRIES
        for tool, indexes in self._candidates.items():
            eq_index = EqIndex.build(
                [(step, steps[step].get("args")) for step in indexes], min_entries=min_entries
            )
            if eq_index is not None:
                self._indexes[tool] = eq_index
        self.max_calls: tuple[int, ...] = tuple(
            step.get("maxCalls", DEFAULT_MAX_CALLS) for step in steps
        )
        self.required_steps: tuple[int, ...] = tuple(
            index for index, step in enumerate(steps) if step.get("required", False)
        )
        self.tools: tuple[str, ...] = tuple(step["tool"] for step in steps)

    def _compile_version2(
        self,
        plan: Mapping[str, Any],
        steps: Sequence[Mapping[str, Any]],
        matchers: list[ArgsMatcher | None],
    ) -> None:
        """Order, closed arguments and budgets (nothing for a version-1 plan); a budgeted
        step's matcher also requires its budgets' amounts."""
        self.version2 = plan.get("version") == 2
        self.ids: tuple[str | None, ...] = tuple(step.get("id") for step in steps)
        self.step_ids: dict[str, int] = {
            step_id: index for index, step_id in enumerate(self.ids) if step_id is not None
        }
        self.after: tuple[tuple[int, ...], ...] = tuple(
            tuple(self.step_ids[step_id] for step_id in step.get("after", ())) for step in steps
        )
        self.budgets, self.step_budgets = compile_budgets(
            plan.get("budgets", ()), self.step_ids, len(steps)
        )
        allowed: list[frozenset[str] | None] = []
        for index, step in enumerate(steps):
            summed = tuple(dict.fromkeys(budget.arg for budget in self.step_budgets[index]))
            if summed:
                matchers[index] = _all_of(matchers[index], amounts_matcher(summed))
            if step.get("additionalArgs", True):
                allowed.append(None)
            else:
                allowed.append(frozenset(step.get("args") or ()).union(summed))
        self.allowed_arguments: tuple[frozenset[str] | None, ...] = tuple(allowed)
        self.has_closed_steps = any(names is not None for names in allowed)

    def __len__(self) -> int:
        return len(self.tools)

    def step_candidates(self, tool: str) -> tuple[int, ...]:
        """Indexes of the steps naming `tool`, in plan order."""
        try:
            return self._candidates.get(tool, ())
        except TypeError:  # an unhashable "tool name" names no step
            return ()

    def pins_no_argument(self, tool: str) -> bool:
        """True when no step naming `tool` pins an argument: every call of it matches all of
        `step_candidates(tool)`, whatever its arguments."""
        matchers = self._matchers
        return all(matchers[index] is None for index in self.step_candidates(tool))

    def narrowing(self, tool: str) -> EqIndex | None:
        """The index narrowing the steps naming `tool` by an argument they pin with `eq`
        (None when they have none): ``narrowing.candidates(args)`` are the steps `args`
        may match, in plan order."""
        return self._indexes.get(tool)

    def matching_steps(self, tool: str, args: Any) -> list[int]:
        """Indexes, in plan order, of the steps for `tool` whose constraints `args` satisfy."""
        try:
            indexes = self._candidates.get(tool)
        except TypeError:
            return []
        if not indexes:
            return []
        narrowing = self._indexes.get(tool)
        if narrowing is not None:
            indexes = narrowing.candidates(args)
        matchers = self._matchers
        matching = []
        for index in indexes:
            matcher = matchers[index]
            if matcher is None or matcher(args):
                matching.append(index)
        return matching

    def choose_step(self, matching: Sequence[int], used: Sequence[int]) -> int | None:
        """The first step in `matching` whose used count (`used[step]`) is below its
        maxCalls, or None when every matching step is spent."""
        max_calls = self.max_calls
        for index in matching:
            if used[index] < max_calls[index]:
                return index
        return None

    def unexpected_arguments(self, step: int, args: Any) -> list[str]:
        """The arguments of `args` that closed step `step` does not admit, in call order
        (none for an open step)."""
        names = self.allowed_arguments[step]
        if names is None:
            return []
        return [name for name in args if name not in names]


def _all_of(first: ArgsMatcher | None, second: ArgsMatcher) -> ArgsMatcher:
    """A matcher requiring both (`first` None: `second` alone)."""
    if first is None:
        return second

    def match_both(call_args: Any) -> bool:
        return first(call_args) and second(call_args)

    return match_both
