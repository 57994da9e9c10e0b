"""`pip install ./guard` into a fresh virtualenv gives the `plangate` command, which runs
from anywhere on the installed copy alone (no checkout on its path, no Django)."""

from __future__ import annotations

import json

import pytest

from .installed import GUARD_DIR, fresh_virtualenv

EXAMPLE = GUARD_DIR.parent / "examples" / "policy_tests"


@pytest.mark.slow  # builds a virtualenv and runs pip
def test_pip_install_gives_a_working_plangate_command(tmp_path):
    installed = fresh_virtualenv(tmp_path)
    installed.pip_install(str(installed.source))
    plangate = installed.bin("plangate")

    helped = installed.run(plangate, "--help")
    tested = installed.run(
        plangate, "test", "--json", str(EXAMPLE / "policy.json"), str(EXAMPLE / "cases.json")
    )
    django = installed.run(installed.bin("python"), "-c", "import django")

    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: plangate")
    for command in ("validate", "check", "test", "token"):
        assert command in helped.stdout
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert json.loads(tested.stdout)["failed"] == 0
    assert django.returncode != 0, "the virtualenv should hold the guard alone"
