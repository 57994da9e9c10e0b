"""The policy simulator decides a call with the guard's own decider, and still the control
plane never loads the agent's HTTP client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_server_with_its_simulator_loads_no_http_client():
    code = (
        "import django, sys\n"
        "django.setup()\n"
        "import controlplane.urls, rehearsal.simulator, rehearsal.admin, plans.api\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'httpx'"
        " or m in ('guard.agent.http', 'guard.agent.guard'))\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
