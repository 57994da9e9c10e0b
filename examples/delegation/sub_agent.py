"""The sub-agent of parent.py: starts its guard from the delegation on stdin, with its own
agent's API key (PLANGATE_API_KEY), and makes its calls under the child plan. Exit status
0 when every call was decided as expected."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

try:
    from guard.agent import Delegation, Guard, GuardError
except ImportError:  # a checkout without `pip install ./guard`: use the repository's copy
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from guard.agent import Delegation, Guard, GuardError

REPO = "acme/public-app"
EXPECTED: list[tuple[str, dict[str, Any], str]] = [
    ("github_get_issue", {"repo": REPO, "number": 1}, "allowed"),
    ("github_get_issue", {"repo": REPO, "number": 2}, "allowed"),
    ("github_get_issue", {"repo": REPO, "number": 5}, "max_calls_exceeded"),
    ("github_list_issues", {"repo": REPO}, "not_in_plan"),
]


def main() -> int:
    try:
        delegation = Delegation.from_json(sys.stdin.read())
        guard = Guard.from_delegation(delegation, os.environ["PLANGATE_API_KEY"])
    except (GuardError, KeyError) as error:
        print(f"the sub-agent could not start: {error}", file=sys.stderr)
        return 2
    with guard:
        ok = True
        for tool, args, expected in EXPECTED:
            code = guard.check(tool, args).code.value
            print(f"sub-agent: {tool} {code}")
            ok = ok and code == expected
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
