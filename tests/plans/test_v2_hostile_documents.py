"""Hostile version-2 plans through POST /v1/plans (docs/decisions/0066): deep, huge or odd
operands, budgets and orders are refused with a problem, never a server error."""

from __future__ import annotations

from typing import Any

import pytest

from policies.services import policy_set
from tests.conftest import plan_document

from .test_issue_v2 import POLICY_V2


def deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": [value]}
    return value


STEP = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/shop"}}}

HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("deep url operand", {"steps": [{**STEP, "args": {"u": {"url": deep(200)}}}]}),
    ("url host of a million", {"steps": [{**STEP, "args": {"u": {"url": {
        "scheme": ["https"], "host": ["a.dev"] * 1_001}}}}]}),
    ("argv of objects", {"steps": [{**STEP, "args": {"c": {"argv": {"cmd": [{}]}}}}]}),
    ("cidr of garbage", {"steps": [{**STEP, "args": {"a": {"cidr": ["10.0.0.0/99", 7]}}}]}),
    ("subpath of NUL", {"steps": [{**STEP, "args": {"p": {"subpath": "/a\x00b"}}}]}),
    ("maxLength of 10**400", {"steps": [{**STEP, "args": {"p": {"maxLength": 10**400}}}]}),
    ("type of a list", {"steps": [{**STEP, "args": {"p": {"type": ["string"]}}}]}),
    ("budget max of 1e400 as text", {"budgets": [
        {"id": "b", "arg": "amount", "steps": ["s"], "max": "1e400"}]}),
    ("budget max negative", {"budgets": [
        {"id": "b", "arg": "amount", "steps": ["s"], "max": -1}]}),
    ("budget max boolean", {"budgets": [
        {"id": "b", "arg": "amount", "steps": ["s"], "max": True}]}),
    ("budget of an unknown step", {"budgets": [
        {"id": "b", "arg": "amount", "steps": ["nope"], "max": 5}]}),
    ("after itself", {"steps": [{**STEP, "id": "s", "after": ["s"]}]}),
    ("after a cycle", {"steps": [
        {**STEP, "id": "s", "after": ["t"]}, {**STEP, "id": "t", "after": ["s"]}]}),
    ("after of an object", {"steps": [{**STEP, "id": "s", "after": {"s": 1}}]}),
    ("additionalArgs a string", {"steps": [{**STEP, "additionalArgs": "false"}]}),
    ("duplicate ids", {"steps": [{**STEP, "id": "s"}, {**STEP, "id": "s"}]}),
    ("budgets an object", {"budgets": {"b": 1}}),
]  # fmt: skip


@pytest.mark.parametrize(("about", "changes"), HOSTILE, ids=[about for about, _ in HOSTILE])
def test_a_hostile_version_2_plan_is_refused_not_a_server_error(agent, team, about, changes):
    policy_set(team=team, slug="default", document=POLICY_V2)
    steps = changes.get("steps", [{**STEP, "id": "s"}])
    document = plan_document(version=2, goal="g", steps=steps)
    if "budgets" in changes:
        document["budgets"] = changes["budgets"]
    response = agent.client.post("/v1/plans", {"plan": document}, format="json")
    assert 400 <= response.status_code < 500, (about, response.status_code, response.content)
