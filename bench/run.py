"""`make bench`: the HTTP benchmark, then every `bench/bench_*.py` module.

The HTTP part starts Plangate under gunicorn on 127.0.0.1 with throwaway secrets, on a fresh
SQLite file in a temporary folder, or, when ``DATABASE_URL`` names PostgreSQL, on a throwaway
database created next to it (same server and user) and dropped at the end. It seeds a team,
a member, a policy and an agent through the operator commands, then drives each scenario
from concurrent clients for a fixed time: ``GET /healthz`` (the baseline), ``POST
/v1/plans`` with 2 and 50 steps, and ``POST /v1/plans/{id}/refresh``. Every figure is
printed next to ``/healthz`` measured in the same run, because the machine is shared and
absolute numbers drift from one run to the next: a scenario's server CPU per request as a
multiple of ``/healthz``'s is the figure that counts, next to its target
(``benchlib.HTTP_TARGETS``, stated for PostgreSQL). The first line says when, on which
commit and machine, and under what load the run was made, for ``bench/RESULTS.md``.

Plug-ins: after the HTTP part, each ``bench/bench_*.py`` module (in name order) is imported
and its ``main(args)`` called with the parsed options. A module may define
``add_arguments(parser)`` to add options of its own. ``--only http,signing`` runs a subset
(a module's name is its file name without ``bench_``). `benchlib` has the shared helpers.

Benchmarks print; they never fail on a figure. The exit status is non-zero only when a
benchmark could not run at all.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit, urlunsplit

import httpx

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(BENCH_DIR))

from benchlib import (  # noqa: E402
    HTTP_TARGETS,
    heading,
    load_described,
    percentile,
    print_table,
    run_described,
)

# Bounds on every load loop, whatever the options say.
MAX_REQUESTS_PER_CLIENT = 100_000
MAX_SCENARIO_SECONDS = 120.0
REQUEST_TIMEOUT_SECONDS = 10.0
DEFAULT_WORKERS = 2 * (os.cpu_count() or 1) + 1  # gunicorn's own advice
SERVER_START_SECONDS = 60.0

BENCH_TEAM = "bench"
BENCH_USER = "bench@bench.test"
BENCH_POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["bench_read_*"], "args": {"repo": {"glob": "acme/*"}}},
        {"effect": "deny", "tools": ["bench_delete_*"]},
        {"effect": "allow", "tools": ["bench_write_*"], "roles": ["sre"], "maxCalls": 5},
    ],
}


def bench_plan(steps: int) -> dict:
    """A plan of `steps` steps that BENCH_POLICY admits, each pinning two arguments."""
    return {
        "version": 1,
        "goal": f"Benchmark plan with {steps} steps",
        "user": BENCH_USER,
        "steps": [
            {
                "tool": f"bench_read_{index}",
                "args": {"repo": {"eq": "acme/public-app"}, "path": {"glob": "docs/*.md"}},
                "maxCalls": 5,
            }
            for index in range(steps)
        ],
    }


# --- plug-ins ------------------------------------------------------------------------------


def plugin_name(module: ModuleType) -> str:
    return module.__name__.removeprefix("bench_")


def discover_plugins() -> tuple[list[ModuleType], list[tuple[str, str]]]:
    """Import every bench/bench_*.py. Returns the modules and (file, traceback) failures."""
    modules, failures = [], []
    for path in sorted(BENCH_DIR.glob("bench_*.py")):
        try:
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        except Exception:
            failures.append((path.name, traceback.format_exc()))
            continue
        if callable(getattr(module, "main", None)):
            modules.append(module)
    return modules, failures


# --- the server ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def is_postgres(url: str | None) -> bool:
    return bool(url) and urlsplit(url).scheme in {"postgres", "postgresql", "pgsql"}


def with_database_name(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextlib.contextmanager
def throwaway_postgres(url: str) -> Iterator[str]:
    """A fresh database on the server of `url`, dropped afterwards; yields its URL.

    Fresh, because the bench encrypts its signing key with a throwaway key: a database that
    kept an older run's key could not sign (by design, it is never replaced silently).
    """
    import psycopg
    from psycopg import sql

    base_name = urlsplit(url).path.lstrip("/") or "plangate"
    name = f"{base_name}_bench_{secrets.token_hex(4)}"
    admin_url = with_database_name(url, "postgres")
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database_name(url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@dataclass
class Server:
    base_url: str
    api_key: str
    database: str
    process: subprocess.Popen
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)  # for plug-ins' `manage(server.env, ...)`

    def cpu_seconds(self) -> float | None:
        """User + system CPU of the gunicorn master and its workers, from /proc (Linux)."""
        pids = [self.process.pid, *child_pids(self.process.pid)]
        total = 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            fields = stat.rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        return total


def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    found = []
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat_path.read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(stat_path.parent.name))
    return found


def manage(env: dict[str, str], *arguments: str) -> str:
    # System checks are the test suite's business; the bench only needs the commands.
    result = subprocess.run(
        [sys.executable, "manage.py", *arguments, "--skip-checks"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"manage.py {' '.join(arguments)} failed ({result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )
    return result.stdout


def stop(process: subprocess.Popen) -> None:
    """Stop gunicorn: SIGTERM (graceful), then SIGKILL to its own process group."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@contextlib.contextmanager
def running_server(args: argparse.Namespace, workdir: Path) -> Iterator[Server]:
    with contextlib.ExitStack() as stack:
        if is_postgres(args.database_url):
            database_url = stack.enter_context(throwaway_postgres(args.database_url))
            database = f"PostgreSQL ({urlsplit(database_url).path.lstrip('/')}, dropped after)"
        else:
            database_url = f"sqlite:///{workdir / 'bench.sqlite3'}"
            database = "SQLite (temporary file, WAL)"
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        (workdir / "static").mkdir(exist_ok=True)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": args.settings,
            "PLANGATE_ENV_FILE": os.devnull,  # never read the developer's var/local.env
            "SECRET_KEY": secrets.token_urlsafe(50),
            "KEY_ENCRYPTION_KEY": fernet_key(),
            "DATABASE_URL": database_url,
            "DEBUG": "false",
            "ALLOWED_HOSTS": "127.0.0.1",
            "CACHE_URL": "locmemcache://",
            "PLANGATE_ISSUER": base_url,
            "PLANGATE_RATE_LIMIT": "1000000/sec",  # high enough never to interfere
            "STATIC_ROOT": str(workdir / "static"),
            "LOG_LEVEL": "WARNING",
        }
        manage(env, "migrate", "--noinput", "-v", "0")
        manage(env, "rotate_keys")  # the first signing keys: /readyz only reads them
        manage(
            env,
            "create_member",
            BENCH_USER,
            "--team",
            BENCH_TEAM,
            "--role",
            "engineer",
            "--group",
            "bench",
        )
        policy_file = workdir / "policy.json"
        policy_file.write_text(json.dumps(BENCH_POLICY))
        manage(env, "set_policy", "bench", "--file", str(policy_file), "--team", BENCH_TEAM)
        created = manage(
            env,
            "create_agent",
            f"bench-{secrets.token_hex(3)}",
            "--policy",
            "bench",
            "--team",
            BENCH_TEAM,
        )
        api_key = json.loads(created.strip().splitlines()[-1])["apiKey"]

        log_path = workdir / "gunicorn.log"
        log = stack.enter_context(log_path.open("w"))
        process = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "controlplane.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(args.workers),
                "--worker-class",
                "sync",
                "--timeout",
                "30",
                "--graceful-timeout",
                "5",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_until_ready(base_url, process, log_path)
            yield Server(base_url, api_key, database, process, log_path, env)
        finally:
            stop(process)


def fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def wait_until_ready(base_url: str, process: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    with httpx.Client(base_url=base_url, timeout=5) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{log_path.read_text()[-4000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get("/readyz").status_code == 200:
                    return
            time.sleep(0.2)
    raise RuntimeError(f"gunicorn not ready after {SERVER_START_SECONDS:.0f} s")


# --- load ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    method: str
    path: Callable[[int], str]  # client index -> path
    body: Callable[[int], bytes | None]  # client index -> body
    expected_status: int


@dataclass
class LoadResult:
    scenario: Scenario
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    server_cpu: float | None = None
    client_cpu: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds

    @property
    def server_cpu_ms_per_request(self) -> float | None:
        if self.server_cpu is None or not self.latencies:
            return None
        return self.server_cpu / len(self.latencies) * 1000


def client_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class LoadFigures:
    """What one load run measured: latencies (sorted) of the requests that started and
    finished inside the recorded window, the failures among them, and CPU seconds spent
    by the server and by this client over that window."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    server_cpu: float | None = None
    client_cpu: float = 0.0


def drive_load(
    server: Server,
    *,
    concurrency: int,
    warmup: float,
    duration: float,
    headers: dict[str, str],
    send: Callable[[httpx.Client, int, int], httpx.Response],
    expected_status: int,
    max_requests: int = MAX_REQUESTS_PER_CLIENT,
) -> LoadFigures:
    """Drive the server from `concurrency` threads: `warmup` seconds unrecorded, then
    `duration` seconds recorded. Thread k calls `send(client, k, turn)` for turn 0, 1, ...
    until the window ends or after `max_requests`. Only requests that start and finish
    inside the recorded window count."""
    started = time.perf_counter()
    window_start = started + warmup
    window_end = window_start + duration
    figures = LoadFigures()
    lock = threading.Lock()

    def client_loop(index: int) -> None:
        latencies: list[float] = []
        errors, first_error = 0, ""
        with httpx.Client(
            base_url=server.base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS
        ) as client:
            for turn in range(max_requests):
                begin = time.perf_counter()
                if begin >= window_end:
                    break
                try:
                    response = send(client, index, turn)
                    ok = response.status_code == expected_status
                    problem = "" if ok else f"{response.status_code} {response.text[:300]}"
                except httpx.HTTPError as exc:
                    ok, problem = False, f"{type(exc).__name__}: {exc}"
                end = time.perf_counter()
                if begin >= window_start and end <= window_end:
                    if ok:
                        latencies.append(end - begin)
                    else:
                        errors += 1
                        first_error = first_error or problem
        with lock:
            figures.latencies.extend(latencies)
            figures.errors += errors
            figures.first_error = figures.first_error or first_error

    threads = [
        threading.Thread(target=client_loop, args=(index,), daemon=True)
        for index in range(concurrency)
    ]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, window_start - time.perf_counter()))
    cpu_before, client_before = server.cpu_seconds(), client_cpu_seconds()
    time.sleep(max(0.0, window_end - time.perf_counter()))
    cpu_after, client_after = server.cpu_seconds(), client_cpu_seconds()
    for thread in threads:
        thread.join(timeout=REQUEST_TIMEOUT_SECONDS + 5)
    if cpu_before is not None and cpu_after is not None:
        figures.server_cpu = cpu_after - cpu_before
    figures.client_cpu = client_after - client_before
    figures.latencies.sort()
    return figures


def run_load(
    server: Server, scenario: Scenario, *, concurrency: int, warmup: float, duration: float
) -> LoadResult:
    """One scenario under load (drive_load); each thread sends its own path and body."""
    duration = min(duration, MAX_SCENARIO_SECONDS)
    # Each thread's request is built once, so building it costs the client nothing per call.
    requests = [(scenario.path(index), scenario.body(index)) for index in range(concurrency)]
    figures = drive_load(
        server,
        concurrency=concurrency,
        warmup=warmup,
        duration=duration,
        headers={"Authorization": f"Bearer {server.api_key}", "Content-Type": "application/json"},
        send=lambda client, index, turn: client.request(
            scenario.method, requests[index][0], content=requests[index][1]
        ),
        expected_status=scenario.expected_status,
    )
    return LoadResult(
        scenario,
        duration,
        latencies=figures.latencies,
        errors=figures.errors,
        first_error=figures.first_error,
        server_cpu=figures.server_cpu,
        client_cpu=figures.client_cpu,
    )


def make_scenarios(server: Server, concurrency: int) -> list[Scenario]:
    plan_2 = json.dumps({"plan": bench_plan(2)}).encode()
    plan_50 = json.dumps({"plan": bench_plan(50)}).encode()
    # One plan per client for the refresh scenario, so clients never wait on each other's
    # row lock. Any token of a plan may refresh it, so each client reuses its first one.
    refreshable = []
    with httpx.Client(base_url=server.base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        for _ in range(concurrency):
            response = client.post(
                "/v1/plans",
                content=plan_2,
                headers={
                    "Authorization": f"Bearer {server.api_key}",
                    "Content-Type": "application/json",
                },
            )
            if response.status_code != 201:
                raise RuntimeError(f"cannot declare a plan: {response.status_code} {response.text}")
            body = response.json()
            refreshable.append((body["id"], json.dumps({"token": body["token"]}).encode()))
    return [
        Scenario("GET /healthz (baseline)", "GET", lambda i: "/healthz", lambda i: None, 200),
        Scenario(
            "POST /v1/plans, 2 steps",
            "POST",
            lambda i: "/v1/plans",
            lambda i: plan_2,
            201,
        ),
        Scenario(
            "POST /v1/plans, 50 steps",
            "POST",
            lambda i: "/v1/plans",
            lambda i: plan_50,
            201,
        ),
        Scenario(
            "POST /v1/plans/{id}/refresh, 2 steps",
            "POST",
            lambda i: f"/v1/plans/{refreshable[i][0]}/refresh",
            lambda i: refreshable[i][1],
            200,
        ),
    ]


def check_scenario(server: Server, scenario: Scenario) -> None:
    """One request before loading, so a broken scenario says why instead of timing errors."""
    with httpx.Client(
        base_url=server.base_url,
        headers={"Authorization": f"Bearer {server.api_key}", "Content-Type": "application/json"},
        timeout=REQUEST_TIMEOUT_SECONDS,
    ) as client:
        response = client.request(scenario.method, scenario.path(0), content=scenario.body(0))
    if response.status_code != scenario.expected_status:
        raise RuntimeError(
            f"{scenario.name}: expected {scenario.expected_status}, got "
            f"{response.status_code}: {response.text[:500]}"
        )


def report(results: list[LoadResult], concurrency: int, *, on_postgres: bool) -> None:
    """The table of one run: each scenario's server CPU per request as a multiple of
    `/healthz`'s (the first result), next to its target. It prints; it never fails."""
    baseline = results[0]
    base_cpu = baseline.server_cpu_ms_per_request
    rows = []
    for result in results:
        cpu = result.server_cpu_ms_per_request
        multiple = cpu / base_cpu if cpu is not None and base_cpu else None
        share = result.throughput / baseline.throughput if baseline.throughput else 0.0
        target = None if result is baseline else HTTP_TARGETS.get(result.scenario.name)
        target_cell = ""
        if target is not None:
            verdict = "n/a" if multiple is None else "met"
            if multiple is not None and multiple > target.multiple:
                verdict = "not met"
            target_cell = f"<= {target.multiple:.1f}x ({verdict})"
        rows.append(
            [
                result.scenario.name,
                f"{result.throughput:,.0f}",
                f"{percentile(result.latencies, 0.50) * 1000:.1f}",
                f"{percentile(result.latencies, 0.99) * 1000:.1f}",
                str(result.errors),
                "n/a" if cpu is None else f"{cpu:.2f}",
                "n/a" if multiple is None else f"{multiple:.1f}x",
                target_cell,
                f"{share:.0%}",
            ]
        )
    print_table(
        [
            "scenario",
            "req/s",
            "p50 ms",
            "p99 ms",
            "errors",
            "srv CPU ms/req",
            "CPU vs /healthz",
            "target",
            "req/s vs /healthz",
        ],
        rows,
    )
    for result in results:
        if result.errors:
            print(f"  {result.scenario.name}: first error: {result.first_error}")
    print(
        "\nTargets (bench/benchlib.py, HTTP_TARGETS): server CPU per request at most this "
        "multiple of /healthz's, measured in the same run, on PostgreSQL."
    )
    for name, target in HTTP_TARGETS.items():
        print(f"  {name}: <= {target.multiple:.1f}x: {target.why}")
    if not on_postgres:
        print(
            "This run is on SQLite: the targets are stated for PostgreSQL, so read these "
            "multiples as a comparison between runs only."
        )
    client_share = max(r.client_cpu / r.seconds for r in results)
    print(
        f"\n'srv CPU ms/req' is gunicorn's own CPU time per request (master and workers, from "
        f"/proc), without the database server's. The load client runs on the same "
        f"{os.cpu_count()} cores with {concurrency} threads and used up to "
        f"{client_share:.0%} of one core; it weighs most on /healthz, so the req/s ratios "
        "understate how much heavier issuance is and are shown for reference only."
    )


def http_bench(args: argparse.Namespace) -> None:
    heading("HTTP: gunicorn on 127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="plangate-bench-") as tmp:
        with running_server(args, Path(tmp)) as server:
            print(
                f"database: {server.database}; gunicorn: {args.workers} sync worker(s); "
                f"clients: {args.concurrency} threads (httpx); {args.warmup:g} s warm-up + "
                f"{args.duration:g} s per scenario"
            )
            scenarios = make_scenarios(server, args.concurrency)
            results = []
            for scenario in scenarios:
                check_scenario(server, scenario)
                results.append(
                    run_load(
                        server,
                        scenario,
                        concurrency=args.concurrency,
                        warmup=args.warmup,
                        duration=args.duration,
                    )
                )
            errors = server.log_path.read_text().strip()
        report(results, args.concurrency, on_postgres=is_postgres(args.database_url))
        print(f"load average at the end: {load_described()}")
        if errors:
            print(f"\ngunicorn log (last lines):\n{errors[-2000:]}")


# --- main ----------------------------------------------------------------------------------


def build_parser(plugins: list[ModuleType]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--duration", type=float, default=8.0, help="seconds measured per scenario (default 8)"
    )
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="unrecorded seconds before each (default 1)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"gunicorn sync workers (default 2 x cores + 1 = {DEFAULT_WORKERS}: a worker\n"
        "waiting on the database's commit leaves its core to another)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="concurrent HTTP clients (default 2 x workers)",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        help="PostgreSQL server to bench on (a throwaway database is created there);\n"
        "default $DATABASE_URL; SQLite in a temporary folder when unset",
    )
    parser.add_argument(
        "--settings",
        default="controlplane.settings",
        help="Django settings module the server runs with (default controlplane.settings)",
    )
    names = ", ".join(["http", *(plugin_name(module) for module in plugins)])
    parser.add_argument(
        "--only", help=f"comma-separated benchmarks to run, of: {names} (default all)"
    )
    for module in plugins:
        add_arguments = getattr(module, "add_arguments", None)
        if callable(add_arguments):
            add_arguments(parser.add_argument_group(plugin_name(module)))
    return parser


def main(argv: list[str] | None = None) -> int:
    plugins, failures = discover_plugins()
    args = build_parser(plugins).parse_args(argv)
    if args.concurrency is None:
        args.concurrency = 2 * args.workers
    if args.duration <= 0 or args.warmup < 0 or args.concurrency < 1 or args.workers < 1:
        print("--duration must be > 0, --warmup >= 0, --concurrency and --workers >= 1")
        return 2
    selected = None if not args.only else {name.strip() for name in args.only.split(",")}
    print(
        f"Plangate bench: {run_described()} at the start (the machine may be shared: "
        "compare ratios, not absolute figures)"
    )
    status = 0
    for name, error in failures:
        print(f"\n{name} could not be imported:\n{error}")
        status = 1
    if selected is None or "http" in selected:
        try:
            http_bench(args)
        except Exception:
            print(f"\nHTTP benchmark failed:\n{traceback.format_exc()}")
            status = 1
    for module in plugins:
        if selected is not None and plugin_name(module) not in selected:
            continue
        try:
            returned = module.main(args)
        except Exception:
            print(f"\n{module.__name__} failed:\n{traceback.format_exc()}")
            returned = 1
        if returned:
            status = 1
    print()
    return status


if __name__ == "__main__":
    # Run as a script, this file is __main__; let plug-ins `import run` find the same module.
    sys.modules.setdefault("run", sys.modules[__name__])
    if shutil.which("gunicorn", path=str(BIN)) is None:
        print(f"gunicorn is not installed in {BIN}; run `make setup`")
        sys.exit(2)
    sys.exit(main())
