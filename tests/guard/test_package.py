"""The guard package stands alone: no Django, and the public names are importable."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import guard

GUARD_DIR = Path(guard.__file__).parent


def test_no_module_in_guard_imports_django() -> None:
    for source in GUARD_DIR.rglob("*.py"):
        tree = ast.parse(source.read_text(), filename=str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] not in {"django", "rest_framework"}, source


def test_importing_guard_loads_no_django() -> None:
    code = (
        "import sys, guard\n"
        "loaded = [m for m in sys.modules if m == 'django' or m.startswith('django.')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=GUARD_DIR.parent)


def test_public_names_are_exported() -> None:
    for name in guard.__all__:
        assert getattr(guard, name) is not None
    assert {
        "validate_plan",
        "plan_hash",
        "CompiledPlan",
        "validate_policy",
        "evaluate_plan",
        "CompiledPolicy",
        "verify_token",
        "KeySet",
        "DocumentInvalid",
        "TokenInvalid",
    } <= set(guard.__all__)
