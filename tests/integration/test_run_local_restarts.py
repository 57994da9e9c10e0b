"""`make run`'s supervision (scripts/run_local.py) on small real processes: the line a dead
worker or beat gets, and the back-off that keeps a crash loop from spinning."""

from __future__ import annotations

import re
import sys

import pytest

from scripts import run_local
from scripts.run_local import Child

CRASH = "import sys; print('2026-12-01 12:00:00 ERROR celery.worker broker went away'); sys.exit(3)"


@pytest.fixture(autouse=True)
def logs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(run_local, "LOG_DIR", tmp_path / "log")
    return tmp_path / "log"


def crashed(child: Child) -> None:
    child.start({})
    assert child.process is not None
    child.process.wait(timeout=30)
    child.follow()


def test_a_crash_loop_waits_longer_each_time_up_to_a_minute(capsys, logs_in_tmp):
    child = Child("worker", [sys.executable, "-c", CRASH], restarts=True)
    for _ in range(8):
        crashed(child)
        child.schedule_restart(child.started_at + 0.1)

    printed = capsys.readouterr().out.splitlines()
    delays = [
        int(delay) for delay in re.findall(r"starting it again in (\d+) s", "\n".join(printed))
    ]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]
    # Each exit: the log's error line on the terminal, then one line saying why and when.
    assert printed[0] == "worker: 2026-12-01 12:00:00 ERROR celery.worker broker went away"
    assert printed[1].startswith("worker (pid ")
    assert printed[1].endswith(
        " exited with status 3 after: 2026-12-01 12:00:00 ERROR celery.worker broker went "
        f"away; starting it again in 1 s (its log: {logs_in_tmp / 'worker.log'})"
    )
    assert printed[-1].split("; ")[-1].startswith("starting it again in 60 s")
    assert (logs_in_tmp / "worker.log").read_text().count("broker went away") == 8


def test_a_process_that_ran_a_while_starts_again_after_a_second(capsys):
    child = Child("beat", [sys.executable, "-c", "import sys; sys.exit(0)"], restarts=True)
    for _ in range(3):
        crashed(child)
        child.schedule_restart(child.started_at + 0.1)
    assert child.restart_delay == 8

    crashed(child)
    child.schedule_restart(child.started_at + run_local.STEADY_SECONDS)

    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .split("; ")[-1]
        .startswith("starting it again in 1 s")
    )


def test_only_warnings_and_errors_reach_the_terminal(capsys, logs_in_tmp):
    lines = [
        "2026-12-01 12:00:00 INFO plangate.request GET /healthz 200",
        '127.0.0.1 - - "GET /v1/plans HTTP/1.1" 201',
        "2026-12-01 12:00:01 WARNING django.request Not Found: /v1/plans/x",
        "2026-12-01 12:00:02 WARNING plans.keys the next key is overdue",
        "[2026-12-01 12:00:03 +0000] [42] [ERROR] Worker (pid:43) was sent SIGKILL!",
        "2026-12-01 12:00:04 ERROR django.request Internal Server Error: /v1/plans",
    ]
    script = f"print({chr(10).join(lines)!r})"
    child = Child("web", [sys.executable, "-c", script], restarts=False)

    crashed(child)

    assert capsys.readouterr().out.splitlines() == [f"web: {line}" for line in lines[3:]]
