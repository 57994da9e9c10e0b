"""Hypothesis strategies for version-2 plans (docs/decisions/0066)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from guard.plan import DEFAULT_MAX_CALLS

from .strategies import argument_names, constraints, document_characters, emails, tool_names

# Operands of the operators version 2 adds, each valid as written (normal forms).
shape_constraints = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer"},
        {"maxLength": 0},
        {"maxLength": 200},
        {"subpath": "/"},
        {"subpath": "/srv/repo/src"},
        {"url": {"scheme": ["https"], "host": ["api.github.com", "*.acme.dev"]}},
        {
            "url": {
                "scheme": ["http", "https"],
                "host": ["10.0.0.1"],
                "pathPrefix": "/repos/acme/",
                "ports": [8443],
            }
        },
        {"cidr": ["10.0.0.0/8", "2001:db8::/32"]},
        {"argv": {"cmd": ["git", "pytest"], "maxArgs": 8}},
        {"argv": {"cmd": ["git"], "options": ["--quiet", "-C"]}},
    ]
).map(copy.deepcopy)

v2_args_objects = st.dictionaries(argument_names, constraints() | shape_constraints, max_size=3)


@st.composite
def v2_plan_pairs(draw: st.DrawFn, max_steps: int = 6) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid version-2 plan twice: with optional fields left out where the draw says so,
    and with every default written. `after` names earlier steps only, so it is acyclic."""
    count = draw(st.integers(min_value=1, max_value=max_steps))
    ids = [f"s{index}" if draw(st.booleans()) else None for index in range(count)]
    sparse_steps, full_steps = [], []
    for index in range(count):
        earlier = [name for name in ids[:index] if name is not None]
        step: dict[str, Any] = {"tool": draw(tool_names)}
        full: dict[str, Any] = {"tool": step["tool"]}
        if ids[index] is not None:
            step["id"] = full["id"] = ids[index]
        for key, default, strategy in (
            ("args", {}, v2_args_objects),
            ("maxCalls", DEFAULT_MAX_CALLS, st.integers(min_value=1, max_value=1_000_000)),
            ("required", False, st.booleans()),
            ("after", [], st.lists(st.sampled_from(earlier), unique=True) if earlier else None),
            ("additionalArgs", True, st.booleans()),
        ):
            if strategy is not None and draw(st.booleans()):
                value = draw(strategy)
                step[key] = value
                full[key] = copy.deepcopy(value)
            else:
                full[key] = copy.deepcopy(default)
        sparse_steps.append(step)
        full_steps.append(full)
    named = [name for name in ids if name is not None]
    budgets: list[dict[str, Any]] = []
    if named:
        budgets = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "arg": st.sampled_from(["amount", "n"]),
                        "steps": st.lists(st.sampled_from(named), min_size=1, unique=True),
                        "max": st.integers(min_value=1, max_value=10**6)
                        | st.floats(min_value=0.01, max_value=1e6),
                    }
                ),
                max_size=3,
            )
        )
        for index, budget in enumerate(budgets):
            budget["id"] = f"b{index}"
    head = {
        "version": 2,
        "goal": draw(st.text(document_characters, min_size=1, max_size=20).filter(str.strip)),
        "user": draw(emails),
    }
    sparse: dict[str, Any] = {**head, "steps": sparse_steps}
    write_budgets: bool = draw(st.booleans())
    if budgets or write_budgets:
        sparse["budgets"] = budgets
    return sparse, {**head, "steps": full_steps, "budgets": copy.deepcopy(budgets)}


def v2_plans(max_steps: int = 6) -> st.SearchStrategy[dict[str, Any]]:
    """Valid version-2 plan documents, with optional fields present or not."""
    return v2_plan_pairs(max_steps).map(lambda pair: pair[0])
