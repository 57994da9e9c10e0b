"""`make bench`'s status list benchmark runs: bench/run.py started for real with a handful of
simulated guards, a 2 s bound and no proxy (the full run installs nginx; a test does not).
What it prints is checked for its tables, never for a figure: timings are the bench's
business, not a test's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .processes import ROOT

pytestmark = [pytest.mark.slow]


def test_the_status_list_bench_runs_and_prints_its_tables():
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}
    }
    result = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--only",
            "status_list",
            "--workers",
            "2",
            "--status-list-guards",
            "40",
            "--status-list-feed-guards",
            "6",
            "--status-list-bound",
            "2",
            "--status-list-seconds",
            "1",
            "--status-list-proxy",
            "none",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    for heading in (
        "Time from revocation to the first blocked call",
        "Server CPU per guard per minute",
        "The list's size",
        "per-plan feed, direct (baseline)",
        "1,000,000",
    ):
        assert heading in output, output[-4000:]
