"""The embedded filesystem broker of `make run` keeps every folder under var/ (or
PLANGATE_BROKER_DIR): none is created relative to the directory a process starts in, as
kombu's ``control/`` for exchange tables was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
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


def migrated_env(tmp_path: Path, broker: Path) -> dict[str, str]:
    """``filesystem_env`` on a migrated SQLite file, the broker's folders in ``broker``, a
    queue of the test's own."""
    env = filesystem_env(tmp_path, PLANGATE_BROKER_DIR=str(broker))
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
    env["CELERY_TASK_DEFAULT_QUEUE"] = unique_queue()
    return env


def wait_until_ready(worker: subprocess.Popen, log: Path) -> None:
    assert wait_for(
        lambda: worker.poll() is not None or " ready." in log.read_text(errors="replace"),
        timeout=TIMEOUT,
        interval=0.5,
    ), f"the worker did not become ready:\n{tail(log)}"
    assert worker.poll() is None, f"the worker exited:\n{tail(log)}"


def send_and_see_it_run(worker: subprocess.Popen, log: Path, env: dict[str, str], cwd: Path):
    """A task sent through the broker's folders, run by ``worker``, which is still up."""
    sent = subprocess.run(
        [str(BIN / "celery"), "-A", "controlplane", "call", "plans.tasks.expire_plans"],
        cwd=cwd,
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
            or f"plans.tasks.expire_plans[{task_id}] succeeded" in log.read_text(errors="replace")
        ),
        timeout=TIMEOUT,
        interval=0.5,
    ), f"the task did not run:\n{tail(log)}"
    assert worker.poll() is None, f"the worker exited:\n{tail(log)}"


@pytest.mark.worker
def test_a_worker_on_the_filesystem_broker_leaves_no_folder_where_it_started(tmp_path):
    home = tmp_path / "started-here"
    home.mkdir()
    broker = tmp_path / "broker"
    root_had_control = (ROOT / "control").exists()
    env = migrated_env(tmp_path, broker)
    queue = env["CELERY_TASK_DEFAULT_QUEUE"]
    log = tmp_path / "worker.log"
    worker = start(worker_args(queue), env=env, log=log, cwd=home)
    try:
        wait_until_ready(worker, log)
        # A task sent from the same directory goes through the broker's folders and runs.
        send_and_see_it_run(worker, log, env, home)
    finally:
        stop(worker)

    assert os.listdir(home) == []
    assert (ROOT / "control").exists() == root_had_control
    assert sorted(path.name for path in broker.iterdir()) == ["control", "messages", "processed"]
    assert any(path.suffix == ".exchange" for path in (broker / "control").iterdir())


@pytest.mark.worker
def test_an_empty_message_in_the_queue_does_not_stop_the_worker(tmp_path):
    # kombu #1551: kombu's writer creates the file, then writes it; a worker listing the
    # folder in between read an empty message, failed to decode it and exited.
    broker = tmp_path / "broker"
    env = migrated_env(tmp_path, broker)
    queue = env["CELERY_TASK_DEFAULT_QUEUE"]
    log = tmp_path / "worker.log"
    worker = start(worker_args(queue), env=env, log=log)
    try:
        wait_until_ready(worker, log)
        # First in the queue's order (the names sort by their leading number), then a task.
        (broker / "messages" / f"0_{uuid.uuid4()}.{queue}.msg").write_bytes(b"")
        send_and_see_it_run(worker, log, env, ROOT)
        assert f"skipped an unreadable message in queue {queue}" in log.read_text()
    finally:
        stop(worker)
    assert not list((broker / "messages").glob(f"*.{queue}.msg"))


def test_a_message_is_in_the_queue_whole_or_not_at_all(tmp_path):
    from kombu import Connection

    from controlplane.broker import Transport

    folders = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),
    }
    with Connection("filesystem://", transport=Transport, transport_options=folders) as conn:
        queue = conn.SimpleQueue("plangate-whole")
        (tmp_path / f"0_{uuid.uuid4()}.plangate-whole.msg").write_bytes(b'{"body": "cut sh')
        queue.put({"n": 1})
        queue.put({"n": 2})
        # Only finished messages are in the folder: nothing is left under a writing name.
        assert all(
            name.endswith(".plangate-whole.msg")
            for name in os.listdir(tmp_path)
            if name != "control"
        )
        # (Two messages of one millisecond come in either order, as with kombu's own names.)
        got = [queue.get(timeout=5).payload for _ in range(2)]
        assert sorted(got, key=lambda payload: payload["n"]) == [{"n": 1}, {"n": 2}]
        queue.close()
