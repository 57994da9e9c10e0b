"""The kernel in controlplane/ (errors, parsers, middleware, admin base, rate limits, schema
hooks, checks) is a leaf: it imports no Plangate app, so the apps can all import it and no
import runs in a circle. Only the wiring (settings, urls, wsgi, celery, the probes) knows
the apps."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONTROLPLANE = Path(__file__).resolve().parents[2] / "controlplane"
WIRING = {"settings.py", "urls.py", "wsgi.py", "celery.py", "api.py", "admin.py", "apps.py"}
APPS = {"members", "policies", "plans"}
KERNEL = sorted(
    path.name
    for path in CONTROLPLANE.glob("*.py")
    if path.name not in WIRING and path.name != "__init__.py"
)


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_kernel_has_modules_to_check():
    assert {
        "problems.py",
        "parsers.py",
        "middleware.py",
        "admin_base.py",
        "admin_scoping.py",
        "admin_actions.py",
        "admin_widgets.py",
        "json_format.py",
    } <= set(KERNEL)


@pytest.mark.parametrize("name", KERNEL)
def test_a_kernel_module_imports_no_app(name):
    apps = {
        module for module in imported_modules(CONTROLPLANE / name) if module.split(".")[0] in APPS
    }

    assert apps == set(), f"controlplane/{name} imports {sorted(apps)}"
