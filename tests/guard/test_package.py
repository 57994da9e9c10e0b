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


# What the control plane imports from the guard: the core, without the agent side.
CORE_MODULES = (
    "guard",
    "guard._document",
    "guard.canonical",
    "guard.claims",
    "guard.constraints",
    "guard.decisions",
    "guard.deny",
    "guard.eq_index",
    "guard.errors",
    "guard.finite",
    "guard.jwk",
    "guard.patterns",
    "guard.plan",
    "guard.policy",
    "guard.policy_evaluation",
    "guard.tokens",
)


def test_the_core_imports_neither_httpx_nor_the_agent_side() -> None:
    code = (
        f"import {', '.join(CORE_MODULES)}\n"
        "import sys\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'httpx'"
        " or m == 'guard.agent' or m.startswith('guard.agent.'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=GUARD_DIR.parent
    )
    assert result.returncode == 0, result.stderr


def test_the_agent_side_loads_when_guard_is_asked_for() -> None:
    code = (
        "import sys, guard\n"
        "assert 'guard.agent' not in sys.modules\n"
        "from guard import Guard\n"
        "from guard.agent import Guard as AgentGuard\n"
        "assert Guard is AgentGuard and 'httpx' in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=GUARD_DIR.parent
    )
    assert result.returncode == 0, result.stderr


def test_the_io_free_agent_modules_load_without_the_http_client() -> None:
    # The control plane's policy simulator decides a call with these; it must not need httpx.
    code = (
        "import sys\n"
        "import guard.agent.decider, guard.agent.session, guard.agent.verified\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'httpx'"
        " or m in ('guard.agent.http', 'guard.agent.guard'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=GUARD_DIR.parent
    )
    assert result.returncode == 0, result.stderr
