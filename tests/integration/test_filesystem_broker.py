"""The embedded filesystem broker of `make run` keeps every folder under var/ (or
PLANGATE_BROKER_DIR): none is created relative to the directory a process starts in, as
kombu's ``control/`` for exchange tables was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .processes import (
    BIN,
    ROOT,
    process_env,
    start,
    stop,
    tail,
    unique_queue,
    wait_for,
    worker_args,
)

TIMEOUT = 120


def filesystem_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """The default broker (whatever the suite runs on) and a SQLite file of the test's own."""
    env = process_env(
        CELERY_BROKER_URL="filesystem://",
        DATABASE_URL=f"sqlite:///{tmp_path / 'plangate.sqlite3'}",
    )
    env.pop("PLANGATE_BROKER_DIR", None)
    env.update(overrides)
    return env


def test_every_folder_of_the_filesystem_transport_is_under_var(tmp_path):
    # Settings are read at import, so a fresh process reads them with the default broker.
    script = (
        "import json, django; django.setup()\n"
        "from django.conf import settings\n"
        "from kombu.transport.filesystem import Channel\n"
        "print(json.dumps({'options': settings.CELERY_BROKER_TRANSPORT_OPTIONS,"
        " 'var': str(settings.VAR_DIR),"
        " 'folders': sorted(n for n in dir(Channel) if '_folder' in n)}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=filesystem_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    options, var = found["options"], Path(found["var"])

    # Every folder option kombu knows (data in/out, processed, control) is set...
    assert set(found["folders"]) >= {"control_folder", "data_folder_in", "processed_folder"}
    assert set(found["folders"]) <= set(options)
    # ...to an absolute path under var/.
    for name in found["folders"]:
        assert Path(options[name]).is_absolute() and Path(options[name]).is_relative_to(var), (
            name,
            options[name],
        )


@pytest.mark.worker
def test_a_worker_on_the_filesystem_broker_leaves_no_folder_where_it_started(tmp_path):
    home = tmp_path / "started-here"
    home.mkdir()
    broker = tmp_path / "broker"
    env = filesystem_env(tmp_path, PLANGATE_BROKER_DIR=str(broker))
    root_had_control = (ROOT / "control").exists()
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stderr
    queue = unique_queue()
    env["CELERY_TASK_DEFAULT_QUEUE"] = queue
    log = tmp_path / "worker.log"
    worker = start(worker_args(queue), env=env, log=log, cwd=home)
    try:
        assert wait_for(
            lambda: worker.poll() is not None or " ready." in log.read_text(errors="replace"),
            timeout=TIMEOUT,
            interval=0.5,
        ), f"the worker did not become ready:\n{tail(log)}"
        # A task sent from the same directory goes through the broker's folders and runs.
        sent = subprocess.run(
            [str(BIN / "celery"), "-A", "controlplane", "call", "plans.tasks.expire_plans"],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert sent.returncode == 0, sent.stderr
        task_id = sent.stdout.strip().splitlines()[-1]
        assert wait_for(
            lambda: (
                worker.poll() is not None
                or f"plans.tasks.expire_plans[{task_id}] succeeded"
                in log.read_text(errors="replace")
            ),
            timeout=TIMEOUT,
            interval=0.5,
        ), f"the task did not run:\n{tail(log)}"
        assert worker.poll() is None, f"the worker exited:\n{tail(log)}"
    finally:
        stop(worker)

    assert os.listdir(home) == []
    assert (ROOT / "control").exists() == root_had_control
    assert sorted(path.name for path in broker.iterdir()) == ["control", "messages", "processed"]
    assert any(path.suffix == ".exchange" for path in (broker / "control").iterdir())
