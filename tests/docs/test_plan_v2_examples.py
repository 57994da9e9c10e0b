"""The version-2 plans docs/plans.md, README.md and the guard's page show are the ones in
examples/plan_v2/, and their cases pass offline, run the way a team's CI runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plan_v2"


def read(name: str) -> dict:
    return json.loads((EXAMPLE / name).read_text())


def test_the_cases_test_the_plans_the_pages_show():
    cases = read("cases.json")

    assert cases["plans"] == {
        "read before write": read("read_before_write.json"),
        "refunds": read("refunds.json"),
    }
    page = (ROOT / "docs" / "plans.md").read_text()
    for name in ("read_before_write.json", "refunds.json", "cases.json", "Makefile"):
        assert f'--8<-- "examples/plan_v2/{name}"' in page


def test_the_readme_shows_the_examples_budget_as_it_is():
    budget = read("refunds.json")["budgets"]

    assert f'"budgets": {json.dumps(budget)}' in (ROOT / "README.md").read_text()


def test_the_examples_cases_pass_offline():
    result = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(EXAMPLE),
            "plan-test",
            f"PLANGATE={sys.executable} -m guard.cli",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == f"{len(read('cases.json')['cases'])} passed, 0 failed"
    assert not [line for line in lines if line.startswith("FAIL")]
