"""The guard's decision next to a peer's: the Agent Governance Toolkit's policy evaluator.

Opt-in (``--peer``, or ``--only peer``): it installs the peer, pinned, into a throwaway
virtualenv in a temporary folder (never the project's .venv; removed at the end; about a
minute), or uses one given with ``--peer-venv``.

The same rules in both, for 1, 10 and 100 rules of five kinds. In the first four every rule
concerns the called tool: N-1 deny rules whose condition does not hold for the call, then an
allow rule whose condition holds, under a deny default. Both engines then try every rule
before they allow: the guard's worst case (its per-tool index cannot skip a rule) and the
only order the peer knows (it sorts by priority).

* equality: ``repo`` eq ``acme/secret-i`` ... then eq ``acme/public-app``;
* glob: ``repo`` glob ``acme/secret-i-*`` ... then ``acme/*`` (the peer has no glob: the
  same pattern translated to a regex, anchored, with its ``matches`` operator);
* regex: ``^acme/secret-i$`` ... then ``acme/.*`` (the guard's RE2 matches the whole
  string; the peer's ``re.search`` gets ``^...$``);
* numeric bounds: ``number`` gte 1000+i ... then lte 100;
* other tools, the common case: the N-1 deny rules are for other tools (the guard's
  ``tool_i`` with ``number`` eq i; the peer's ``tool_name`` eq ``tool_i``, since its rule
  holds one condition), then the glob allow rule for the called tool.

The peer's rule holds one condition on a flat context, so its context is the call's
arguments plus ``tool_name``, and its rules for the called tool test the argument only; the
guard's name the tool. Before timing, both must give the same answer on the allowed call and
on a call the first deny rule refuses. Guard: ``Guard.check`` whole (plan step, policy,
budget; the decision log off), on a token it verified, as in bench_guard. Peer:
``PolicyEvaluator.evaluate(context)``, in its own interpreter kept running, each shape timed
there right after the guard's. Each figure is the median of several repeats, in CPU time.

Run alone: ``python bench/bench_peer.py [--peer-venv DIR]``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))  # the repository root

import bench_guard  # noqa: E402
from benchlib import heading, print_table  # noqa: E402

from guard.plan import MAX_MAX_CALLS  # noqa: E402

PEER_PACKAGE = "agent-governance-toolkit-core"
PEER_VERSION = "5.0.0"  # the toolkit's core: agent_os.policies.PolicyEvaluator
TOOL = bench_guard.TOOL
CALL = {"repo": "acme/public-app", "number": 42}
RULE_COUNTS = (1, 10, 100)
TARGET_SPEEDUP = 5
INSTALL_TIMEOUT_SECONDS = 900


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--peer",
        action="store_true",
        help="run the side-by-side with the peer evaluator (installs it in a temporary venv)",
    )
    group.add_argument(
        "--peer-venv",
        type=Path,
        help=f"a virtualenv that already has {PEER_PACKAGE}=={PEER_VERSION} (no install)",
    )
    group.add_argument(
        "--peer-iterations",
        type=int,
        default=500,
        help="peer decisions per timed repeat (default 500; the guard's are 10 times more)",
    )


# --- the rules, once, in both languages ------------------------------------------------------


Rule = tuple[str, str, str, str, Any]  # effect, tool, field, guard operator, operand


def rule_conditions(kind: str, count: int) -> list[Rule]:
    """`count` rules of one kind, the allowing one last."""
    denies = count - 1
    rules: list[Rule]
    if kind == "equality":
        rules = [("deny", TOOL, "repo", "eq", f"acme/secret-{i}") for i in range(denies)]
        return [*rules, ("allow", TOOL, "repo", "eq", "acme/public-app")]
    if kind == "glob":
        rules = [("deny", TOOL, "repo", "glob", f"acme/secret-{i}-*") for i in range(denies)]
        return [*rules, ("allow", TOOL, "repo", "glob", "acme/*")]
    if kind == "regex":
        rules = [("deny", TOOL, "repo", "regex", f"acme/secret-{i}") for i in range(denies)]
        return [*rules, ("allow", TOOL, "repo", "regex", "acme/.*")]
    if kind == "numeric bounds":
        rules = [("deny", TOOL, "number", "gte", 1000 + i) for i in range(denies)]
        return [*rules, ("allow", TOOL, "number", "lte", 100)]
    if kind == "other tools":
        rules = [("deny", f"tool_{i}", "number", "eq", i) for i in range(denies)]
        return [*rules, ("allow", TOOL, "repo", "glob", "acme/*")]
    raise ValueError(kind)


def guard_policy(conditions: list[Rule]) -> dict[str, Any]:
    return {
        "version": 1,
        "default": "deny",
        "rules": [
            {"effect": effect, "tools": [tool], "args": {field: {operator: operand}}}
            for effect, tool, field, operator, operand in conditions
        ],
    }


def peer_rules(conditions: list[Rule]) -> list[dict[str, Any]]:
    """The same rules for the peer: one condition each, highest priority first. A rule for
    another tool tests only the tool's name (the peer's rule holds one condition)."""
    rules = []
    for index, (effect, tool, field, operator, operand) in enumerate(conditions):
        if tool != TOOL:
            field, operator, operand = "tool_name", "eq", tool
        elif operator == "glob":
            operator, operand = "matches", "^" + fnmatch.translate(operand)
        elif operator == "regex":
            operator, operand = "matches", f"^(?:{operand})$"
        rules.append(
            {
                "name": f"rule-{index}",
                "field": field,
                "operator": operator,
                "value": operand,
                "action": effect,
                "priority": len(conditions) - index,
            }
        )
    return rules


def denied_call(conditions: list[Rule]) -> dict[str, Any] | None:
    """A call of the tool that the first deny rule refuses, or None when there is none."""
    effect, tool, field, operator, operand = conditions[0]
    if effect != "deny" or tool != TOOL:
        return None
    value: Any = {"eq": operand, "gte": operand}.get(operator)
    if operator == "glob":
        value = operand.replace("*", "x")
    elif operator == "regex":
        value = operand
    return {**CALL, field: value}


# --- the peer, in its own interpreter ---------------------------------------------------------

PEER_DRIVER = r"""
import json, statistics, sys, time
from agent_os.policies.evaluator import PolicyEvaluator
from agent_os.policies.schema import (
    PolicyAction, PolicyCondition, PolicyDefaults, PolicyDocument, PolicyRule,
)

for request in sys.stdin:  # one shape per line, answered with one line
    shape = json.loads(request)
    document = PolicyDocument(
        name="bench",
        rules=[
            PolicyRule(
                name=rule["name"],
                condition=PolicyCondition(
                    field=rule["field"], operator=rule["operator"], value=rule["value"]
                ),
                action=PolicyAction(rule["action"]),
                priority=rule["priority"],
            )
            for rule in shape["rules"]
        ],
        defaults=PolicyDefaults(action=PolicyAction.DENY),
    )
    evaluator = PolicyEvaluator(policies=[document])
    answers = [evaluator.evaluate(context).allowed for context in shape["probes"]]
    context = shape["context"]
    iterations, repeats = shape["iterations"], shape["repeats"]
    for _ in range(min(iterations, 200)):
        evaluator.evaluate(context)
    samples = []
    for _ in range(repeats):
        start = time.process_time_ns()
        for _ in range(iterations):
            evaluator.evaluate(context)
        samples.append((time.process_time_ns() - start) / iterations / 1000)
    print(json.dumps({"us": statistics.median(samples), "answers": answers}), flush=True)
"""


def install_peer(folder: Path) -> Path:
    """A new virtualenv in `folder` with the pinned peer; returns its python."""
    venv.create(folder, with_pip=True, clear=True)
    python = folder / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{PEER_PACKAGE}=={PEER_VERSION}"],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
        check=False,
    )
    if installed.returncode != 0:
        raise RuntimeError(f"pip could not install the peer:\n{installed.stderr[-3000:]}")
    return python


class Peer:
    """The peer's interpreter, kept running: each shape is timed there right after the
    guard's, so both meet the same load on a shared machine."""

    def __init__(self, python: Path) -> None:
        self.process = subprocess.Popen(
            [str(python), "-c", PEER_DRIVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def time(self, shape: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(shape) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            error = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(f"the peer's driver failed:\n{error[-3000:]}")
        return json.loads(answer)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def cpu_microseconds_per_call(
    function: Callable[[], object], iterations: int, repeats: int
) -> float:
    """Median over `repeats` of the CPU time per call (not wall time: on a shared machine,
    waiting for a core is not the engine's cost; the peer is timed the same way)."""
    for _ in range(min(iterations, 1000)):
        function()
    samples = []
    for _ in range(repeats):
        start = time.process_time_ns()
        for _ in range(iterations):
            function()
        samples.append((time.process_time_ns() - start) / iterations / 1000)
    return statistics.median(samples)


# --- the guard --------------------------------------------------------------------------------


def guard_figures(
    conditions: list[Rule],
    probes: list[dict[str, Any]],
    iterations: int,
    repeats: int,
) -> tuple[float, list[bool]]:
    plan = {
        "version": 1,
        "goal": "Bench",
        "user": bench_guard.USER,
        "steps": [{"tool": TOOL, "maxCalls": MAX_MAX_CALLS}],
    }
    control_plane = bench_guard.StandInControlPlane(guard_policy(conditions))
    guard = bench_guard.Guard(
        "http://plangate.bench",
        "pg_bench",
        issuer=bench_guard.ISSUER,
        transport=bench_guard.httpx.MockTransport(control_plane.handle),
        auto_refresh=False,
        report=False,
    )
    try:
        guard.declare(plan)
        answers = [guard.check(TOOL, call).allowed for call in probes]
        microseconds = cpu_microseconds_per_call(
            lambda: guard.check(TOOL, CALL), iterations, repeats
        )
    finally:
        guard.close()
    return microseconds, answers


# --- main -------------------------------------------------------------------------------------


def selected(args: argparse.Namespace) -> bool:
    only = {name.strip() for name in (getattr(args, "only", None) or "").split(",")}
    return bool(getattr(args, "peer", False)) or "peer" in only


def main(args: argparse.Namespace) -> int:
    if not selected(args):
        print("\n(peer side-by-side skipped: opt in with --peer or --only peer)")
        return 0
    peer_iterations = max(1, getattr(args, "peer_iterations", 500))
    guard_iterations = peer_iterations * 10
    repeats = max(1, getattr(args, "guard_repeats", 7))
    heading(f"guard vs peer: {PEER_PACKAGE}=={PEER_VERSION} PolicyEvaluator")
    shapes: list[dict[str, Any]] = []
    for kind in ("equality", "glob", "regex", "numeric bounds", "other tools"):
        for count in RULE_COUNTS:
            conditions = rule_conditions(kind, count)
            denied = denied_call(conditions)
            shapes.append(
                {
                    "name": f"{kind}, {count} rule{'s' if count > 1 else ''}",
                    "conditions": conditions,
                    "probes": [CALL, *([denied] if denied else [])],
                }
            )
    rows = []
    slowest_ratio = float("inf")
    with tempfile.TemporaryDirectory(prefix="plangate-peer-") as temporary:
        given = getattr(args, "peer_venv", None)
        if given is not None:
            python = Path(given) / "bin" / "python"
            print(f"peer: the virtualenv at {given}")
        else:
            print(f"peer: installing {PEER_PACKAGE}=={PEER_VERSION} into a temporary virtualenv")
            python = install_peer(Path(temporary) / "venv")
        print(
            f"CPU time, median of {repeats} repeats; {guard_iterations} guard and"
            f" {peer_iterations} peer decisions per repeat; each shape timed in both in turn"
        )
        peer = Peer(python)
        try:
            for shape in shapes:
                guard_us, guard_answers = guard_figures(
                    shape["conditions"], shape["probes"], guard_iterations, repeats
                )
                peer_result = peer.time(
                    {
                        "rules": peer_rules(shape["conditions"]),
                        "context": {"tool_name": TOOL, **CALL},
                        "probes": [{"tool_name": TOOL, **call} for call in shape["probes"]],
                        "iterations": peer_iterations,
                        "repeats": repeats,
                    }
                )
                if guard_answers != peer_result["answers"] or guard_answers[0] is not True:
                    raise RuntimeError(
                        f"{shape['name']}: the engines disagree (allowed call, denied call):"
                        f" guard {guard_answers}, peer {peer_result['answers']}"
                    )
                ratio = peer_result["us"] / guard_us
                slowest_ratio = min(slowest_ratio, ratio)
                rows.append(
                    [
                        shape["name"],
                        f"{guard_us:.2f}",
                        f"{peer_result['us']:.1f}",
                        f"{ratio:.1f}x",
                        "yes" if ratio >= TARGET_SPEEDUP else "NO",
                    ]
                )
        finally:
            peer.close()
    print_table(
        ["shape", "guard us", "peer us", "peer / guard", f">= {TARGET_SPEEDUP}x"],
        rows,
    )
    print(
        f"the guard is at least {slowest_ratio:.1f}x faster on every shape"
        f" (target {TARGET_SPEEDUP}x); guard: Guard.check whole, decision log off"
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser.add_argument_group("peer"))
    parser.add_argument("--guard-repeats", type=int, default=7)
    arguments = parser.parse_args()
    arguments.peer = True
    sys.exit(main(arguments))
