"""The documentation site builds with `mkdocs build --strict` (`make docs`): a broken link
between pages, a page the navigation names that is gone, or an example under examples/ that
a page includes and that was renamed fails here, in CI, not on a reader's screen."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Seconds on a loaded 2-core machine: `make check` leaves it out, `make test` and CI run it.
pytestmark = pytest.mark.slow


def mkdocs_build(site_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strict_and_shows_the_examples(tmp_path):
    result = mkdocs_build(tmp_path / "site")

    assert result.returncode == 0, result.stderr
    guard_page = (tmp_path / "site" / "guard" / "index.html").read_text()
    # The example's own text, pulled from examples/ by the snippets extension.
    example = (ROOT / "examples" / "async_agent.py").read_text()
    assert html.escape(example.splitlines()[0].removeprefix('"""'), quote=False) in guard_page
    assert "--8&lt;--" not in guard_page
    assert (tmp_path / "site" / "troubleshooting" / "index.html").is_file()


def test_a_page_that_includes_a_missing_example_fails_the_build(tmp_path):
    # mkdocs.yml itself, with one page of its own that names an example that is not there.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        '# Renamed\n\n```python\n--8<-- "examples/no_such_example.py"\n```\n'
    )
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {tmp_path / 'docs'}\nnav:\n  - index.md\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode != 0
    assert "examples/no_such_example.py" in result.stderr
