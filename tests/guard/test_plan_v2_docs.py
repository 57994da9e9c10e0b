"""The guard page's version-2 example runs as written: the Python block under "Order and
budgets (plan version 2)" in docs/guard.md, with a guard for an agent whose policy is the
example's, against the control plane in process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policies.services import policy_set
from tests.conftest import AgentPersona, make_agent

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plan_v2"
HEADING = "### Order and budgets (plan version 2)"


@pytest.fixture
def agent(team, member) -> AgentPersona:
    policy = json.loads((EXAMPLE / "policy.json").read_text())
    return make_agent(team, "refunder", policy_set(team=team, slug="refunds", document=policy))


def the_pages_block() -> str:
    page = (ROOT / "docs" / "guard.md").read_text()
    section = page[page.index(HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_the_guard_pages_order_and_budget_example_runs_as_written(make_guard, monkeypatch):
    monkeypatch.chdir(ROOT)
    guard = make_guard()
    ran: list[tuple[str, object]] = []

    exec(  # noqa: S102 - the documentation's own code, run as a reader would run it
        the_pages_block(),
        {
            "guard": guard,
            "get_order": lambda order: ran.append(("get_order", order)),
            "pay": lambda order, amount: ran.append(("pay", amount)),
        },
    )

    assert ran == [("get_order", "A-1001"), ("pay", 300), ("pay", 200)]
    assert guard.status().steps[1].used == 2
