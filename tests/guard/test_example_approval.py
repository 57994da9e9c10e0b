"""examples/scripted_agent.py against a live control plane whose policy sends mail to a
person: it says where the plan waits for approval ("waiting for approval: <the plan's page
in the approval queue>"), waits, and runs its script once a person approved."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from django.conf import settings

from plans.approvals import plan_approval_decide
from plans.models import Plan, PlanEvent
from policies.services import policy_set
from tests.plans.approval_helpers import REVIEW_POLICY, approver_for

ROOT = Path(__file__).resolve().parents[2]
WAITING = "waiting for approval: "


def test_the_example_says_where_its_plan_waits_and_runs_once_approved(live_server, agent, team):
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    approver = approver_for(team)
    env = {
        **os.environ,
        "PLANGATE_URL": live_server.url,
        "PLANGATE_API_KEY": agent.api_key,
        "PLANGATE_ISSUER": settings.PLANGATE_ISSUER,
        "PLANGATE_MEMBER": "alice@acme.dev",
    }
    env.pop("PYTHONPATH", None)
    process = subprocess.Popen(
        [sys.executable, "examples/scripted_agent.py"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout], daemon=True
    )
    reader.start()
    try:
        seen = []
        while not (seen and seen[-1].startswith(WAITING)):
            seen.append(lines.get(timeout=60))
        waiting = seen[-1].rstrip("\n")
        plan = Plan.objects.get()
        assert plan.status == Plan.Status.PENDING_APPROVAL
        assert waiting == (
            f"{WAITING}{settings.PLANGATE_ISSUER}/admin/notify/approvalrequest/{plan.pk}/change/"
        )
        assert not any("[?]" in line for line in seen)

        plan_approval_decide(plan=plan, by_user=approver, approve=True)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=10)
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    output = "".join(seen + rest)

    assert process.returncode == 0, output + process.stderr.read()
    assert "guard: declared " in output
    assert "[?]" not in output
    plan.refresh_from_db()
    assert plan.approval == Plan.Approval.APPROVED
    assert PlanEvent.objects.filter(plan=plan, decision="allowed", tool="send_email").exists()
