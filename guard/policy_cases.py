"""A policy's test cases, run offline (``plangate test POLICY CASES``): the file's format,
its validation with a path for every error, its JSON Schema, and running each case through
`guard.offline` (the code the control plane's policy simulator runs).

A cases file is a JSON object::

    {
      "version": 1,
      "plans": {"triage": {...a plan...}},          # optional: plans the cases name
      "cases": [
        {"name": "engineers may triage", "plan": "triage",
         "role": "engineer", "groups": ["platform"],
         "expect": {"plan": "issued"}},
        {"name": "no mail", "plan": {...a plan...},
         "expect": {"plan": "policy_denied", "steps": [1]}},
        {"name": "a public repo", "plan": "triage", "role": "engineer",
         "call": {"tool": "github_list_issues", "args": {"repo": "acme/app"}},
         "expect": {"decision": "allowed", "step": 0, "rule": 0}}
      ]
    }

A case without ``call`` checks issuance's answer to its plan: ``issued`` (``review``: the
steps a person must approve first, when given), ``policy_denied`` (``steps``: the refused
steps, when given) or ``invalid_plan``. A case with ``call`` checks the guard's decision on
that call, made after the calls of ``before`` (if any) under a fresh token for the plan:
its ``decision`` code, and its ``step`` and ``rule`` when given (indexes from 0, as in the
paths ``plan.steps[0]`` and ``rules[0]``; ``rule`` null is the policy default). Each
allowed ``before`` call counts against its step's ``maxCalls`` and budgets and then
returns (its step completes, `guard.offline.call_decide`), so a case tests a version-2
plan's order (``out_of_order``) and budgets (``budget_exceeded``) as the guard decides
them. ``user`` replaces the plan's user, as the simulator's member does. Steps and rules
count from 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from guard._document import (
    check_integer,
    check_string,
    check_unknown_keys,
    index_path,
    key_path,
    type_name,
)
from guard.agent.session import CallDecision
from guard.decisions import DECISION_CODES
from guard.errors import DocumentInvalid, FieldError
from guard.offline import PlanAnswer, call_decide, member_groups, plan_answer, simulated_token
from guard.plan import MAX_STEPS, validate_plan

__all__ = [
    "CASES_VERSION",
    "ISSUED",
    "PLAN_OUTCOMES",
    "Case",
    "CaseResult",
    "CasesFile",
    "cases_json_schema",
    "run_case",
    "validate_cases",
]

CASES_VERSION: Final = 1
ISSUED: Final = "issued"
INVALID_PLAN: Final = "invalid_plan"
POLICY_DENIED: Final = "policy_denied"
#: what a plan case may expect of issuance
PLAN_OUTCOMES: Final = (ISSUED, POLICY_DENIED, INVALID_PLAN)
MAX_CASES: Final = 10_000
MAX_BEFORE_CALLS: Final = 1_000
MAX_NAME_LENGTH: Final = 200
_NAME_LENGTH_LIMIT: Final = 200  # a role, group or plan name

_FILE_FIELDS: Final = ("version", "plans", "cases")
_CASE_FIELDS: Final = ("name", "plan", "role", "groups", "user", "call", "before", "expect")
_CALL_FIELDS: Final = ("tool", "args")
_PLAN_EXPECT_FIELDS: Final = ("plan", "steps", "review")
_CALL_EXPECT_FIELDS: Final = ("decision", "step", "rule")
_UNSET: Final = object()


@dataclass(frozen=True)
class Case:
    """One validated case. ``plan`` is the document as written (validated when run: an
    invalid plan is an answer, ``invalid_plan``); ``call`` None makes it a plan case."""

    name: str
    plan: object
    role: str | None
    groups: tuple[str, ...]
    user: str | None
    call: tuple[str, object] | None
    before: tuple[tuple[str, object], ...]
    expect: Mapping[str, Any]


@dataclass(frozen=True)
class CasesFile:
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class CaseResult:
    """A case's outcome: ``expected`` and ``actual`` hold the compared fields only;
    ``detail`` says what the answer was, for people."""

    case: Case
    passed: bool
    expected: dict[str, Any]
    actual: dict[str, Any]
    detail: str
    errors: tuple[FieldError, ...] = field(default=())

    def differences(self) -> list[str]:
        """``decision: expected "allowed", got "not_in_plan"``, one per differing field."""
        return [
            f"{name}: expected {json.dumps(value)}, got {json.dumps(self.actual.get(name))}"
            for name, value in self.expected.items()
            if self.actual.get(name) != value
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.case.name,
            "passed": self.passed,
            "expected": self.expected,
            "actual": self.actual,
            "detail": self.detail,
            "errors": [{"path": error.path, "detail": error.detail} for error in self.errors],
        }


# --- validation ---------------------------------------------------------------------------


def validate_cases(document: object) -> CasesFile:
    """The cases of a cases file, or DocumentInvalid naming every bad path
    (``cases[2].expect.decision``)."""
    if not isinstance(document, Mapping):
        raise DocumentInvalid(
            [FieldError("", f"a cases file must be a JSON object, not {type_name(document)}")]
        )
    errors: list[FieldError] = []
    check_unknown_keys(document, _FILE_FIELDS, "", errors)
    version = document.get("version", _UNSET)
    if version is _UNSET:
        errors.append(FieldError("version", "is required"))
    elif isinstance(version, bool) or version != CASES_VERSION:
        errors.append(FieldError("version", f"must be the integer {CASES_VERSION}"))
    plans = document.get("plans", {})
    if not isinstance(plans, Mapping):
        errors.append(FieldError("plans", f"must be an object, not {type_name(plans)}"))
        plans = {}
    raw_cases = document.get("cases", _UNSET)
    cases: list[Case] = []
    if raw_cases is _UNSET:
        errors.append(FieldError("cases", "is required"))
    elif not isinstance(raw_cases, list):
        errors.append(FieldError("cases", f"must be an array, not {type_name(raw_cases)}"))
    elif not raw_cases:
        errors.append(FieldError("cases", "must hold at least one case"))
    elif len(raw_cases) > MAX_CASES:
        errors.append(FieldError("cases", f"must hold at most {MAX_CASES} cases"))
    else:
        seen: dict[str, int] = {}
        for index, raw in enumerate(raw_cases):
            path = index_path("cases", index)
            case = _validate_case(raw, path, plans, errors)
            if case is None:
                continue
            if case.name in seen:
                errors.append(
                    FieldError(
                        f"{path}.name",
                        f"is also the name of {index_path('cases', seen[case.name])}",
                    )
                )
            seen.setdefault(case.name, index)
            cases.append(case)
    if errors:
        raise DocumentInvalid(errors)
    return CasesFile(tuple(cases))


def _validate_case(
    raw: object, path: str, plans: Mapping[Any, Any], errors: list[FieldError]
) -> Case | None:
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, f"a case must be an object, not {type_name(raw)}"))
        return None
    before = len(errors)
    check_unknown_keys(raw, _CASE_FIELDS, path, errors)
    name = raw.get("name", _UNSET)
    if name is _UNSET:
        errors.append(FieldError(f"{path}.name", "is required"))
    else:
        check_string(name, f"{path}.name", errors, max_length=MAX_NAME_LENGTH, non_blank=True)

    plan: object = raw.get("plan", _UNSET)
    if plan is _UNSET:
        errors.append(
            FieldError(f"{path}.plan", "is required (a plan, or the name of one in plans)")
        )
    elif isinstance(plan, str):
        if plan not in plans:
            named = ", ".join(sorted(map(str, plans))) or "none"
            errors.append(FieldError(f"{path}.plan", f"names no plan of plans (named: {named})"))
        else:
            plan = plans[plan]
    elif not isinstance(plan, Mapping):
        errors.append(
            FieldError(
                f"{path}.plan",
                f"must be a plan object or the name of one, not {type_name(plan)}",
            )
        )

    role = raw.get("role")
    if role is not None:
        check_string(role, f"{path}.role", errors, max_length=_NAME_LENGTH_LIMIT, min_length=1)
    groups = raw.get("groups", [])
    if not isinstance(groups, list):
        errors.append(FieldError(f"{path}.groups", f"must be an array, not {type_name(groups)}"))
        groups = []
    for index, group in enumerate(groups):
        check_string(
            group,
            index_path(f"{path}.groups", index),
            errors,
            max_length=_NAME_LENGTH_LIMIT,
            min_length=1,
        )
    user = raw.get("user")
    if user is not None:
        check_string(user, f"{path}.user", errors, max_length=254, min_length=1)

    call = _validate_call(raw["call"], f"{path}.call", errors) if "call" in raw else None
    calls_before: list[tuple[str, object]] = []
    if "before" in raw:
        if "call" not in raw:
            errors.append(FieldError(f"{path}.before", "is only for a case with a call"))
        raw_before = raw["before"]
        if not isinstance(raw_before, list):
            errors.append(
                FieldError(f"{path}.before", f"must be an array, not {type_name(raw_before)}")
            )
        elif len(raw_before) > MAX_BEFORE_CALLS:
            errors.append(
                FieldError(f"{path}.before", f"must hold at most {MAX_BEFORE_CALLS} calls")
            )
        else:
            for index, item in enumerate(raw_before):
                made = _validate_call(item, index_path(f"{path}.before", index), errors)
                if made is not None:
                    calls_before.append(made)

    expect = raw.get("expect", _UNSET)
    if expect is _UNSET:
        errors.append(FieldError(f"{path}.expect", "is required"))
    elif "call" in raw:
        _validate_call_expect(expect, f"{path}.expect", errors)
    else:
        _validate_plan_expect(expect, f"{path}.expect", errors)

    if len(errors) > before:
        return None
    assert isinstance(name, str) and isinstance(expect, Mapping)
    return Case(
        name=name,
        plan=plan,
        role=role,
        groups=member_groups(groups),
        user=user,
        call=call,
        before=tuple(calls_before),
        expect=expect,
    )


def _validate_call(raw: object, path: str, errors: list[FieldError]) -> tuple[str, object] | None:
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, f"a call must be an object, not {type_name(raw)}"))
        return None
    before = len(errors)
    check_unknown_keys(raw, _CALL_FIELDS, path, errors)
    tool = raw.get("tool", _UNSET)
    if tool is _UNSET:
        errors.append(FieldError(f"{path}.tool", "is required"))
    elif not isinstance(tool, str):
        errors.append(FieldError(f"{path}.tool", f"must be a string, not {type_name(tool)}"))
    # The arguments are the guard's to judge (invalid_arguments is a decision): any JSON.
    args = raw.get("args", {})
    if len(errors) > before:
        return None
    assert isinstance(tool, str)
    return tool, args


def _check_step_list(value: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(value, list):
        errors.append(FieldError(path, f"must be an array of step indexes, not {type_name(value)}"))
        return
    for index, item in enumerate(value):
        check_integer(item, index_path(path, index), errors, minimum=0, maximum=MAX_STEPS - 1)


def _validate_plan_expect(raw: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(raw)}"))
        return
    check_unknown_keys(raw, _PLAN_EXPECT_FIELDS, path, errors)
    outcome = raw.get("plan", _UNSET)
    if outcome is _UNSET:
        errors.append(
            FieldError(f"{path}.plan", f"is required (one of {', '.join(PLAN_OUTCOMES)})")
        )
    elif outcome not in PLAN_OUTCOMES:
        errors.append(FieldError(f"{path}.plan", f"must be one of {', '.join(PLAN_OUTCOMES)}"))
    if "steps" in raw:
        if outcome != POLICY_DENIED:
            errors.append(FieldError(key_path(path, "steps"), "is only for policy_denied"))
        _check_step_list(raw["steps"], key_path(path, "steps"), errors)
    if "review" in raw:
        if outcome != ISSUED:
            errors.append(FieldError(key_path(path, "review"), "is only for issued"))
        _check_step_list(raw["review"], key_path(path, "review"), errors)


def _validate_call_expect(raw: object, path: str, errors: list[FieldError]) -> None:
    if not isinstance(raw, Mapping):
        errors.append(FieldError(path, f"must be an object, not {type_name(raw)}"))
        return
    check_unknown_keys(raw, _CALL_EXPECT_FIELDS, path, errors)
    decision = raw.get("decision", _UNSET)
    codes = ", ".join(sorted(DECISION_CODES))
    if decision is _UNSET:
        errors.append(FieldError(f"{path}.decision", f"is required (one of {codes})"))
    elif decision not in DECISION_CODES:
        errors.append(FieldError(f"{path}.decision", f"must be one of {codes}"))
    if "step" in raw and raw["step"] is not None:
        check_integer(raw["step"], f"{path}.step", errors, minimum=0, maximum=MAX_STEPS - 1)
    if "rule" in raw and raw["rule"] is not None:
        check_integer(raw["rule"], f"{path}.rule", errors, minimum=0, maximum=10**6)


def cases_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a cases file. `validate_cases` is the authority (it
    also checks that named plans exist and names are unique); the schema is for editors."""
    step_list = {"type": "array", "items": {"type": "integer", "minimum": 0}}
    index_or_null = {"type": ["integer", "null"], "minimum": 0}
    call = {
        "type": "object",
        "required": ["tool"],
        "additionalProperties": False,
        "properties": {
            "tool": {"type": "string"},
            "args": {"description": "the call's arguments (an object; any JSON is decided)"},
        },
    }
    plan_expect = {
        "type": "object",
        "required": ["plan"],
        "additionalProperties": False,
        "properties": {
            "plan": {"enum": list(PLAN_OUTCOMES)},
            "steps": {**step_list, "description": "the refused steps (policy_denied)"},
            "review": {**step_list, "description": "the steps a person approves (issued)"},
        },
    }
    call_expect = {
        "type": "object",
        "required": ["decision"],
        "additionalProperties": False,
        "properties": {
            "decision": {"enum": sorted(DECISION_CODES)},
            "step": index_or_null,
            "rule": {**index_or_null, "description": "null: the policy default"},
        },
    }
    case_common = {
        "name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH},
        "plan": {
            "oneOf": [
                {"type": "string", "description": "the name of a plan in plans"},
                {"type": "object", "description": "a plan (the plan schema of guard.plan)"},
            ]
        },
        "role": {"type": ["string", "null"], "minLength": 1},
        "groups": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "user": {"type": "string", "description": "replaces the plan's user"},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:plangate:policy-cases:1",
        "title": "Plangate policy test cases (plangate test)",
        "type": "object",
        "required": ["version", "cases"],
        "additionalProperties": False,
        "properties": {
            "version": {"const": CASES_VERSION},
            "plans": {"type": "object", "additionalProperties": {"type": "object"}},
            "cases": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CASES,
                "items": {
                    "oneOf": [
                        {
                            "title": "a plan case: issuance's answer",
                            "type": "object",
                            "required": ["name", "plan", "expect"],
                            "additionalProperties": False,
                            "not": {"required": ["before"]},
                            "properties": {**case_common, "expect": plan_expect},
                        },
                        {
                            "title": "a call case: the guard's decision",
                            "type": "object",
                            "required": ["name", "plan", "call", "expect"],
                            "additionalProperties": False,
                            "properties": {
                                **case_common,
                                "call": call,
                                "before": {"type": "array", "items": call},
                                "expect": call_expect,
                            },
                        },
                    ]
                },
            },
        },
    }


# --- running ------------------------------------------------------------------------------


def case_plan(case: Case) -> dict[str, Any]:
    """The case's plan, validated (DocumentInvalid otherwise), its user replaced when the
    case names one."""
    document = case.plan
    if case.user is not None and isinstance(document, Mapping):
        document = {**document, "user": case.user}
    return validate_plan(document)


def run_case(policy: dict[str, Any], case: Case) -> CaseResult:
    """Run ``case`` under the validated ``policy``."""
    # Step lists compare as sets: the answer lists them in plan order.
    expected = {
        name: sorted(value) if name in ("steps", "review") else value
        for name, value in case.expect.items()
    }
    try:
        plan = case_plan(case)
    except DocumentInvalid as error:
        errors = tuple(item.prefixed("plan") for item in error.errors)
        actual: dict[str, Any] = {"plan": INVALID_PLAN} if case.call is None else {"decision": None}
        return _result(case, expected, actual, "the plan is invalid (invalid_plan)", errors)
    answer = plan_answer(policy=policy, plan=plan, role=case.role, groups=case.groups)
    if case.call is None:
        return _plan_result(case, expected, answer)
    if not answer.allowed:
        return _result(
            case,
            expected,
            {"decision": None},
            "the plan is refused (policy_denied): no token, no call decided",
            tuple(answer.refusal_errors()),
        )
    token = simulated_token(plan=plan, policy=policy, role=case.role, groups=case.groups)
    decision = call_decide(token, [*case.before, case.call])[-1]
    return _result(case, expected, _call_actual(decision, expected), decision.reason)


def _plan_result(case: Case, expected: dict[str, Any], answer: PlanAnswer) -> CaseResult:
    actual: dict[str, Any] = {"plan": ISSUED if answer.allowed else POLICY_DENIED}
    if "steps" in expected:
        actual["steps"] = [denial.step for denial in answer.denials]
    if "review" in expected:
        actual["review"] = [review.step for review in answer.reviews]
    if answer.allowed:
        # For people: steps counted from 1 (the expectations above compare indexes).
        numbers = ", ".join(str(review.step + 1) for review in answer.reviews)
        detail = "issued" + (f"; a person approves step(s) {numbers} first" if numbers else "")
    else:
        detail = f"refused (policy_denied): {len(answer.denials)} step(s)"
    return _result(case, expected, actual, detail, tuple(answer.refusal_errors()))


def _call_actual(decision: CallDecision, expected: Mapping[str, Any]) -> dict[str, Any]:
    actual: dict[str, Any] = {"decision": decision.code.value}
    if "step" in expected:
        actual["step"] = decision.step
    if "rule" in expected:
        actual["rule"] = decision.rule
    return actual


def _result(
    case: Case,
    expected: dict[str, Any],
    actual: dict[str, Any],
    detail: str,
    errors: Sequence[FieldError] = (),
) -> CaseResult:
    passed = all(actual.get(name) == value for name, value in expected.items())
    return CaseResult(case, passed, expected, actual, detail, tuple(errors))
