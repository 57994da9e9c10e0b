"""`plangate-mcp` started as a sub-agent's gateway with a child plan (``--delegation FILE``
or ``PLANGATE_DELEGATION``): every call is decided under the child plan from the first,
``declare_plan`` is answered ``delegated_plan``, and a delegation that is not the receiving
agent's stops the gateway before anything runs (docs/decisions/0070)."""

from __future__ import annotations

import copy
import dataclasses
import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from guard.agent import Delegation, Guard
from guard.agent.tools import DECLARE_PLAN_TOOL
from guard.dpop import DpopKey
from guard.gateway.cli import EXIT_USAGE, main
from members.services import agent_update
from plans.models import Plan
from policies.services import policy_set
from teams.models import Team
from tests.conftest import make_agent

from .conftest import (
    GATEWAY_PLAN,
    GATEWAY_POLICY,
    ROOT,
    UPSTREAM_COMMAND,
    ControlPlane,
    gateway_environment,
)
from .test_gateway import text

pytestmark = pytest.mark.slow  # starts the gateway and the test server as processes

CHILD_PLAN = {
    "version": 1,
    "goal": "Echo the greeting once",
    "user": "alice@acme.dev",
    "steps": [{"tool": "echo", "args": {"text": {"eq": "hello"}}, "maxCalls": 1}],
}


@pytest.fixture
def worker(team):
    """The sub-agent: another agent of the team, accepting delegations."""
    version = policy_set(team=team, slug="worker", document=GATEWAY_POLICY)
    persona = make_agent(team, "gateway-worker", version)
    agent_update(agent=persona.agent, accepts_delegations=True)
    return persona


@pytest.fixture
def delegation(control_plane: ControlPlane, worker) -> Iterator[Delegation]:
    """The parent agent's guard declares the gateway plan and delegates an echo to the
    worker; it stays open while the test runs (closing it would end the parent)."""
    parent = Guard(control_plane.url, control_plane.agent.api_key, issuer=control_plane.issuer)
    try:
        parent.declare(copy.deepcopy(GATEWAY_PLAN))
        yield parent.delegate(copy.deepcopy(CHILD_PLAN), to=worker.agent.pk)
    finally:
        parent.close()


def sub_agent_gateway(api_key: str, *options: str, **environment: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "guard.gateway", *options, "--", *UPSTREAM_COMMAND],
        env={**gateway_environment(api_key), **environment},
        cwd=str(ROOT),
    )


def scenario(parameters: StdioServerParameters) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async with Client(parameters) as client:
            return {
                "allowed": await client.call_tool("echo", {"text": "hello"}),
                "other_argument": await client.call_tool("echo", {"text": "goodbye"}),
                "outside": await client.call_tool("count", {"n": 1}),
                "again": await client.call_tool("echo", {"text": "hello"}),
                "declared": await client.call_tool(DECLARE_PLAN_TOOL, copy.deepcopy(GATEWAY_PLAN)),
            }

    return anyio.run(run)


def test_a_sub_agents_gateway_decides_under_the_child_plan_from_the_start(
    delegation, worker, tmp_path: Path
):
    path = tmp_path / "child.json"
    path.write_text(delegation.to_json(), encoding="utf-8")

    results = scenario(sub_agent_gateway(worker.api_key, "--delegation", str(path)))

    assert results["allowed"].is_error is False
    assert results["allowed"].structured_content == {"text": "hello"}
    assert text(results["other_argument"]).startswith("not_in_plan: ")
    assert text(results["outside"]).startswith("not_in_plan: ")
    assert text(results["again"]).startswith("max_calls_exceeded: ")
    assert results["declared"].is_error is True
    assert results["declared"].structured_content["code"] == "delegated_plan"


def test_the_delegation_may_come_in_the_environment(delegation, worker):
    parameters = sub_agent_gateway(worker.api_key, PLANGATE_DELEGATION=delegation.to_json())

    results = scenario(parameters)

    assert results["allowed"].is_error is False
    assert text(results["outside"]).startswith("not_in_plan: ")


def test_a_delegation_for_another_agent_stops_the_gateway(delegation, worker, control_plane):
    changed = dataclasses.replace(delegation, agent=control_plane.agent.agent.pk)

    result = subprocess.run(
        [sys.executable, "-m", "guard.gateway", "--", *UPSTREAM_COMMAND],
        env={**gateway_environment(worker.api_key), "PLANGATE_DELEGATION": changed.to_json()},
        cwd=str(ROOT),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 1
    assert "the delegation was not taken: plan_swapped" in result.stderr


def test_an_unreadable_delegation_is_a_usage_error(monkeypatch, capsys, tmp_path: Path):
    monkeypatch.setenv("PLANGATE_API_KEY", "pg_x")
    monkeypatch.delenv("PLANGATE_URL", raising=False)
    path = tmp_path / "child.json"
    path.write_text('{"format": "plangate-delegation/1"}', encoding="utf-8")

    for argv in (["--delegation", str(path), "--", "server"], ["--delegation", "/nonexistent"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == EXIT_USAGE
    error = capsys.readouterr().err
    assert "invalid_delegation" in error and "planId" in error
    assert "the delegation cannot be read" in error


def test_a_child_bound_to_a_key_made_beforehand_runs_in_the_gateway_holding_it(
    control_plane: ControlPlane, worker, team, tmp_path: Path, capsys
):
    # A team that binds every token: the child must be bound to the sub-agent's key, which
    # the gateway cannot make at start, so it is made first and its thumbprint handed over.
    Team.objects.filter(pk=team.pk).update(require_token_binding=True)
    key_path = tmp_path / "reader.key"
    assert main(["--new-dpop-key", str(key_path)]) == 0
    jkt = json.loads(capsys.readouterr().out)["jkt"]
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert DpopKey.load(key_path).jkt == jkt

    parent = Guard(control_plane.url, control_plane.agent.api_key, issuer=control_plane.issuer)
    try:
        parent.declare(copy.deepcopy(GATEWAY_PLAN))
        delegation = parent.delegate(copy.deepcopy(CHILD_PLAN), to=worker.agent.pk, jkt=jkt)
        path = tmp_path / "child.json"
        path.write_text(delegation.to_json(), encoding="utf-8")

        results = scenario(
            sub_agent_gateway(
                worker.api_key, "--dpop-key", str(key_path), "--delegation", str(path)
            )
        )
        without_key = subprocess.run(
            [sys.executable, "-m", "guard.gateway", "--delegation", str(path), "--", "x"],
            env=gateway_environment(worker.api_key),
            cwd=str(ROOT),
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        parent.close()

    assert Plan.objects.get(pk=delegation.plan_id).jkt == jkt
    assert results["allowed"].is_error is False
    assert text(results["outside"]).startswith("not_in_plan: ")
    assert without_key.returncode == 1
    assert "bound to another guard's key" in without_key.stderr


def test_a_key_file_is_never_overwritten_and_a_bad_one_is_a_usage_error(
    monkeypatch, capsys, tmp_path: Path
):
    path = tmp_path / "reader.key"
    path.write_text("not a key", encoding="utf-8")
    monkeypatch.setenv("PLANGATE_API_KEY", "pg_x")

    assert main(["--new-dpop-key", str(path)]) == EXIT_USAGE
    assert path.read_text(encoding="utf-8") == "not a key"
    with pytest.raises(SystemExit) as exit_info:
        main(["--dpop-key", str(path), "--url", "http://x", "--", "server"])
    assert exit_info.value.code == EXIT_USAGE
    assert "the DPoP key cannot be read" in capsys.readouterr().err
