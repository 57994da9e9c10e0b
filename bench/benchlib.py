"""Small helpers shared by `bench/run.py` and the `bench/bench_*.py` modules.

Every figure a benchmark prints should sit next to a baseline measured in the same run: the
machine is shared and noisy, so a ratio says more than an absolute number. Nothing here
asserts anything; benchmarks print, they never pass or fail on speed.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Hard ceilings so that no loop can run away, whatever the options say.
MAX_MICRO_ITERATIONS = 1_000_000
MAX_MICRO_SECONDS = 30.0

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    """A scenario's server CPU per request, at most `multiple` times `/healthz`'s in the
    same run, on PostgreSQL. `why` is the one line that says where the figure comes from."""

    multiple: float
    why: str


# The HTTP targets, the one place they are declared (bench/README.md explains them). They
# are issue 14's shares of `/healthz`'s throughput (40%, 25%, 35%), restated as server CPU
# per request, which the load client sharing the cores does not distort: a share s of the
# throughput of a CPU-bound server is a CPU multiple of 1/s.
HTTP_TARGETS: dict[str, Target] = {
    "POST /v1/plans, 2 steps": Target(
        2.5,
        "the usual declaration: validate, one read, sign, three inserts (issue 14: 40% "
        "of /healthz's req/s)",
    ),
    "POST /v1/plans, 50 steps": Target(
        4.0,
        "validation, hash and policy passes grow with the steps (issue 14: 25% of "
        "/healthz's req/s)",
    ),
    "POST /v1/plans/{id}/refresh, 2 steps": Target(
        2.9,
        "a long-running agent refreshes before expiry; one more read than issuance (issue "
        "14: 35% of /healthz's req/s)",
    ),
}


@dataclass(frozen=True)
class MicroResult:
    name: str
    microseconds: float  # median of the batches, per call
    iterations: int


def measure(
    name: str,
    function: Callable[[], object],
    *,
    seconds: float = 0.5,
    batches: int = 5,
    max_iterations: int = 200_000,
) -> MicroResult:
    """Median time per call of `function`, in microseconds.

    Runs `batches` batches of roughly `seconds / batches` each (after a short calibration),
    bounded both by `max_iterations` in total and by a wall-clock ceiling.
    """
    seconds = min(seconds, MAX_MICRO_SECONDS)
    max_iterations = min(max_iterations, MAX_MICRO_ITERATIONS)
    function()  # warm caches and imports
    start = time.perf_counter()
    calibration = 0
    while calibration < 1000 and time.perf_counter() - start < 0.05:
        function()
        calibration += 1
    per_call = (time.perf_counter() - start) / calibration
    per_batch = max(1, min(max_iterations // batches, int(seconds / batches / per_call)))
    samples: list[float] = []
    deadline = time.perf_counter() + seconds * 2 + 1
    for _ in range(batches):
        batch_start = time.perf_counter()
        for _ in range(per_batch):
            function()
        samples.append((time.perf_counter() - batch_start) / per_batch)
        if time.perf_counter() > deadline:
            break
    return MicroResult(name, statistics.median(samples) * 1e6, per_batch * len(samples))


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values; 0.0 for an empty sequence."""
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A plain aligned table: first column left-aligned, the others right-aligned."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [
        max(len(str(headers[column])), *(len(row[column]) for row in cells))
        for column in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        first, *rest = values
        parts = [first.ljust(widths[0])]
        parts += [value.rjust(width) for value, width in zip(rest, widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    print(line([str(header) for header in headers]))
    print(line(["-" * width for width in widths]))
    for row in cells:
        print(line(row))


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def commit_described() -> str:
    """The checked-out commit, short, and whether tracked files differ from it."""

    def git(*arguments: str) -> str:
        result = subprocess.run(
            ["git", "-C", str(ROOT), *arguments],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return result.stdout.strip() if result.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "commit unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"commit {commit}" + (" with uncommitted changes" if dirty else "")


def run_described() -> str:
    """When, what and where, for the first line of a run: a figure is only comparable with
    another of the same machine, database and load."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now}, {commit_described()}; Python {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} cores ({cpu_model()}); load average "
        f"{load_described()}"
    )


def load_described() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min)"


def heading(title: str) -> None:
    print()
    print(f"== {title} ==")
