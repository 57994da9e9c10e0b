"""`pip install "./guard[mcp]"` into a fresh virtualenv gives a working `plangate-mcp`;
without the extra the command is there too, and says which extra it needs.

`test_install.py`'s import-everything check imports the gateway's modules as well: this
repository's environment installs the extra (requirements-dev.txt), so every module of the
package must import there. Which modules need the extra, and that the command without it
fails clearly rather than with a traceback, is this test's to show."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import guard

GUARD_DIR = Path(guard.__file__).parent
INSTALL_TIMEOUT = 900
NO_NETWORK = re.compile(
    r"No matching distribution|Could not find a version|NewConnectionError|"
    r"Temporary failure in name resolution|Network is unreachable"
)


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_pip_install_with_the_mcp_extra_gives_a_working_plangate_mcp(tmp_path):
    source = tmp_path / "guard"
    shutil.copytree(GUARD_DIR, source, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    elsewhere = tmp_path / "elsewhere"  # neither the checkout nor the source copy
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"

    def run(*command: str, extra_env: dict[str, str] | None = None, timeout: float = 120):
        return subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            cwd=elsewhere,
            env={**env, **(extra_env or {})},
            timeout=timeout,
        )

    def pip_install(requirement: str) -> None:
        installed = run(
            str(venv / "bin" / "python"),
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

    ready = {"PLANGATE_API_KEY": "pg_unused", "PLANGATE_URL": "http://127.0.0.1:9"}

    pip_install(str(source))
    without_extra = run("plangate-mcp", "--", "some-server", extra_env=ready)
    pip_install(f"{source}[mcp]")
    helped = run("plangate-mcp", "--help")
    gateway_modules = run(
        str(venv / "bin" / "python"),
        "-c",
        "import guard.gateway.serve, guard.gateway.relay, mcp; print(guard.gateway.serve.__file__)",
    )
    missing_key = run("plangate-mcp", "--url", "http://127.0.0.1:9", "--", "some-server")

    assert without_extra.returncode == 2
    assert 'the MCP gateway needs the mcp extra: pip install "plangate-guard[mcp]"' in (
        without_extra.stderr
    )
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: plangate-mcp")
    assert "--upstream-url" in helped.stdout
    assert gateway_modules.returncode == 0, gateway_modules.stderr
    assert Path(gateway_modules.stdout.strip()).is_relative_to(venv)
    assert missing_key.returncode == 2
    assert "PLANGATE_API_KEY" in missing_key.stderr
