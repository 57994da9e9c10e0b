"""The kernel (errors, parsers, middleware, admin base, rate limits, schema hooks, checks) is
a leaf: it imports no Plangate app, so the apps can all import it and no import runs in a
circle. controlplane/ is wiring only: settings, urls, wsgi, celery, the admin site and the
probes, which are the only modules that know every app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = {"members", "policies", "plans", "audit", "controlplane"}
KERNEL = sorted(
    str(path.relative_to(ROOT / "kernel"))
    for path in (ROOT / "kernel").rglob("*.py")
    if path.name != "__init__.py"
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
        "ratelimit.py",
        "models.py",
        "checks.py",
        "openapi.py",
        "admin_forms.py",
    } <= set(KERNEL)


@pytest.mark.parametrize("name", KERNEL)
def test_a_kernel_module_imports_no_app(name):
    apps = {
        module
        for module in imported_modules(ROOT / "kernel" / name)
        if module.split(".")[0] in APPS
    }

    assert apps == set(), f"kernel/{name} imports {sorted(apps)}"


def test_controlplane_is_wiring_only():
    modules = {path.name for path in (ROOT / "controlplane").glob("*.py")}

    assert modules == {
        "__init__.py",
        "settings.py",
        "urls.py",
        "wsgi.py",
        "celery.py",
        "admin.py",
        "probes.py",
        "metrics.py",  # GET /metrics: the scrape, like the probes
        "home.py",  # GET /: what this server is and where its doors are
        "broker.py",  # the embedded broker's transport, messages written whole (0059)
    }
    assert not (ROOT / "controlplane" / "management").exists()
    assert not (ROOT / "controlplane" / "migrations").exists()
