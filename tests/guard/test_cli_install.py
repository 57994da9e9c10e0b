"""`pip install ./guard` into a fresh virtualenv gives the `plangate` command, which runs
from anywhere on the installed copy alone (no checkout on its path, no Django)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import guard

GUARD_DIR = Path(guard.__file__).parent
EXAMPLE = GUARD_DIR.parent / "examples" / "policy_tests"
INSTALL_TIMEOUT = 900
NO_NETWORK = re.compile(
    r"No matching distribution|Could not find a version|NewConnectionError|"
    r"Temporary failure in name resolution|Network is unreachable"
)


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_pip_install_gives_a_working_plangate_command(tmp_path):
    source = tmp_path / "guard"
    shutil.copytree(GUARD_DIR, source, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if installed.returncode != 0 and NO_NETWORK.search(installed.stdout + installed.stderr):
        pytest.skip(f"pip could not fetch the guard's dependencies: {installed.stderr[-300:]}")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    plangate = venv / "bin" / "plangate"
    elsewhere = tmp_path / "elsewhere"  # neither the checkout nor the source copy
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(plangate), *args],
            capture_output=True,
            text=True,
            cwd=elsewhere,
            env=env,
            timeout=120,
        )

    helped = run("--help")
    tested = run("test", "--json", str(EXAMPLE / "policy.json"), str(EXAMPLE / "cases.json"))
    django = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import django"], capture_output=True, env=env
    )

    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: plangate")
    for command in ("validate", "check", "test", "token"):
        assert command in helped.stdout
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert json.loads(tested.stdout)["failed"] == 0
    assert django.returncode != 0, "the virtualenv should hold the guard alone"
