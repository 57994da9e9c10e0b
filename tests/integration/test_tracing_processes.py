"""Traces from a real gunicorn configured only by the OTEL_* environment, received by an
OTLP/HTTP receiver in the test (tests/otlp.py): each door's span inside the request's
server span, continuing the caller's traceparent, with the plan, agent, policy version and
code; and the console exporter printing the same spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace

from kernel.tracing import tracing_enabled, tracing_exporters
from tests.conftest import plan_document
from tests.otlp import OtlpReceiver, ReceivedSpan

from .processes import IS_POSTGRES, process_env, start_gunicorn, stop, tail
from .test_rate_limit_processes import manage, seed_agent

PLAN = plan_document(user="alice@limits.test", steps=[{"tool": "read_issue"}])
AT = "2026-11-30T09:00:00.250Z"
ROOT = Path(__file__).resolve().parents[2]
TRACED_AGENT = ROOT / "tests" / "guard" / "traced_agent.py"
ISSUER = "https://plangate.tracing.test"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
#: what seed_agent's policy admits, and deploy_* once a person approved it
REVIEWED = {
    "version": 1,
    "default": "deny",
    "rules": [
        {"effect": "allow", "tools": ["read_*", "deploy_*"]},
        {"effect": "review", "tools": ["deploy_*"]},
    ],
}


def server_env(tmp_path: Path, receiver: OtlpReceiver) -> dict[str, str]:
    overrides = {
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PLANGATE_ENV_FILE": os.devnull,
        "STATIC_ROOT": str(tmp_path),
        "CACHE_URL": "locmemcache://",
        "LOG_LEVEL": "WARNING",
        "OTEL_TRACES_EXPORTER": "otlp,console",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_SERVICE_NAME": "plangate-test",
        "PLANGATE_ISSUER": ISSUER,
    }
    if not IS_POSTGRES:
        overrides["DATABASE_URL"] = f"sqlite:///{tmp_path / 'tracing.sqlite3'}"
    return process_env(**overrides)


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == name]


@pytest.mark.django_db(transaction=True)
def test_the_server_traces_each_door_inside_the_request_continuing_the_callers_trace(tmp_path):
    with OtlpReceiver() as receiver:
        env = server_env(tmp_path, receiver)
        api_key = seed_agent(env, tmp_path)
        policy_file = tmp_path / "reviewed.json"
        policy_file.write_text(json.dumps(REVIEWED))
        manage(env, "set_policy", "limits", "--file", str(policy_file), "--team", "limits")
        manage(
            {**env, "DJANGO_SUPERUSER_PASSWORD": "a-long-test-password"},
            "createsuperuser",
            "--noinput",
            "--username",
            "boss",
            "--email",
            "boss@limits.test",
        )
        headers = {"Authorization": f"Bearer {api_key}"}
        log = tmp_path / "gunicorn.log"
        process, base_url = start_gunicorn(env, log, workers=1)
        try:
            with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
                declared = client.post(
                    "/v1/plans",
                    json={"plan": PLAN},
                    headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                )
                assert declared.status_code == 201, declared.text
                plan = declared.json()
                refreshed = client.post(
                    f"/v1/plans/{plan['id']}/refresh", json={"token": plan["token"]}
                )
                assert refreshed.status_code == 200, refreshed.text
                events = {"events": [{"at": AT, "tool": "read_issue", "decision": "allowed"}]}
                events["events"][0]["step"] = 0
                assert client.post(f"/v1/plans/{plan['id']}/events", json=events).is_success
                assert client.get(f"/v1/plans/{plan['id']}/status").status_code == 200
                refused = client.post(
                    "/v1/plans", json={"plan": plan_document(user="alice@limits.test")}
                )
                assert refused.status_code == 403
                # A plan a person must approve: the token door waits, a person decides
                # (decide_plan, a process of its own, traced the same way), the door answers.
                reviewed = client.post(
                    "/v1/plans",
                    json={
                        "plan": plan_document(
                            user="alice@limits.test", steps=[{"tool": "deploy_app"}]
                        )
                    },
                )
                assert reviewed.status_code == 202, reviewed.text
                waiting = reviewed.json()["id"]
                assert client.post(f"/v1/plans/{waiting}/token").status_code == 409
                manage(env, "decide_plan", waiting, "approve", "--by", "boss@limits.test")
                assert client.post(f"/v1/plans/{waiting}/token").status_code == 200
            # An agent with an OpenTelemetry SDK, its guard declaring against this server.
            agent = subprocess.run(
                [
                    sys.executable,
                    str(TRACED_AGENT),
                    base_url,
                    api_key,
                    ISSUER,
                    receiver.endpoint,
                    "read_issue",
                    "send_email",
                ],
                input=json.dumps(PLAN),
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
                env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
            )
            assert agent.returncode == 0, agent.stderr
            wanted = {
                "plangate.plan.issue": 4,
                "plangate.plan.refresh": 1,
                "plangate.events.record": 1,
                "plangate.status_feed": 1,
                "plangate.plan.token": 2,
                "plangate.approval.decide": 1,
                "agent run": 1,
                "execute_tool send_email": 1,
            }
            spans = receiver.wait_for_spans(
                lambda spans: all(len(named(spans, n)) >= c for n, c in wanted.items())
            )
        finally:
            stop(process)

    by_id = {span.span_id: span for span in spans}
    issued, refused_span, reviewed_span, declared_by_agent = sorted(
        named(spans, "plangate.plan.issue"), key=lambda span: span.start_ns
    )
    # One trace from the agent through its guard's declaration into the server, and its
    # decisions: the declaration's server span is a child of the agent's own span.
    (agent_run,) = named(spans, "agent run")
    assert declared_by_agent.trace_id == agent_run.trace_id
    assert by_id[declared_by_agent.parent_span_id].parent_span_id == agent_run.span_id
    assert declared_by_agent.attributes["plangate.code"] == "ok"
    for tool, code in (("read_issue", "allowed"), ("send_email", "not_in_plan")):
        (decision,) = named(spans, f"execute_tool {tool}")
        assert (decision.trace_id, decision.parent_span_id) == (
            agent_run.trace_id,
            agent_run.span_id,
        )
        assert decision.attributes["plangate.decision"] == code
    assert reviewed_span.attributes["plangate.plan.id"] == waiting
    # The declaration continues the caller's trace: the request's server span is the child
    # of the span the traceparent named, and the door's span the child of that.
    request_span = by_id[issued.parent_span_id]
    assert request_span.kind == trace.SpanKind.SERVER.value + 1  # OTLP counts from 1
    assert (request_span.trace_id, request_span.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    assert issued.trace_id == CALLER_TRACE
    assert issued.attributes["plangate.plan.id"] == plan["id"]
    assert issued.attributes["plangate.code"] == "ok"
    assert issued.attributes["plangate.policy.version"] == plan["policy"]["version"]
    assert issued.attributes["plangate.agent.id"]
    assert issued.resource["service.name"] == "plangate-test"
    assert refused_span.attributes["plangate.code"] == "policy_denied"
    for name in ("plangate.plan.refresh", "plangate.events.record", "plangate.status_feed"):
        # the requests this test sent (the agent's guard reads its own plan's feed too)
        (door,) = [
            span
            for span in named(spans, name)
            if span.attributes.get("plangate.plan.id") == plan["id"]
        ]
        assert door.attributes["plangate.plan.id"] == plan["id"], name
        assert by_id[door.parent_span_id].kind == 2, name  # inside its request's server span
        assert door.trace_id != CALLER_TRACE  # no traceparent sent: a trace of its own
    pending, issued_token = sorted(
        named(spans, "plangate.plan.token"), key=lambda span: span.start_ns
    )
    assert pending.attributes["plangate.code"] == "approval_pending"
    assert (
        issued_token.attributes["plangate.code"],
        issued_token.attributes["plangate.plan.id"],
    ) == (
        "ok",
        waiting,
    )
    (decided,) = named(spans, "plangate.approval.decide")
    assert decided.attributes["plangate.code"] == "approved"
    assert decided.attributes["plangate.plan.id"] == waiting
    (recorded,) = [
        span
        for span in named(spans, "plangate.events.record")
        if span.attributes.get("plangate.plan.id") == plan["id"]
    ]
    assert recorded.attributes["plangate.events.count"] == 1
    # The console exporter printed the same spans in the server's output.
    assert '"name": "plangate.plan.refresh"' in log.read_text(), tail(log)


def test_tracing_is_off_unless_an_exporter_is_named():
    assert tracing_exporters({}) == []
    assert tracing_exporters({"OTEL_TRACES_EXPORTER": "none"}) == []
    assert tracing_exporters({"OTEL_TRACES_EXPORTER": "otlp, console"}) == ["otlp", "console"]
    # This test process runs with none named: no SDK provider was installed.
    assert "OTEL_TRACES_EXPORTER" not in os.environ
    assert not tracing_enabled()
    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"
