"""`manage.py preview_policy` counts steps as people do (docs/decisions/0058): each refused
or warned step's `index`, from 0 as the `steps[0]` paths, sits beside its `number`, from 1,
as the preview page and the guard's reasons count it."""

from __future__ import annotations

import copy
import json
from io import StringIO

from django.core.management import call_command

from tests.conftest import POLICY
from tests.policies.impact_helpers import issue

PUBLIC = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}}


def narrowed() -> dict:
    """`repo glob acme/*` narrowed to `acme/public-*`."""
    document = copy.deepcopy(POLICY)
    document["rules"][0]["args"] = {"repo": {"glob": "acme/public-*"}}
    return document


def test_preview_policy_numbers_refused_and_warned_steps_from_1(agent, tmp_path):
    app = issue(
        agent,
        goal="app",
        steps=[PUBLIC, {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/app"}}}],
    )
    wide = issue(
        agent,
        goal="wide",
        steps=[
            PUBLIC,
            PUBLIC,
            {"tool": "github_list_issues", "args": {"repo": {"glob": "acme/*"}}},
        ],
    )
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(narrowed()))
    out = StringIO()

    call_command("preview_policy", "default", "--file", str(path), stdout=out)

    answer = json.loads(out.getvalue())
    [refused] = answer["plans"]
    assert refused["id"] == app.pk
    assert [(s["index"], s["number"], s["path"]) for s in refused["steps"]] == [
        (1, 2, "steps[1].args.repo")
    ]
    [warned] = answer["warned"]
    assert warned["id"] == wide.pk
    assert [(w["index"], w["number"], w["path"]) for w in warned["warnings"]] == [
        (2, 3, "steps[2].args.repo")
    ]
    # everything else is as policy_impact's own JSON has it
    assert {key for key in refused["steps"][0]} == {
        "index",
        "number",
        "tool",
        "rule",
        "reason",
        "path",
    }
