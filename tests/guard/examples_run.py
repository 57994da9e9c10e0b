"""Running one of examples/ as its own process against the suite's live server, with the
environment every example reads (control plane, issuer, member) and no PYTHONPATH: an
example finds the guard on its own, as a reader's copy would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def run_example(
    script: str, *, url: str, api_key: str, **environment: str
) -> subprocess.CompletedProcess[str]:
    """Run `script` (a path under the repository) and return what it did; `environment`
    adds to or overrides the variables every example reads."""
    env = {
        **os.environ,
        "PLANGATE_URL": url,
        "PLANGATE_API_KEY": api_key,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
        **environment,
    }
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
