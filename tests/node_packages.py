"""Node packages for the tests that hold our tokens to an independent JOSE stack: installed
from the npm registry, with npm, once per set of pinned versions, into a folder under the
user's cache (PLANGATE_NODE_CACHE names another). Without node and npm such a test is
skipped on a workstation, and fails in CI (CI=true), where it must run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import IN_CI

#: The packages and versions the tests run against (docs/decisions/0067, 0068).
JOSE = "jose@6.2.19"
STATUS_LIST = "@sd-jwt/jwt-status-list@0.19.0"


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}: CI must run the independent implementations")
    pytest.skip(reason)


def node_folder(*packages: str) -> Path:
    """A folder whose node_modules holds ``packages`` (npm specs, pinned), installed on
    first use. A script written into it imports them."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        _unavailable("node and npm are not installed")
    cache = Path(os.environ.get("PLANGATE_NODE_CACHE", Path.home() / ".cache" / "plangate-tests"))
    name = hashlib.sha256(json.dumps(sorted(packages)).encode()).hexdigest()[:16]
    folder = cache / f"node-{name}"
    if not (folder / "node_modules" / ".installed").exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text(json.dumps({"private": True, "type": "module"}))
        result = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--no-save", *packages],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            _unavailable(f"npm install {' '.join(packages)} failed: {result.stderr[-2000:]}")
        (folder / "node_modules" / ".installed").write_text("\n".join(packages))
    return folder


def node_run(folder: Path, script: str, *args: str) -> dict:
    """Run the ES module ``script`` in ``folder`` with ``args``; its stdout, as JSON."""
    path = folder / f"check-{hashlib.sha256(script.encode()).hexdigest()[:12]}.mjs"
    if not path.exists():
        path.write_text(script)
    result = subprocess.run(
        ["node", str(path), *args], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
