"""The example policy repository: its cases pass, and every `plangate` line of its CI
workflow is a command the CLI accepts."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from guard.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2] / "examples" / "policy_repo"


def test_the_examples_policy_passes_its_cases(capsys):
    for policy in sorted((REPO / "policies").glob("*.json")):
        if policy.name.endswith(".cases.json"):
            continue
        cases = policy.with_name(policy.stem + ".cases.json")
        assert main(["test", str(policy), str(cases)]) == 0, capsys.readouterr().out


def test_every_plangate_line_of_the_workflow_parses():
    workflow = yaml.safe_load((REPO / ".github/workflows/policies.yml").read_text())
    lines = [
        line.strip()
        for step in workflow["jobs"]["policies"]["steps"]
        for line in str(step.get("run", "")).splitlines()
        if line.strip().startswith(("plangate ", "if [ -f"))
    ]
    commands = [line[line.index("plangate ") :].rstrip("; fi") for line in lines]
    assert {shlex.split(command)[1] for command in commands} == {"test", "policy"}
    assert any("push" in command and "--fail-on-impact" in command for command in commands)
    for command in commands:
        words = [word.replace('"', "") for word in shlex.split(command)[1:]]
        try:
            build_parser().parse_args(words)
        except SystemExit as exit:  # argparse refuses with exit 2
            pytest.fail(f"{command!r}: not a plangate command ({exit.code})")
