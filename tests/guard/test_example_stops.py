"""The examples stop with one line on stderr, and no traceback, when the control plane
cannot be reached: nothing listens at the URL they are given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
EXIT_CANNOT_RUN = 2


@pytest.mark.parametrize(
    "script",
    [
        "examples/scripted_agent.py",
        "examples/async_agent.py",
        pytest.param("examples/guarded_mcp_server.py", marks=pytest.mark.slow),
    ],
)
def test_an_example_says_in_one_line_that_the_control_plane_cannot_be_reached(script):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "PLANGATE_URL": url, "PLANGATE_API_KEY": "pg_unused"}
    env.pop("PYTHONPATH", None)  # the script finds the guard on its own
    env.pop("PLANGATE_ISSUER", None)

    result = subprocess.run(
        [sys.executable, script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == EXIT_CANNOT_RUN, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    name = Path(script).name
    assert line.startswith(f"{name}: cannot reach the control plane at {url} (")
    assert line.endswith("is `make run` running there? give its address with --url or PLANGATE_URL")
    assert "Traceback" not in result.stdout + result.stderr
    assert "!! expected" not in result.stdout  # it stopped, not walked on through its script
