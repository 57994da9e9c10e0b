"""Starting real Plangate processes from tests, and stopping every one of them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

IS_POSTGRES = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
IS_REDIS = settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
NEEDS_POSTGRES = (
    "needs PostgreSQL (DATABASE_URL=postgres://...): other processes cannot see SQLite's "
    "in-memory test database"
)
NEEDS_REDIS = "needs Redis (CELERY_BROKER_URL=redis://...)"

#: The marks of a test whose rows other threads or processes must see
#: (``pytestmark = [*SHARED_DATABASE_MARKS]``): on PostgreSQL, skipped with the reason
#: without it, and on a transactional database, so what the test writes is committed.
SHARED_DATABASE_MARKS = (
    pytest.mark.postgres,
    pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES),
    pytest.mark.django_db(transaction=True),
)

#: The marks of a test that runs a real Celery worker on PostgreSQL and Redis, as in
#: production (``pytestmark = [*REAL_WORKER_MARKS]``).
REAL_WORKER_MARKS = (
    *SHARED_DATABASE_MARKS,
    pytest.mark.redis,
    pytest.mark.worker,
    pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS),
)

#: Beat's other schedules slowed down, for a test about one of them (its variables override)
QUIET_BEAT = {"KEY_ROTATION_CHECK_SECONDS": "3600", "PLAN_EXPIRY_SWEEP_SECONDS": "3600"}


def subprocess_database_url() -> str:
    """DATABASE_URL of the database this test runs on (pytest-django's test database)."""
    params = connection.settings_dict
    user = quote(params["USER"] or "", safe="")
    password = f":{quote(params['PASSWORD'], safe='')}" if params["PASSWORD"] else ""
    host = params["HOST"] or "localhost"
    port = f":{params['PORT']}" if params["PORT"] else ""
    credentials = f"{user}{password}@" if user else ""
    return f"postgres://{credentials}{host}{port}/{quote(params['NAME'], safe='')}"


def process_env(**overrides: str) -> dict[str, str]:
    """The test run's environment (its secrets, broker), on the test database."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["PYTHONPATH"] = str(ROOT)
    env.pop("PLANGATE_ENV_FILE", None)
    if IS_POSTGRES:
        env["DATABASE_URL"] = subprocess_database_url()
    env.update(overrides)
    return env


def start(args: list[str], *, env: dict[str, str], log: Path, cwd: Path = ROOT) -> subprocess.Popen:
    """Start a process in its own process group, its output going to ``log``."""
    with log.open("ab") as output:
        return subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen, *, timeout: float = 30) -> None:
    """Ask politely (SIGTERM), then kill the process and anything left in its group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    # The group id is the process id (start_new_session): children such as beat go too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.poll() is None:
        process.wait(timeout=10)


def tail(log: Path, lines: int = 60) -> str:
    if not log.exists():
        return "(no output)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def wait_for(condition, *, timeout: float, interval: float = 0.2) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def unique_queue() -> str:
    """A queue name of its own, so test workers never take another run's tasks."""
    return f"plangate-test-{uuid.uuid4().hex[:12]}"


def worker_args(queue: str, *extra: str, celery: str | Path | None = None) -> list[str]:
    """``celery worker`` on ``queue`` alone, named after it, with no chatter between workers."""
    return [
        str(celery or BIN / "celery"),
        "-A",
        "controlplane",
        "worker",
        "--concurrency",
        "1",
        "--loglevel",
        "INFO",
        "--hostname",
        f"{queue}@%h",
        "--without-gossip",
        "--without-mingle",
        *extra,
    ]


def start_beat_worker(
    queue: str, *, env: dict[str, str], directory: Path
) -> tuple[subprocess.Popen, Path]:
    """``celery worker -B`` on ``queue``, its beat schedule and log in ``directory``."""
    log = directory / "worker.log"
    args = worker_args(queue, "-B", "--schedule", str(directory / "celerybeat-schedule"))
    return start(args, env=env, log=log), log


@dataclass(frozen=True)
class Worker:
    """A worker ``running_worker`` started: its queue, its process and its log."""

    queue: str
    process: subprocess.Popen
    log: Path

    def exited(self) -> bool:
        return self.process.poll() is not None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self) -> str:
        return tail(self.log)


@contextlib.contextmanager
def running_worker(directory: Path, *, beat: bool = False, **variables: str) -> Iterator[Worker]:
    """A real Celery worker on a queue of its own (with beat and ``QUIET_BEAT`` when
    ``beat``), the environment ``variables`` set, its log in ``directory``; stopped, and
    its queue removed from Redis, when the block ends."""
    queue = unique_queue()
    env = process_env(
        **{**(QUIET_BEAT if beat else {}), **variables, "CELERY_TASK_DEFAULT_QUEUE": queue}
    )
    if beat:
        process, log = start_beat_worker(queue, env=env, directory=directory)
    else:
        log = directory / "worker.log"
        process = start(worker_args(queue), env=env, log=log)
    try:
        yield Worker(queue, process, log)
    finally:
        stop(process)
        forget_queue(queue)


def forget_queue(queue: str, broker_url: str | None = None) -> None:
    """Remove what a test's queue left in Redis."""
    import redis

    client = redis.Redis.from_url(broker_url or settings.CELERY_BROKER_URL)
    try:
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    finally:
        client.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_gunicorn(
    env: dict[str, str], log: Path, *, workers: int, start_seconds: float = 60
) -> tuple[subprocess.Popen, str]:
    """gunicorn serving Plangate with `workers` sync workers on a free port, once it
    answers /healthz; the process and its base URL."""
    port = free_port()
    process = start(
        [
            str(BIN / "gunicorn"),
            "controlplane.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            "sync",
            "--timeout",
            "60",
            "--log-level",
            "warning",
        ],
        env=env,
        log=log,
    )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_seconds
    with httpx.Client(base_url=base_url, timeout=5) as client:
        while time.monotonic() < deadline:
            assert process.poll() is None, f"gunicorn exited:\n{tail(log)}"
            try:
                if client.get("/healthz").status_code == 200:
                    return process, base_url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    stop(process)
    raise AssertionError(f"gunicorn not ready after {start_seconds} s:\n{tail(log)}")
