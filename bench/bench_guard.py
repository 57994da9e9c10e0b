"""The guard's hot path: microseconds per call decision next to one token verification.

`Guard.check` is measured whole (clock, plan match, policy snapshot, budget lock, and the
decision log's enqueue when on) for 1- and 50-step plans under 1- and 100-rule policies,
and `guard.tokens.verify_token` for the token carrying the same plan and policy, in the
same run. Target: a decision costs under 1/20 of a verification.

Shapes: a 50-step plan names the called tool in 5 steps (the call matches the last one,
so the others are tried first), and a 100-rule policy concerns it with 4 rules (3 deny
rules whose arguments do not match come before the admitting allow rule); the last row is
adversarial: all 50 steps name the tool and all 100 rules concern it.

No server: the guard declares against an in-process stand-in of the control plane
(``httpx.MockTransport``) that signs real EdDSA tokens the way ``plans.keys.Signer`` does,
so the guard verifies them in full before any decision is timed. Each figure is the median
of several repeats of many iterations timed with ``time.perf_counter_ns``.

With ``--guard-baseline REV`` every version-1 shape is also timed on the guard of commit
REV (``git archive`` of ``guard/`` into a temporary folder), in a second interpreter kept
running, right after this checkout's guard: "no slower than before" is then a ratio measured
in one run on one machine, not a figure from another day.

Run alone: ``python bench/bench_guard.py [--guard-iterations N] [--guard-profile]
[--guard-baseline REV]``.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import itertools
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the repository root
# A baseline interpreter (`BaselineGuard`) imports another commit's guard from this folder.
_BASELINE_GUARD = os.environ.get("PLANGATE_BENCH_GUARD_ROOT")
if _BASELINE_GUARD:
    sys.path.insert(0, _BASELINE_GUARD)

from guard.agent import Guard  # noqa: E402
from guard.jwk import KeySet, jwk_thumbprint, public_jwk  # noqa: E402
from guard.plan import MAX_MAX_CALLS, plan_hash, validate_plan  # noqa: E402
from guard.policy import policy_hash, validate_policy  # noqa: E402
from guard.tokens import verify_token  # noqa: E402

ISSUER = "http://plangate.bench"
USER = "alice@acme.dev"
TOOL = "github_get_issue"
CALL = {"repo": "acme/public-app", "number": 42, "fields": ["title", "body"]}
TARGET_RATIO = 20


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--guard-iterations",
        type=int,
        default=20_000,
        help="decisions per timed repeat (default 20000; verifications use a tenth)",
    )
    group.add_argument(
        "--guard-repeats", type=int, default=7, help="timed repeats per figure (default 7)"
    )
    group.add_argument(
        "--guard-baseline",
        metavar="REV",
        help="also time the version-1 shapes on the guard of commit REV, in the same run",
    )
    group.add_argument(
        "--guard-profile",
        action="store_true",
        help="print a cProfile of the worst-case decision",
    )


# --- shapes --------------------------------------------------------------------------------


def bench_plan(steps: int, *, for_the_tool: int) -> dict[str, Any]:
    """`steps` steps, `for_the_tool` of them naming the called tool: the call matches only
    the last of those, so every earlier one is tried and refused first."""
    plan_steps = [
        {
            "tool": TOOL if index >= steps - for_the_tool else f"tool_{index % 10}",
            "args": {"repo": {"eq": f"acme/other-{index}"}, "number": {"lte": 10}},
            "maxCalls": MAX_MAX_CALLS,
        }
        for index in range(steps - 1)
    ]
    plan_steps.append(
        {"tool": TOOL, "args": {"repo": {"glob": "acme/*"}}, "maxCalls": MAX_MAX_CALLS}
    )
    return {"version": 1, "goal": "Bench", "user": USER, "steps": plan_steps}


CALL_V2 = {"repo": "acme/public-app", "number": 42, "amount": 1}
READ_TOOL = "tool_read"
URL_TOOL = "http_get"


def bench_plan_v2(steps: int, *, for_the_tool: int, called: int) -> dict[str, Any]:
    """A version-2 plan of `steps` steps, each with an id: step ``s0`` (`READ_TOOL`) is
    completed before timing; `for_the_tool` steps name the called tool, each `after` ``s0``,
    and the call matches the `called`-th of them (1 = the first), which is closed
    (``additionalArgs: false``) and counted by a budget over ``amount`` that no run fills.
    The others pin a repository the call does not name."""
    first_for_tool = steps - for_the_tool
    plan_steps: list[dict[str, Any]] = [{"id": "s0", "tool": READ_TOOL}]
    for index in range(1, steps):
        step: dict[str, Any] = {"id": f"s{index}", "maxCalls": MAX_MAX_CALLS}
        if index < first_for_tool:
            step["tool"] = f"tool_{index % 10}"
            step["args"] = {"id": {"eq": index}}
        elif index == first_for_tool + called - 1:
            step["tool"] = TOOL
            step["args"] = {"repo": {"glob": "acme/*"}, "number": {"lte": 100}}
            step["after"] = ["s0"]
            step["additionalArgs"] = False
        else:
            step["tool"] = TOOL
            step["args"] = {"repo": {"eq": f"acme/other-{index}"}, "number": {"lte": 100}}
            step["after"] = ["s0"]
        plan_steps.append(step)
    budget = {"id": "spend", "arg": "amount", "steps": [f"s{first_for_tool + called - 1}"]}
    return {
        "version": 2,
        "goal": "Bench",
        "user": USER,
        "steps": plan_steps,
        "budgets": [{**budget, "max": 10**15}],
    }


def bench_url_plan() -> dict[str, Any]:
    """One version-2 step whose `url` argument is a WHATWG URL under a prefix."""
    operand = {
        "scheme": ["https"],
        "host": ["api.github.com", "*.acme.dev"],
        "pathPrefix": "/repos/acme/",
    }
    return {
        "version": 2,
        "goal": "Bench",
        "user": USER,
        "steps": [{"tool": URL_TOOL, "args": {"url": {"url": operand}}, "maxCalls": MAX_MAX_CALLS}],
    }


def bench_policy(rules: int, *, for_the_tool: int) -> dict[str, Any]:
    """`rules` rules, `for_the_tool` of them concerning the called tool: deny rules whose
    arguments do not match come first, the admitting allow rule last."""
    others = [
        {"effect": "deny", "tools": [f"family{index % 25}_*"], "args": {"id": {"eq": index}}}
        for index in range(rules - for_the_tool)
    ]
    denies = [
        {"effect": "deny", "tools": ["github_*"], "args": {"repo": {"eq": f"acme/secret-{index}"}}}
        for index in range(for_the_tool - 1)
    ]
    allow = {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}}
    return {"version": 1, "default": "deny", "rules": [*others, *denies, allow]}


# --- an in-process stand-in of the control plane ------------------------------------------


class StandInControlPlane:
    """Answers declare, JWKS and events like the real API, with a real Ed25519 key."""

    def __init__(self, policy: dict[str, Any]) -> None:
        self.private_key = Ed25519PrivateKey.generate()
        jwk = public_jwk(self.private_key.public_key())
        self.kid = jwk_thumbprint(jwk)
        self.jwks = {"keys": [{**jwk, "kid": self.kid, "alg": "EdDSA", "use": "sig"}]}
        self.policy = validate_policy(policy)
        #: a policy version tried in shadow, signed into each token's ``shadow`` claim
        self.shadow: dict[str, Any] | None = None
        self.tokens: list[str] = []
        # Closed while decisions are timed: the reporter thread then waits here, off the
        # GIL, so the timing shows what logging costs the caller; opened to time the drain.
        self.events_gate = threading.Event()

    def sign(self, plan: dict[str, Any]) -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": plan["user"],
            "jti": f"01JBENCH{len(self.tokens):018d}",
            "iat": now,
            "exp": now + 3600,
            "ph": plan_hash(plan),
            "plan": plan,
            "agent": "01JBENCHAGENT0000000000000",
            "pol": self.policy,
            "polv": 1,
            "polh": policy_hash(self.policy),
            "role": "engineer",
            "groups": ["platform"],
        }
        if self.shadow is not None:
            claims["shadow"] = {"pol": self.shadow, "polv": 2, "polh": policy_hash(self.shadow)}
        token = jwt.encode(
            claims, self.private_key, algorithm="EdDSA", headers={"kid": self.kid, "typ": "JWT"}
        )
        self.tokens.append(token)
        return token

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/keys/jwks":
            return httpx.Response(200, json=self.jwks, headers={"Cache-Control": "max-age=300"})
        if path == "/v1/plans" and request.method == "POST":
            plan = validate_plan(json.loads(request.content)["plan"])
            token = self.sign(plan)
            plan_id = f"01JBENCH{len(self.tokens) - 1:018d}"
            return httpx.Response(
                201,
                json={
                    "id": plan_id,
                    "token": token,
                    "planHash": plan_hash(plan),
                    "expiresAt": "2099-01-01T00:00:00Z",
                    "policy": {"id": "bench", "version": 1, "hash": policy_hash(self.policy)},
                    "reportArguments": False,
                },
            )
        if path.endswith("/events"):
            self.events_gate.wait(600)
            # Accepted unread: parsing here would charge the server's work to the guard.
            return httpx.Response(
                202, json={"events": 0, "displayUpdates": 0, "argumentsStored": False}
            )
        return httpx.Response(404, json={"code": "not_found"})


# --- measuring -----------------------------------------------------------------------------


def per_call_microseconds(function: Callable[[], object], iterations: int, repeats: int) -> float:
    """Median over `repeats` of the mean time per call of `iterations` calls."""
    for _ in range(min(iterations, 1000)):
        function()  # warm caches (the policy's per-tool cache, the allowed decisions)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(iterations):
            function()
        samples.append((time.perf_counter_ns() - start) / iterations / 1000)
    return statistics.median(samples)


def guard_for(control_plane: StandInControlPlane, plan: dict[str, Any], **options: Any) -> Guard:
    """A guard holding a token for `plan`; unless told otherwise it reports nothing."""
    options.setdefault("report", False)
    guard = Guard(
        "http://plangate.bench",
        "pg_bench",
        issuer=ISSUER,
        transport=httpx.MockTransport(control_plane.handle),
        auto_refresh=False,
        **options,
    )
    guard.declare(plan)
    if plan["version"] == 1:
        decision = guard.check(TOOL, CALL)
        if not decision.allowed:
            raise RuntimeError(f"the bench call is not allowed: {decision}")
    return guard


def timed_repeat(function: Callable[[], object], iterations: int) -> float:
    """Mean microseconds per call of `iterations` calls of `function`."""
    start = time.perf_counter_ns()
    for _ in range(iterations):
        function()
    return (time.perf_counter_ns() - start) / iterations / 1000


class BaselineGuard:
    """Another commit's guard, timed in its own interpreter kept running.

    `git archive REV guard` is unpacked into a temporary folder, which the child puts first
    on its path (it says which guard it imported, and this side checks). The child runs this
    same file (`serve_baseline`), so the shapes, the stand-in control plane and the timing
    loop are this checkout's: only the guard differs.
    """

    def __init__(self, revision: str) -> None:
        self.revision = revision
        self.folder = tempfile.mkdtemp(prefix="plangate-guard-baseline-")
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision, "guard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(self.folder, filter="data")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve-baseline"],
            env={**os.environ, "PLANGATE_BENCH_GUARD_ROOT": self.folder},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        imported = self._ask({"op": "hello"})["guard"]
        if not Path(imported).resolve().is_relative_to(Path(self.folder).resolve()):
            self.close()
            raise RuntimeError(f"the baseline imported the wrong guard: {imported}")

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the baseline interpreter stopped")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def prepare(self, plan: dict[str, Any], policy: dict[str, Any], call: dict[str, Any]) -> None:
        self._ask({"op": "prepare", "plan": plan, "policy": policy, "call": call})

    def repeat(self, iterations: int) -> float:
        return float(self._ask({"op": "repeat", "iterations": iterations})["us"])

    def close(self) -> None:
        try:
            self._ask({"op": "close"})
            self.process.wait(timeout=30)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def serve_baseline() -> int:
    """The child side of `BaselineGuard`: one JSON request per line on stdin."""
    import guard

    current: Guard | None = None
    call: dict[str, Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "hello":
            answer: dict[str, Any] = {"guard": str(Path(guard.__file__).parent)}
        elif op == "prepare":
            if current is not None:
                current.close()
            call = request["call"]
            control_plane = StandInControlPlane(request["policy"])
            current = guard_for(control_plane, request["plan"], report=False)
            for _ in range(1000):
                current.check(TOOL, call)  # warm, as per_call_microseconds does
            answer = {"ok": True}
        elif op == "repeat":
            assert current is not None
            answer = {
                "us": timed_repeat(
                    lambda g=current, c=call: g.check(TOOL, c), request["iterations"]
                )
            }
        else:
            if current is not None:
                current.close()
            print(json.dumps({"ok": True}), flush=True)
            return 0
        print(json.dumps(answer), flush=True)
    return 0


def side_by_side(
    function: Callable[[], object], baseline: BaselineGuard, iterations: int, repeats: int
) -> tuple[float, float]:
    """Medians (us per call) of this guard and the baseline, their repeats interleaved."""
    for _ in range(min(iterations, 1000)):
        function()
    ours, theirs = [], []
    for _ in range(repeats):
        ours.append(timed_repeat(function, iterations))
        theirs.append(baseline.repeat(iterations))
    return statistics.median(ours), statistics.median(theirs)


def main(args: argparse.Namespace) -> int:
    iterations = max(1, getattr(args, "guard_iterations", 20_000))
    repeats = max(1, getattr(args, "guard_repeats", 7))
    print()
    print("== guard: decision vs token verification ==")
    print(
        f"median of {repeats} repeats; {iterations} decisions and {max(1, iterations // 10)}"
        " verifications per repeat"
    )
    # (name, steps, steps naming the called tool, rules, rules concerning it)
    shapes = [
        ("1 step, 1 rule", 1, 1, 1, 1),
        ("1 step, 100 rules", 1, 1, 100, 4),
        ("50 steps, 1 rule", 50, 5, 1, 1),
        ("50 steps, 100 rules", 50, 5, 100, 4),
        ("worst: all 50 steps, all 100 rules", 50, 50, 100, 100),
    ]
    rows = []
    worst_ratio = 0.0
    profile_target: Guard | None = None
    revision = getattr(args, "guard_baseline", None)
    baseline = BaselineGuard(revision) if revision else None
    compared: list[list[str]] = []
    for name, steps, steps_for_tool, rules, rules_for_tool in shapes:
        plan = bench_plan(steps, for_the_tool=steps_for_tool)
        policy = bench_policy(rules, for_the_tool=rules_for_tool)
        control_plane = StandInControlPlane(policy)
        quiet = guard_for(control_plane, plan, report=False)
        logged = guard_for(control_plane, plan, report=True, report_queue_size=10_000_000)
        keys = KeySet(control_plane.jwks)
        token = control_plane.tokens[0]
        if baseline is None:
            decision = per_call_microseconds(
                lambda g=quiet: g.check(TOOL, CALL), iterations, repeats
            )
        else:
            baseline.prepare(plan, policy, CALL)
            decision, before = side_by_side(
                lambda g=quiet: g.check(TOOL, CALL), baseline, iterations, repeats
            )
            compared.append([name, f"{before:.2f}", f"{decision:.2f}", f"{decision / before:.2f}"])
        with_log = per_call_microseconds(lambda g=logged: g.check(TOOL, CALL), iterations, repeats)
        verification = per_call_microseconds(
            lambda t=token, k=keys: verify_token(t, k, issuer=ISSUER),
            max(1, iterations // 10),
            repeats,
        )
        # The reporter thread's share: digest, format and post every queued decision.
        queued = logged.reporter_stats().queued  # type: ignore[union-attr]
        start = time.perf_counter_ns()
        control_plane.events_gate.set()
        logged.flush(timeout=600)
        background = (time.perf_counter_ns() - start) / max(1, queued) / 1000
        ratio = verification / with_log
        worst_ratio = max(worst_ratio, 1 / ratio)
        rows.append(
            [
                name,
                f"{steps_for_tool} / {rules_for_tool}",
                f"{decision:.2f}",
                f"{with_log:.2f}",
                f"{background:.1f}",
                f"{verification:.1f}",
                f"1/{ratio:.0f}",
                "yes" if ratio >= TARGET_RATIO else "NO",
            ]
        )
        if name.startswith("worst"):
            profile_target = quiet
        else:
            quiet.close()
        logged.close(timeout=30)
    _print_table(
        [
            "shape",
            "steps / rules for the tool",
            "decision us",
            "with log us",
            "log thread us/event",
            "verify_token us",
            "decision/verification",
            f"< 1/{TARGET_RATIO}",
        ],
        rows,
    )
    print(
        "decision: Guard.check with the decision log off; with log: the same with it on"
        " (the caller's share: one queue append);\nlog thread: the reporter's work per"
        " event (digest, format, post), off the call path; the ratio uses 'with log'."
    )
    print(
        f"worst case: a decision costs 1/{1 / worst_ratio:.0f} of a verification"
        f" (target under 1/{TARGET_RATIO})"
    )
    _version_two(iterations, repeats, rows[2][2])
    _shadow_and_tracing(iterations, repeats)
    if baseline is not None:
        baseline.close()
        print(f"\nthis checkout's Guard.check against commit {revision}'s, repeats interleaved:")
        _print_table(["shape", f"{revision} us", "now us", "now / before"], compared)
    if getattr(args, "guard_profile", False) and profile_target is not None:
        _profile(profile_target, iterations)
    if profile_target is not None:
        profile_target.close()
    return 0


def _logged_costs(
    control_plane: StandInControlPlane, plan: dict[str, Any], iterations: int, repeats: int
) -> tuple[float, float]:
    """(us per Guard.check with the decision log on, us per event in the reporter thread)."""
    control_plane.events_gate.clear()
    guard = guard_for(control_plane, plan, report=True, report_queue_size=10_000_000)
    try:
        call = per_call_microseconds(lambda g=guard: g.check(TOOL, CALL), iterations, repeats)
        queued = guard.reporter_stats().queued  # type: ignore[union-attr]
        start = time.perf_counter_ns()
        control_plane.events_gate.set()
        guard.flush(timeout=600)
        background = (time.perf_counter_ns() - start) / max(1, queued) / 1000
    finally:
        guard.close(timeout=30)
    return call, background


def _shadow_and_tracing(iterations: int, repeats: int) -> None:
    """A policy version tried in shadow, and OpenTelemetry spans, each against the same
    shape without them, measured in this run (docs/decisions/0076, 0080)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from guard import tracing

    print()
    print("== guard: a policy version in shadow, and spans per decision ==")
    plan = bench_plan(50, for_the_tool=5)
    policy = bench_policy(100, for_the_tool=4)
    stricter = copy.deepcopy(policy)
    stricter["rules"].insert(0, {"effect": "deny", "tools": [TOOL]})
    rows = []
    plain = StandInControlPlane(policy)
    base_call, base_log = _logged_costs(plain, plan, iterations, repeats)
    rows.append(["no shadow (baseline)", f"{base_call:.2f}", "1.00", f"{base_log:.1f}", "1.00"])
    for name, shadow in (
        ("shadow, same answers", policy),
        ("shadow, every call differs", stricter),
    ):
        shadowed = StandInControlPlane(policy)
        shadowed.shadow = validate_policy(shadow)
        call, log = _logged_costs(shadowed, plan, iterations, repeats)
        rows.append(
            [name, f"{call:.2f}", f"{call / base_call:.2f}", f"{log:.1f}", f"{log / base_log:.2f}"]
        )
    _print_table(
        ["50 steps, 100 rules, log on", "check us", "x baseline", "log thread us/event", "x"],
        rows,
    )
    print(
        "the shadow's verdict is read in the reporter thread when the event is built; the"
        " call pays one more reference\n(target: under 2x the decision without a shadow)."
    )
    quiet = guard_for(StandInControlPlane(policy), plan, report=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        off = per_call_microseconds(lambda g=quiet: g.check(TOOL, CALL), iterations, repeats)
        # An SDK installed: the module's tracer set as decision_tracer would find it (the
        # process's global provider is left alone for the benches after this one).
        tracing._tracer = provider.get_tracer("bench")
        on = per_call_microseconds(lambda g=quiet: g.check(TOOL, CALL), iterations, repeats)
        tracing._tracer = None
        again = per_call_microseconds(lambda g=quiet: g.check(TOOL, CALL), iterations, repeats)
    finally:
        tracing._tracer = None
        quiet.close()
    _print_table(
        ["Guard.check, 50 steps, 100 rules", "us", "x no SDK"],
        [
            ["no SDK (the API's default provider)", f"{off:.2f}", "1.00"],
            ["SDK, in-memory exporter: a span per decision", f"{on:.2f}", f"{on / off:.2f}"],
            ["no SDK again", f"{again:.2f}", f"{again / off:.2f}"],
        ],
    )
    print(f"spans recorded: {len(exporter.get_finished_spans())}")


V2_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["tool_*", "http_*"]},
        {"effect": "allow", "tools": ["github_*"], "args": {"repo": {"glob": "acme/*"}}},
    ],
}


def _version_two(iterations: int, repeats: int, version_one_50: str) -> None:
    """Version 2's rows (docs/decisions/0066, section 6): order, a budget and a closed step
    on a 50-step plan; a `url` argument seen before and seen for the first time."""
    rows = []
    for name, called in (("call matches the 1st of 5 steps", 1), ("the 5th of 5", 5)):
        control_plane = StandInControlPlane(V2_POLICY)
        guard = guard_for(control_plane, bench_plan_v2(50, for_the_tool=5, called=called))
        first = guard.check(READ_TOOL, {})
        guard.completed(first)  # the step every call waits for
        decision = guard.check(TOOL, CALL_V2)
        if not decision.allowed:
            raise RuntimeError(f"the version-2 bench call is not allowed: {decision}")
        figure = per_call_microseconds(lambda g=guard: g.check(TOOL, CALL_V2), iterations, repeats)
        rows.append([f"v2, 50 steps, order + budget + closed: {name}", f"{figure:.2f}"])
        guard.close()
    control_plane = StandInControlPlane(V2_POLICY)
    guard = guard_for(control_plane, bench_url_plan())
    seen = {"url": "https://api.github.com/repos/acme/app/issues?state=open"}
    cached = per_call_microseconds(lambda g=guard: g.check(URL_TOOL, seen), iterations, repeats)
    # More distinct values than the url matcher remembers (1,024), visited in turn.
    fresh = itertools.cycle(
        [{"url": f"https://api.github.com/repos/acme/app-{index}/issues"} for index in range(4096)]
    )
    uncached = per_call_microseconds(
        lambda g=guard: g.check(URL_TOOL, next(fresh)), iterations, repeats
    )
    guard.close()
    rows.append(["v2, 1 step, url: a value seen before", f"{cached:.2f}"])
    rows.append(["v2, 1 step, url: a new value each call", f"{uncached:.2f}"])
    rows.append(["(v1, 50 steps, 1 rule, 5th of 5, from the table above)", version_one_50])
    print("\nversion-2 plans (target: order + budget on 50 steps at p50 <= 3 us):")
    _print_table(["shape", "decision us"], rows)


def _profile(guard: Guard, iterations: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iterations):
        guard.check(TOOL, CALL)
    profiler.disable()
    output = io.StringIO()
    pstats.Stats(profiler, stream=output).sort_stats("tottime").print_stats(12)
    print("\ncProfile of the worst case (by own time):")
    print(output.getvalue())


def _print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(header), *(len(row[i]) for row in rows)) for i, header in enumerate(headers)]

    def line(values: list[str]) -> str:
        first, *rest = values
        cells = [first.ljust(widths[0])] + [
            value.rjust(width) for value, width in zip(rest, widths[1:], strict=True)
        ]
        return "  ".join(cells).rstrip()

    print(line(headers))
    print(line(["-" * width for width in widths]))
    for row in rows:
        print(line(row))


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve-baseline"]:
        sys.exit(serve_baseline())
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser.add_argument_group("guard"))
    sys.exit(main(parser.parse_args()))
