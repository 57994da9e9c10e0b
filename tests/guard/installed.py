"""The guard installed by pip into a fresh virtualenv, for the tests that run what it installs
from outside the checkout (test_cli_install, test_install_mcp)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import guard

GUARD_DIR = Path(guard.__file__).parent
INSTALL_TIMEOUT = 900
NO_NETWORK = re.compile(
    r"No matching distribution|Could not find a version|NewConnectionError|"
    r"Temporary failure in name resolution|Network is unreachable"
)


@dataclass(frozen=True)
class FreshVirtualenv:
    """A virtualenv with nothing installed, a copy of the guard's source to install, and a
    directory that is neither the checkout nor the copy, where every command runs, with
    the virtualenv first on PATH and no PYTHONPATH."""

    venv: Path
    source: Path
    elsewhere: Path

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(
        self, *command: str, extra_env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env["PATH"] = f"{self.venv / 'bin'}:/usr/bin:/bin"
        return subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            cwd=self.elsewhere,
            env={**env, **(extra_env or {})},
            timeout=timeout,
        )

    def pip_install(self, requirement: str) -> None:
        """``pip install requirement``; the test skips when pip cannot reach an index."""
        installed = self.run(
            self.bin("python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            requirement,
            timeout=INSTALL_TIMEOUT,
        )
        if installed.returncode != 0 and NO_NETWORK.search(installed.stdout + installed.stderr):
            pytest.skip(f"pip could not fetch the dependencies: {installed.stderr[-300:]}")
        assert installed.returncode == 0, installed.stdout + installed.stderr


def fresh_virtualenv(directory: Path) -> FreshVirtualenv:
    source = directory / "guard"
    shutil.copytree(GUARD_DIR, source, ignore=shutil.ignore_patterns("__pycache__"))
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    elsewhere = directory / "elsewhere"
    elsewhere.mkdir()
    return FreshVirtualenv(venv=venv, source=source, elsewhere=elsewhere)
