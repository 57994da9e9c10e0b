# Over 400 lines on purpose: one concern, the plan schema, whose parts share its limits.
"""The plan document (version 1): validation, normalisation, hashing, JSON Schema and a
compiled form that answers "which steps does this call match?" in microseconds."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from guard._document import (
    check_integer,
    check_string,
    check_unknown_keys,
    clone_literal,
    index_path,
    key_path,
    type_name,
)
from guard.canonical import sha256_hex
from guard.constraints import (
    MAX_ARG_NAME_LENGTH,
    MAX_ARGS,
    MAX_IN_MEMBERS,
    MAX_PATTERN_LENGTH,
    ArgsMatcher,
    compile_args,
    validate_args,
)
from guard.eq_index import EqIndex
from guard.errors import DocumentInvalid, FieldError

__all__ = [
    "DEFAULT_MAX_CALLS",
    "MAX_GOAL_LENGTH",
    "MAX_MAX_CALLS",
    "MAX_STEPS",
    "MAX_USER_LENGTH",
    "PLAN_VERSION",
    "TOOL_NAME_PATTERN",
    "CompiledPlan",
    "is_tool_name",
    "plan_hash",
    "plan_json_schema",
    "validate_plan",
]

PLAN_VERSION: Final = 1
MAX_STEPS: Final = 50
MAX_GOAL_LENGTH: Final = 1000
DEFAULT_MAX_CALLS: Final = 20
# Far above any real plan; keeps budgets (and hashes) in a small, safe integer range.
MAX_MAX_CALLS: Final = 1_000_000
MAX_USER_LENGTH: Final = 254
TOOL_NAME_PATTERN: Final = r"^[a-zA-Z0-9_-]{1,64}$"

# A deliberately simple e-mail check: one `@`, a non-empty local part, a domain made of at
# least two non-empty dot-separated labels, no whitespace or control characters. The
# server matches the address against real members, so this only has to catch nonsense.
EMAIL_PATTERN: Final = r"^[^@\s\x00-\x1f\x7f]+@[^@\s.\x00-\x1f\x7f]+(\.[^@\s.\x00-\x1f\x7f]+)+$"

# fullmatch, not match: Python's `$` also matches before a trailing newline.
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
_EMAIL = re.compile(EMAIL_PATTERN)

_PLAN_FIELDS: Final = ("version", "goal", "user", "steps")
_STEP_FIELDS: Final = ("tool", "args", "maxCalls", "required")


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
        errors.append(FieldError("version", f"must be the integer {PLAN_VERSION}"))


def _check_user(value: object, errors: list[FieldError]) -> None:
    if check_string(value, "user", errors, max_length=MAX_USER_LENGTH, min_length=1):
        assert isinstance(value, str)
        if _EMAIL.fullmatch(value) is None:
            errors.append(FieldError("user", "must be an e-mail address"))


def _validate_step(step: object, path: str, errors: list[FieldError]) -> dict[str, Any] | None:
    if not isinstance(step, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(step)}"))
        return None
    before = len(errors)
    check_unknown_keys(step, _STEP_FIELDS, path, errors)
    if "tool" in step:
        _check_tool_name(step["tool"], key_path(path, "tool"), errors)
    else:
        errors.append(FieldError(key_path(path, "tool"), "is required"))
    args = step.get("args", {})
    if "args" in step:
        errors.extend(validate_args(args, key_path(path, "args")))
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


def validate_plan(document: object) -> dict[str, Any]:
    """Validate a plan document and return a new, normalised copy.

    Strict: unknown keys at any level are errors (a misspelt `regx` ignored would widen the
    plan). Every problem is collected and raised together as DocumentInvalid, each with the
    path of the bad field. The result has every default filled in::

        {"version": 1, "goal": ..., "user": ..., "steps": [
            {"tool": ..., "args": {...} or {}, "maxCalls": n or 20, "required": bool}]}

    `goal` and `user` are kept exactly as given (the server matches `user` case-
    insensitively). Validating a normalised plan returns an equal dict.
    """
    if not isinstance(document, Mapping):
        raise DocumentInvalid(
            [FieldError("", f"a plan must be a JSON object, not {type_name(document)}")]
        )
    errors: list[FieldError] = []
    check_unknown_keys(document, _PLAN_FIELDS, "", errors)
    _check_version(document, errors)

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

    steps: list[dict[str, Any] | None] = []
    if "steps" not in document:
        errors.append(FieldError("steps", "is required"))
    elif not isinstance(document["steps"], list):
        errors.append(FieldError("steps", f"must be an array, not {type_name(document['steps'])}"))
    else:
        raw_steps = document["steps"]
        if not raw_steps:
            errors.append(FieldError("steps", "must have at least 1 step"))
        elif len(raw_steps) > MAX_STEPS:
            errors.append(FieldError("steps", f"must have at most {MAX_STEPS} steps"))
        steps = [
            _validate_step(step, index_path("steps", index), errors)
            for index, step in enumerate(raw_steps)
        ]

    if errors:
        raise DocumentInvalid(errors)
    return {
        "version": PLAN_VERSION,
        "goal": document["goal"],
        "user": document["user"],
        "steps": steps,
    }


def plan_hash(plan: Mapping[str, Any]) -> str:
    """The plan hash `ph`: lowercase hex SHA-256 of the RFC 8785 canonical JSON.

    Pass the output of `validate_plan`: defaults must be filled in first, so that a step
    without `maxCalls` and one with `"maxCalls": 20` hash alike. The server and the guard
    both compute it this way.
    """
    return sha256_hex(plan)


def _constraint_schema() -> dict[str, Any]:
    def operator(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {name: {**schema, "description": description}},
            "required": [name],
            "additionalProperties": False,
        }

    return {
        "description": "Exactly one operator that the argument's value must satisfy.",
        "oneOf": [
            operator("eq", {}, "The argument equals this JSON value (1 is 1.0; true is not 1)."),
            operator(
                "in",
                {"type": "array", "minItems": 1, "maxItems": MAX_IN_MEMBERS},
                "The argument equals one of these values.",
            ),
            operator(
                "glob",
                {"type": "string", "maxLength": MAX_PATTERN_LENGTH},
                "The argument is a string matching this whole glob: * any run of characters"
                " (including /), ? one character, [abc] / [a-z] / [!abc] a class."
                " Case-sensitive.",
            ),
            operator(
                "regex",
                {"type": "string", "maxLength": MAX_PATTERN_LENGTH},
                "The argument is a string and the whole string matches this RE2 regular"
                " expression.",
            ),
            operator("lte", {"type": "number"}, "The argument is a number <= this value."),
            operator("gte", {"type": "number"}, "The argument is a number >= this value."),
        ],
    }


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the plan document, as strict as JSON Schema allows.

    Self-contained (no `$ref`) so that language-model tool definitions can embed it as is.
    `validate_plan` remains the authority; a few rules are not expressible here: integer
    versions/maxCalls written as 1.0, glob class syntax, RE2 syntax, the size and depth
    bounds of `eq`/`in` values, and the safe-integer, NUL and lone-surrogate checks.
    """
    constraint = _constraint_schema()
    step = {
        "type": "object",
        "description": "One tool the agent will call, and how.",
        "properties": {
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
                    " constraint; arguments not listed are free."
                ),
                "maxProperties": MAX_ARGS,
                "propertyNames": {"minLength": 1, "maxLength": MAX_ARG_NAME_LENGTH},
                "additionalProperties": constraint,
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
        },
        "required": ["tool"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Plangate plan",
        "description": (
            "Declare the goal, the person the agent acts for and every tool call it intends"
            " to make, before calling any tool."
        ),
        "type": "object",
        "properties": {
            "version": {"type": "integer", "const": PLAN_VERSION},
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
                "items": step,
            },
        },
        "required": list(_PLAN_FIELDS),
        "additionalProperties": False,
    }


class CompiledPlan:
    """A normalised plan (output of `validate_plan`) precompiled for call decisions.

    Budget counting is the caller's: it keeps a used-calls count per step and asks
    `choose_step` which matching step a call counts against.
    """

    __slots__ = (
        "_candidates",
        "_indexes",
        "_matchers",
        "max_calls",
        "plan",
        "required_steps",
        "tools",
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
        self._matchers: tuple[ArgsMatcher | None, ...] = tuple(matchers)
        # Many steps for one tool: narrow them by an argument they pin with `eq`.
        self._indexes: dict[str, EqIndex] = {}
        for tool, indexes in self._candidates.items():
            eq_index = EqIndex.build([(step, steps[step].get("args")) for step in indexes])
            if eq_index is not None:
                self._indexes[tool] = eq_index
        self.max_calls: tuple[int, ...] = tuple(
            step.get("maxCalls", DEFAULT_MAX_CALLS) for step in steps
        )
        self.required_steps: tuple[int, ...] = tuple(
            index for index, step in enumerate(steps) if step.get("required", False)
        )
        self.tools: tuple[str, ...] = tuple(step["tool"] for step in steps)

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
