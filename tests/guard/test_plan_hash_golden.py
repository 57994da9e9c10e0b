"""Version-1 plans hash as they always have.

Every token ever signed carries its plan's hash (`ph`), and guards of every version
recompute it: a version-1 plan must keep its hash byte for byte whatever the plan language
grows (docs/decisions/0066). The fixture pins the hashes of plans that reach every operator,
every JSON type, numbers and text RFC 8785 writes its own way, and the 50-step limit; they
were computed once and are never regenerated. A change that moves one is a breaking change
for every token in flight, not a fixture to update.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.plan import plan_hash, validate_plan

GOLDEN = json.loads((Path(__file__).parent / "golden" / "plan_hashes_v1.json").read_text("utf-8"))


@pytest.mark.parametrize("case", GOLDEN, ids=[case["case"] for case in GOLDEN])
def test_a_version_1_plan_keeps_its_hash(case):
    assert plan_hash(validate_plan(case["plan"])) == case["hash"]


def test_the_fixture_reaches_every_operator_and_the_step_limit():
    operators = {
        operator
        for case in GOLDEN
        for step in case["plan"]["steps"]
        for constraint in step["args"].values()
        for operator in constraint
    }
    assert operators == {"eq", "in", "glob", "regex", "lte", "gte"}
    assert max(len(case["plan"]["steps"]) for case in GOLDEN) == 50
