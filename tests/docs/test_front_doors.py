"""The front doors outside the site: README.md stays short, and its links and the guard's
README's lead to files that exist (mkdocs checks only the pages under docs/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRONT_DOORS = ["README.md", "guard/README.md", "examples/README.md"]
# [text](target): a relative target, without the scheme of a web address
RELATIVE_LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:)([^)#\s]+)(?:#[^)\s]*)?\)")


def test_the_readme_is_a_front_door_of_at_most_about_ten_kilobytes():
    assert len((ROOT / "README.md").read_bytes()) <= 10 * 1024


@pytest.mark.parametrize("page", FRONT_DOORS)
def test_every_relative_link_of_a_front_door_leads_to_a_file(page):
    path = ROOT / page
    targets = RELATIVE_LINK.findall(path.read_text())

    assert targets
    missing = [target for target in targets if not (path.parent / target).exists()]
    assert missing == []
