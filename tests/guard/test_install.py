"""`pip install ./guard` installs the package `guard` on its own: no Django, its own small
dependency set, every module importable."""

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
EXPECTED_DEPENDENCIES = {"ada-url", "cryptography", "google-re2", "httpx", "pyjwt", "rfc8785"}
# Each extra: the gateway's MCP SDK, and each framework adapter's framework.
EXPECTED_EXTRAS = {
    "mcp": {"mcp"},
    "openai-agents": {"openai-agents"},
    "pydantic-ai": {"pydantic-ai-slim"},
    "langgraph": {"langgraph", "langchain-core"},
    # guard.tracing: the OpenTelemetry API; plangate-mcp's own spans: the SDK and exporter.
    "otel": {"opentelemetry-api"},
    "otel-sdk": {
        "opentelemetry-api",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",
    },
}

# Imports every module of the `guard` package with Django and DRF made unimportable, and
# prints where the package came from and which modules loaded.
IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"django", "rest_framework"}:
            raise ImportError(f"{name} must not be needed by the guard")
        return None

sys.meta_path.insert(0, Refuse())
import guard
names = sorted(module.name for module in pkgutil.walk_packages(guard.__path__, "guard."))
for name in names:
    importlib.import_module(name)
print(json.dumps({"file": guard.__file__, "modules": names}))
"""


def import_everything(env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_guard_module_imports_without_django():
    loaded = import_everything(cwd=GUARD_DIR.parent)

    assert {
        "guard.agent",
        "guard.agent.guard",
        "guard.agent.acp",
        "guard.agent.reporter",
        "guard.agent.tools",
        "guard.agent.http",
    } <= set(loaded["modules"])
    assert {"guard.plan", "guard.policy", "guard.tokens"} <= set(loaded["modules"])


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_pip_installs_the_guard_alone(tmp_path):
    # Build from a copy, so the build leaves nothing in the working tree.
    source = tmp_path / "guard"
    shutil.copytree(GUARD_DIR, source, ignore=shutil.ignore_patterns("__pycache__"))
    sources = sorted(path.relative_to(source) for path in source.rglob("*"))
    target = tmp_path / "site"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if build.returncode != 0 and re.search(
        r"No matching distribution|Could not find a version|NewConnectionError|"
        r"Temporary failure in name resolution|Network is unreachable",
        build.stdout + build.stderr,
    ):
        pytest.skip(f"pip could not fetch the build backend (no network): {build.stderr[-300:]}")
    assert build.returncode == 0, build.stdout + build.stderr
    # The build leaves nothing in the package's directory (no build/, no *.egg-info), and
    # installs only the package's modules and its conformance vectors.
    after = sorted(
        path.relative_to(source)
        for path in source.rglob("*")
        if "__pycache__" not in path.relative_to(source).parts
    )
    assert after == sources
    installed = {
        path.relative_to(target / "guard").as_posix()
        for path in (target / "guard").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    shipped = [*source.rglob("*.py"), *source.glob("vectors/*.json")]  # the wheel's include
    assert installed == {path.relative_to(source).as_posix() for path in shipped}

    # The installed copy comes first; the guard's dependencies come from this environment,
    # where Django is installed too, but blocked by the import check.
    env = {**os.environ, "PYTHONPATH": str(target)}
    elsewhere = tmp_path / "elsewhere"  # not the source copy's parent, nor the repository
    elsewhere.mkdir()
    loaded = import_everything(env=env, cwd=elsewhere)

    assert Path(loaded["file"]).is_relative_to(target)
    assert {"guard.agent.guard", "guard.plan", "guard.tokens"} <= set(loaded["modules"])
    (metadata,) = target.glob("plangate_guard-*.dist-info/METADATA")
    requires: dict[str, set[str]] = {}  # by extra; "" for what every install gets
    for line in metadata.read_text().splitlines():
        if line.startswith("Requires-Dist: "):
            requirement = line.removeprefix("Requires-Dist: ")
            extra = re.search(r"extra == ['\"]([a-z0-9-]+)['\"]", requirement)
            name = re.split(r"[<>=!~ ;\[]", requirement)[0].lower()
            requires.setdefault(extra.group(1) if extra else "", set()).add(name)
    assert requires == {"": EXPECTED_DEPENDENCIES, **EXPECTED_EXTRAS}
