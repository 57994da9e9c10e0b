"""The guard's spans (guard.tracing), sent by a real agent process with an OpenTelemetry SDK
to an OTLP receiver in the test: each decision an ``execute_tool`` span under the agent's
own span, with the GenAI and Plangate attributes; a blocked one with status ERROR; and a
tools/call relayed under its decision's span, so the wrapped server's span is its child."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from guard import tracing
from tests.conftest import plan_document
from tests.otlp import OtlpReceiver

SCRIPT = Path(__file__).with_name("traced_agent.py")
ROOT = Path(__file__).resolve().parents[2]


def test_decisions_are_execute_tool_spans_under_the_callers_span(live_server, agent):
    with OtlpReceiver() as receiver:
        done = subprocess.run(
            [
                sys.executable,
                str(SCRIPT),
                live_server.url,
                agent.api_key,
                settings.PLANGATE_ISSUER,
                receiver.endpoint,
            ],
            input=json.dumps(plan_document()),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        spans = receiver.wait_for_spans(lambda spans: len(spans) >= 6)
    by_name = {span.name: span for span in spans}
    root = by_name["agent run"]
    allowed = by_name["execute_tool github_list_issues"]
    blocked = by_name["execute_tool send_email"]
    for span in (allowed, blocked):
        assert (span.trace_id, span.parent_span_id) == (root.trace_id, root.span_id)
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.kind == 1  # INTERNAL
    assert allowed.attributes["gen_ai.tool.name"] == "github_list_issues"
    assert allowed.attributes["plangate.decision"] == "allowed"
    assert allowed.attributes["plangate.step"] == 0
    assert allowed.attributes["plangate.policy.version"] >= 1
    assert allowed.attributes["plangate.plan.id"]
    assert allowed.status_code == 0  # unset
    assert blocked.attributes["plangate.decision"] == "not_in_plan"
    assert blocked.status_code == 2  # ERROR
    # client -> execute_tool -> the wrapped server's span
    client = by_name["mcp client"]
    relayed = by_name["execute_tool github_get_issue"]
    tool = by_name["tool github_get_issue"]
    assert (relayed.trace_id, relayed.parent_span_id) == (client.trace_id, client.span_id)
    assert (tool.trace_id, tool.parent_span_id) == (client.trace_id, relayed.span_id)


def test_without_an_sdk_the_decision_path_asks_for_no_tracer():
    """This test process installs no SDK provider: the guard answers None, and looks at the
    global provider again only every RECHECK_EVERY decisions."""
    assert tracing.decision_tracer() is None
    assert tracing._tracer is None
    assert 0 < tracing._countdown <= tracing.RECHECK_EVERY
