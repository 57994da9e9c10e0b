"""requirements.txt alone runs production: a fresh virtualenv with nothing else in it starts
a Celery worker on Redis (and on PostgreSQL when the suite runs on it) that answers a ping.

The development requirements install more (pytest and its plugins pull in packaging, for
one), so the suite's own environment cannot show that a runtime dependency is missing.
pip's cache makes the install take seconds after the first run.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from .processes import (
    IS_POSTGRES,
    IS_REDIS,
    NEEDS_REDIS,
    ROOT,
    forget_queue,
    process_env,
    start,
    stop,
    tail,
    unique_queue,
    wait_for,
    worker_args,
)

INSTALL_TIMEOUT = 900


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory) -> str:
    """A virtualenv holding requirements.txt and nothing else; its bin directory."""
    venv = tmp_path_factory.mktemp("runtime") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(ROOT / "requirements.txt"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-5000:]
    return str(venv / "bin")


@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.skipif(not IS_REDIS, reason=NEEDS_REDIS)
@pytest.mark.django_db(transaction=True)
def test_a_worker_from_requirements_txt_alone_runs_on_redis(runtime_venv, tmp_path):
    celery = f"{runtime_venv}/celery"
    python = f"{runtime_venv}/python"
    # What the dev requirements bring must not be what makes the worker start.
    absent = subprocess.run([python, "-c", "import pytest"], capture_output=True, check=False)
    assert absent.returncode != 0, "the runtime virtualenv has the dev requirements"

    queue = unique_queue()
    overrides = {"CELERY_TASK_DEFAULT_QUEUE": queue, "PATH": f"{runtime_venv}:/usr/bin:/bin"}
    if not IS_POSTGRES:
        # Not the laptop's var/plangate.sqlite3: its keys are not under the test's secrets.
        overrides["DATABASE_URL"] = f"sqlite:///{tmp_path / 'plangate.sqlite3'}"
    env = process_env(**overrides)
    env.pop("VIRTUAL_ENV", None)
    log = tmp_path / "worker.log"
    worker = start(worker_args(queue, celery=celery), env=env, log=log)
    try:
        assert wait_for(
            lambda: worker.poll() is not None or " ready." in log.read_text(errors="replace"),
            timeout=120,
            interval=0.5,
        ), f"the worker did not become ready:\n{tail(log)}"
        assert worker.poll() is None, f"the worker exited:\n{tail(log)}"
        ping = subprocess.run(
            [
                celery,
                "-A",
                "controlplane",
                "inspect",
                "ping",
                "--timeout",
                "10",
                "--destination",
                f"{queue}@{socket.gethostname()}",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop(worker)
        forget_queue(queue)

    assert ping.returncode == 0 and "pong" in ping.stdout, f"{ping.stdout}\n{tail(log)}"
    text = log.read_text(errors="replace")
    assert "Connected to redis://" in text
    assert "ModuleNotFoundError" not in text
