"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against
the gateway's HTTP side: every server scenario is run against a reference server over
streamable HTTP, and against `plangate-mcp serve` wrapping the same server (a stdio command
upstream) with a plan declared. What the bare server passes, the gateway passes too, with
as many checks run.

The reference server is ours, conformance_server.py (the official Python SDK's low-level
server, with a streamable HTTP mode and a stdio one): the suite's own
(``examples/servers/typescript`` of its repository) is published on no registry, and npm's
``@modelcontextprotocol/server-everything`` implements few of the fixtures the suite asks
for. Ours implements them all and passes every check the suite makes (the figures are in
docs/gateway.md), so the comparison holds the gateway to every one.

The suite needs Node >= 22 (it calls ``fs.globSync``); the set-up installs npm's ``node@22``
package, which ships the binary, beside the suite (tests/node_packages.py)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from plans.models import Plan
from policies.services import policy_set
from tests.conftest import IN_CI, make_agent
from tests.integration.processes import (
    SHARED_DATABASE_MARKS,
    free_port,
    start,
    stop,
    tail,
    wait_for,
)
from tests.node_packages import node_folder

from .conftest import ControlPlane

pytestmark = pytest.mark.slow  # installs the suite, starts servers and runs it four times

#: The packages the test runs (npm specs, pinned).
NODE_22 = "node@22"
CONFORMANCE = "@modelcontextprotocol/conformance@0.1.16"

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROXY = HERE / "conformance_proxy.py"
CLIENT = HERE / "conformance_client.py"
SERVER = HERE / "conformance_server.py"

#: The client scenarios, but the auth/* ones (the gateway sends the upstream server no
#: credential of the client's).
CLIENT_SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]

#: The tools the suite's scenarios call, one unconstrained step each: the plan the
#: gateway's session holds before the suite's first request.
SUITE_TOOLS = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_error_handling",
    "test_reconnection",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
]
CONFORMANCE_PLAN = {
    "version": 1,
    "goal": "Run the MCP conformance suite's tool scenarios",
    "user": "alice@acme.dev",
    "steps": [{"tool": tool} for tool in SUITE_TOOLS],
}
CONFORMANCE_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [{"effect": "allow", "tools": ["*"]}],
}


@dataclass(frozen=True)
class Suite:
    node: Path  # node 22, from npm
    conformance: Path  # the suite's command (its dist/index.js)

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.node), str(self.conformance), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )

    def server_scenarios(self) -> list[str]:
        listed = self.run("list").stdout
        server_part = listed.split("Client scenarios")[0]
        return re.findall(r"^\s*- (\S+)", server_part, re.M)


#: Per scenario, its checks: each a dict as the suite writes it to checks.json.
Results = dict[str, list[dict[str, Any]]]


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}: CI must run the conformance suite")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def suite() -> Suite:
    folder = node_folder(NODE_22, CONFORMANCE)
    modules = folder / "node_modules"
    node = modules / ".bin" / "node"
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if not version.startswith("v22."):
        _unavailable(f"npm's {NODE_22} gave no node 22 ({version.strip() or 'no binary'})")
    return Suite(
        node=node,
        conformance=modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )


@contextlib.contextmanager
def serving(args: list[str], url: str, log: Path, **env: str) -> Iterator[str]:
    """A server process listening at ``url`` (any HTTP answer will do), stopped afterwards."""
    process = start([str(arg) for arg in args], env={**os.environ, **env}, log=log)

    def up() -> bool:
        if process.poll() is not None:
            return True
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            return False
        return True

    try:
        assert wait_for(up, timeout=60) and process.poll() is None, tail(log)
        yield url
    finally:
        stop(process, timeout=10)


def bare_server(log: Path) -> contextlib.AbstractContextManager[str]:
    """The reference server's own streamable HTTP side."""
    port = free_port()
    command = [sys.executable, SERVER, "--http", str(port)]
    return serving(command, f"http://localhost:{port}/mcp", log)


def proxy(
    target: str, credential: str, declarations: Path, log: Path
) -> contextlib.AbstractContextManager[str]:
    """conformance_proxy.py in front of ``target``: the bearer credential, a plan declared."""
    port = free_port()
    plan = declarations.with_suffix(".plan.json")
    plan.write_text(json.dumps(CONFORMANCE_PLAN))
    command = [sys.executable, PROXY, port, target, plan, declarations]
    return serving(
        command, f"http://localhost:{port}/mcp", log, PLANGATE_GATEWAY_CREDENTIAL=credential
    )


def read_results(out: Path, prefix: str = "") -> Results:
    """The checks the suite wrote under ``out``, per scenario."""
    results: Results = {}
    for checks in sorted(out.glob(f"{prefix}*/checks.json")):
        match = re.fullmatch(rf"{prefix}(.+)-\d{{4}}-\d\d-\d\dT[\d-]+Z", checks.parent.name)
        assert match, checks
        results[match.group(1)] = json.loads(checks.read_text())
    return results


def run_server_scenarios(suite: Suite, url: str, out: Path) -> Results:
    """Every server scenario, pending ones included, against ``url``: checks per scenario."""
    done = suite.run("server", "--url", url, "--suite", "all", "-o", str(out))
    (out / "suite.log").write_text(done.stdout + done.stderr)
    results = read_results(out, "server-")
    assert results, done.stdout + done.stderr
    return results


def run_client_scenarios(suite: Suite, command: str, out: Path, env: dict[str, str]) -> Results:
    """The client scenarios, each with a server of the suite's, against ``command``."""
    for scenario in CLIENT_SCENARIOS:
        done = suite.run(
            "client", "--command", command, "--scenario", scenario, "-o", str(out), env=env
        )
        (out / f"{scenario}.log").write_text(done.stdout + done.stderr)
    results = read_results(out)
    assert sorted(results) == sorted(CLIENT_SCENARIOS), sorted(results)
    return results


def outcomes(checks: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """(check id, status) counted, for the checks that pass or fail (not INFO or WARNING)."""
    return Counter(
        (check["id"], check["status"])
        for check in checks
        if check["status"] in ("SUCCESS", "FAILURE")
    )


def passed(checks: list[dict[str, Any]]) -> Counter[str]:
    return Counter(
        check_id for (check_id, status) in outcomes(checks).elements() if status == "SUCCESS"
    )


def figures(results: Results) -> tuple[int, int]:
    """(checks passed, checks run) over every scenario."""
    counted = [outcomes(checks) for checks in results.values()]
    run = sum(sum(count.values()) for count in counted)
    return sum(count[key] for count in counted for key in count if key[1] == "SUCCESS"), run


def tool_results(checks: list[dict[str, Any]]) -> list[Any]:
    """The tools/call results a scenario's checks recorded (content and error flag)."""
    return [
        {k: v for k, v in check["details"]["result"].items() if k in ("content", "isError")}
        for check in checks
        if isinstance(check.get("details"), dict)
        and "content" in check["details"].get("result", {})
    ]


@pytest.fixture(scope="module")
def bare_results(suite: Suite, tmp_path_factory) -> Results:
    out = tmp_path_factory.mktemp("conformance-bare")
    with bare_server(out / "server.log") as url:
        return run_server_scenarios(suite, url, out)


def test_every_server_scenario_runs_against_the_bare_server(suite, bare_results):
    assert sorted(bare_results) == sorted(suite.server_scenarios())
    # The bare server passes every check the suite makes: each one a check the gateway is
    # held to below.
    checks_passed, checks_run = figures(bare_results)
    assert 0 < checks_passed == checks_run, bare_results
    assert passed(bare_results["server-initialize"]) == Counter({"server-initialize": 1})


def test_the_shim_in_front_of_the_bare_server_changes_no_check(suite, bare_results, tmp_path):
    """The shim the gateway half needs is itself transparent: every check comes out as it
    does without it (the server answers its declare_plan with an unknown-tool error)."""
    declarations = tmp_path / "declarations.jsonl"
    with (
        bare_server(tmp_path / "server.log") as url,
        proxy(url, "not-checked", declarations, tmp_path / "proxy.log") as proxied,
    ):
        results = run_server_scenarios(suite, proxied, tmp_path)

    assert {name: outcomes(checks) for name, checks in results.items()} == {
        name: outcomes(checks) for name, checks in bare_results.items()
    }
    assert declarations.read_text().count("\n") >= len(results) - 1


def on_postgresql(test):
    """The live control plane takes the declarations of many sessions while their guards
    read their plans' status: on PostgreSQL, as in production (SQLite's shared in-memory
    test database answers such overlapping requests "database table is locked")."""
    for mark in SHARED_DATABASE_MARKS:
        test = mark(test)
    return test


@pytest.fixture
def conformance_plane(live_server, team, member) -> ControlPlane:
    """A control plane whose policy allows any tool: the plan decides."""
    version = policy_set(team=team, slug="default", document=CONFORMANCE_POLICY)
    agent = make_agent(team, "conformance-agent", version)
    return ControlPlane(url=live_server.url, issuer=settings.PLANGATE_ISSUER, agent=agent)


def assert_holds_up(bare: Results, gateway: Results) -> None:
    """Every check passed without the gateway is passed with it, and as many are run."""
    assert sorted(gateway) == sorted(bare)
    for scenario, checks in bare.items():
        assert passed(checks) <= passed(gateway[scenario]), (scenario, gateway[scenario])
        assert outcomes(checks).total() == outcomes(gateway[scenario]).total(), scenario


@on_postgresql
def test_the_client_scenarios_pass_through_the_gateway_as_without_it(
    suite, conformance_plane, tmp_path
):
    """The gateway's client side: the SDK's client, straight to each scenario's server,
    and through `plangate-mcp --upstream-url` over stdio and over its HTTP side (`serve`,
    the client holding the agent's own key), with a plan declared."""
    client = f"{sys.executable} {CLIENT}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PLANGATE_URL": conformance_plane.url,
        "PLANGATE_ISSUER": conformance_plane.issuer,
        "PLANGATE_API_KEY": conformance_plane.agent.api_key,
    }
    direct = run_client_scenarios(suite, client, tmp_path / "direct", env)
    stdio = run_client_scenarios(suite, f"{client} --via-gateway", tmp_path / "stdio", env)
    http = run_client_scenarios(suite, f"{client} --via-http-gateway", tmp_path / "http", env)

    assert all(passed(checks) for checks in direct.values()), direct
    assert_holds_up(direct, stdio)
    assert_holds_up(direct, http)
    # The declarations went through the control plane: one plan per scenario that lists
    # tools (3 of the 4), each way.
    assert Plan.objects.filter(agent=conformance_plane.agent.agent).count() == 2 * 3


@on_postgresql
@pytest.mark.parametrize("upstream", ["command", "url"])
def test_the_gateways_http_side_passes_every_check_the_bare_server_passes(
    suite, bare_results, conformance_plane, tmp_path, upstream
):
    """`plangate-mcp serve` wrapping the reference server (its stdio command, or its own HTTP
    side with ``--upstream-url``), in its operator-key mode (the suite's client holds a key
    the operator issued for the gateway; the gateway declares with the agent's), each of
    the suite's sessions given its plan by the shim; against the bare server's HTTP side."""
    port = free_port()
    operator_key = secrets.token_urlsafe(32)
    gateway = [
        *(sys.executable, "-m", "guard.gateway", "serve", "--listen", f"127.0.0.1:{port}"),
        *("--url", conformance_plane.url, "--issuer", conformance_plane.issuer),
    ]
    declarations = tmp_path / "declarations.jsonl"
    with contextlib.ExitStack() as running:
        if upstream == "url":
            server = running.enter_context(bare_server(tmp_path / "server.log"))
            gateway += ["--upstream-url", server]
        else:
            gateway += ["--", sys.executable, str(SERVER)]
        gateway_url = running.enter_context(
            serving(
                gateway,
                f"http://127.0.0.1:{port}/mcp",
                tmp_path / "gateway.log",
                PYTHONPATH=str(ROOT),
                PLANGATE_API_KEY=conformance_plane.agent.api_key,
                PLANGATE_GATEWAY_CLIENT_KEYS=operator_key,
            )
        )
        url = running.enter_context(
            proxy(gateway_url, operator_key, declarations, tmp_path / "proxy.log")
        )
        results = run_server_scenarios(suite, url, tmp_path)

    answers = [json.loads(line)["answer"] for line in declarations.read_text().splitlines()]
    assert len(answers) >= len(results) - 1  # every session; the DNS-rebinding probe has none
    for answer in answers:
        (content,) = answer["result"]["content"]
        assert json.loads(content["text"])["ok"] is True, answer
    assert_holds_up(bare_results, results)
    # The tools/call results the bare server gave, the gateway gave unchanged: the calls
    # reached the server under the plan, not blocked by the gateway.
    for scenario, checks in bare_results.items():
        assert tool_results(results[scenario]) == tool_results(checks), scenario
    plans = Plan.objects.filter(agent=conformance_plane.agent.agent)
    assert plans.count() == len(answers)
