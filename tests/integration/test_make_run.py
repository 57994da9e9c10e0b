"""`make run` stays up: scripts/run_local.py started for real, on a free port, with a var/
of the test's own (PLANGATE_VAR_DIR), so the developer's var/ is never touched.

A killed worker comes back with one line saying why while the API keeps answering; the
demo API key is the same at the next start and still works; the servers' logs go to
var/log/, not to the terminal, and never hold the key.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .processes import ROOT, free_port, start, stop, tail, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.worker]

START_SECONDS = 180


def make_run_env(var: Path, port: int) -> dict[str, str]:
    """A developer's shell: none of the test run's settings, secrets or services."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PLANGATE_", "CELERY_", "DJANGO_", "LOG_", "METRICS_"))
        and name not in {"DATABASE_URL", "SECRET_KEY", "KEY_ENCRYPTION_KEY", "REDIS_URL"}
    }
    env.update(PLANGATE_VAR_DIR=str(var), PORT=str(port), WEB_CONCURRENCY="1")
    return env


class MakeRun:
    """One `make run`: its process, what it printed, and its var/."""

    def __init__(self, var: Path, port: int, output: Path) -> None:
        self.var, self.output_file = var, output
        self.base_url = f"http://127.0.0.1:{port}"
        self.process = start(
            [sys.executable, "scripts/run_local.py"], env=make_run_env(var, port), log=output
        )

    def output(self) -> str:
        return self.output_file.read_text(errors="replace")

    def log(self, name: str) -> str:
        path = self.var / "log" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_until(self, condition, what: str) -> None:
        assert wait_for(
            lambda: self.process.poll() is not None or condition(),
            timeout=START_SECONDS,
            interval=0.3,
        ), f"{what}:\n{tail(self.output_file)}"
        assert self.process.poll() is None, f"make run exited:\n{tail(self.output_file)}"

    def started(self) -> str:
        """Wait until the API and the worker answer; the printed API key."""
        self.wait_until(lambda: "Plangate is running on" in self.output(), "no start")
        self.wait_until(self.healthy, "the web server does not answer")
        self.wait_until(lambda: " ready." in self.log("worker"), "the worker is not ready")
        (key,) = re.findall(r"^API key: (pg_\S+)$", self.output(), re.MULTILINE)
        return key

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def child(self, command: str) -> int:
        """The process id of the child running ``celery ... <command>``."""
        listed = subprocess.run(
            ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(self.process.pid)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        found = [
            int(line.split()[0])
            for line in listed.splitlines()
            if f"-A controlplane {command} " in line
        ]
        assert len(found) == 1, listed
        return found[0]


def declare(base_url: str, key: str) -> httpx.Response:
    plan = {
        "version": 1,
        "goal": "Summarise open issues",
        "user": "alice@acme.dev",
        "steps": [{"tool": "github_list_issues", "args": {"repo": {"eq": "acme/app"}}}],
    }
    return httpx.post(
        f"{base_url}/v1/plans",
        json={"plan": plan},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )


def plans_stored(var: Path) -> int:
    with sqlite3.connect(var / "plangate.sqlite3") as database:
        return database.execute("SELECT COUNT(*) FROM plans_plan").fetchone()[0]


def test_make_run_brings_a_killed_worker_back_and_keeps_its_api_key(tmp_path):
    var = tmp_path / "var"
    port = free_port()
    first = MakeRun(var, port, tmp_path / "first.out")
    try:
        key = first.started()
        worker = first.child("worker")

        os.kill(worker, signal.SIGKILL)

        # One line says why, and the API answers meanwhile, the key authenticating.
        first.wait_until(
            lambda: f"worker (pid {worker}) was killed by SIGKILL" in first.output(),
            "no line about the dead worker",
        )
        assert first.healthy()
        assert declare(first.base_url, key).status_code == 201
        # The worker is back (a new process, ready again) and runs beat's tasks.
        first.wait_until(lambda: first.log("worker").count(" ready.") == 2, "no new worker")
        assert first.child("worker") != worker
        first.wait_until(
            lambda: " succeeded " in first.log("worker").rpartition(" ready.")[2],
            "the new worker ran nothing",
        )
        assert first.healthy()
        assert declare(first.base_url, key).status_code == 201
        assert plans_stored(var) == 2
    finally:
        stop(first.process)
    assert first.process.returncode == 0, tail(first.output_file)

    second = MakeRun(var, port, tmp_path / "second.out")
    try:
        assert second.started() == key
        assert declare(second.base_url, key).status_code == 201
        assert plans_stored(var) == 3
    finally:
        stop(second.process)

    printed = first.output() + second.output()
    # The restart line is on the terminal; the servers' chatter is in var/log/ only.
    assert printed.count("was killed by") == 1
    assert "GET /healthz" not in printed and "GET /healthz" in first.log("web")
    assert printed.count("Kept the demo API key") == 1
    assert f"PLANGATE_DEMO_API_KEY={key}\n" in (var / "local.env").read_text()
    assert sorted(path.name for path in (var / "log").iterdir()) == [
        "beat.log",
        "web.log",
        "worker.log",
    ]
    for log in (var / "log").iterdir():
        assert key not in log.read_text(errors="replace"), log.name
        assert key[16:] not in log.read_text(errors="replace"), log.name
    assert (
        not (ROOT / "var" / "local.env").exists()
        or key not in (ROOT / "var" / "local.env").read_text()
    )
