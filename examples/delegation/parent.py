"""An agent delegates a read step of its plan to a sub-agent (docs/guard.md, "Delegating
to a sub-agent"). No model needed: the calls are scripted.

The parent declares a plan (list the issues, then read up to three of them), delegates
"read two issues" to a sub-agent, and starts the sub-agent (sub_agent.py) as its own
process with the delegation on its stdin. The sub-agent's guard decides its calls under the
child plan; the parent's guard counts the two reserved reads as spent, so together they
never read more than the plan's three.

    export PLANGATE_API_KEY=pg_...            # the parent agent's key
    export PLANGATE_SUB_AGENT_API_KEY=pg_...  # the sub-agent's (default: the parent's)
    export PLANGATE_SUB_AGENT_ID=01...        # its agent id (default: the parent itself);
                                              # that agent must accept delegations
    python examples/delegation/parent.py      # PLANGATE_URL, PLANGATE_ISSUER, PLANGATE_MEMBER

Exit status 0 when every call was decided as expected, 1 when one was not, 2 when the
example could not run (one line on stderr says why).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

try:
    from guard.agent import Guard, GuardError
except ImportError:  # a checkout without `pip install ./guard`: use the repository's copy
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from guard.agent import Guard, GuardError

REPO = "acme/public-app"
HERE = Path(__file__).resolve().parent


def plan(member: str) -> dict:
    return {
        "version": 1,
        "goal": "Triage the open issues",
        "user": member,
        "steps": [
            {"tool": "github_list_issues", "args": {"repo": {"eq": REPO}}, "maxCalls": 1},
            {"tool": "github_get_issue", "args": {"repo": {"eq": REPO}}, "maxCalls": 3},
        ],
    }


def child_plan(member: str) -> dict:
    """The read step, narrowed to two calls: every child step lies inside a parent step."""
    return {
        "version": 1,
        "goal": "Read two issues",
        "user": member,
        "steps": [{"tool": "github_get_issue", "args": {"repo": {"eq": REPO}}, "maxCalls": 2}],
    }


def main() -> int:
    url = os.environ.get("PLANGATE_URL", "http://localhost:8000")
    api_key = os.environ.get("PLANGATE_API_KEY")
    member = os.environ.get("PLANGATE_MEMBER", "alice@acme.dev")
    if not api_key:
        print("set PLANGATE_API_KEY to the parent agent's key (pg_...)", file=sys.stderr)
        return 2
    expected_ok = True
    with Guard(url, api_key, issuer=os.environ.get("PLANGATE_ISSUER")) as guard:
        try:
            guard.declare(plan(member))
            listed = guard.check("github_list_issues", {"repo": REPO})
            print("parent: github_list_issues", listed.code.value)
            delegation = guard.delegate(
                child_plan(member), to=os.environ.get("PLANGATE_SUB_AGENT_ID") or None
            )
        except GuardError as error:  # delegation_widens, budget_unavailable... (error.errors)
            print(f"the parent could not delegate: {error}", file=sys.stderr)
            return 2
        print("parent: delegated", delegation.plan_id, "reserved", delegation.reserved["calls"])
        # The sub-agent: its own process, its own agent's API key, the delegation on stdin.
        environment = {
            **os.environ,
            "PLANGATE_API_KEY": os.environ.get("PLANGATE_SUB_AGENT_API_KEY", api_key),
        }
        sub_agent = subprocess.run(  # noqa: S603 - this interpreter and the example's file
            [sys.executable, str(HERE / "sub_agent.py")],
            input=delegation.to_json(),
            env=environment,
            text=True,
            check=False,
        )
        if sub_agent.returncode != 0:
            expected_ok = False
        # Of the three reads, the sub-agent holds two: the parent has one left.
        first = guard.check("github_get_issue", {"repo": REPO, "number": 3}).code.value
        second = guard.check("github_get_issue", {"repo": REPO, "number": 4}).code.value
        print("parent: github_get_issue", first)
        print("parent: github_get_issue", second)
        expected_ok = expected_ok and (first, second) == ("allowed", "max_calls_exceeded")
    print("as expected" if expected_ok else "NOT as expected")
    return 0 if expected_ok else 1


if __name__ == "__main__":
    sys.exit(main())
