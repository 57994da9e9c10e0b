"""An agent process with an OpenTelemetry SDK installed (run by tests/guard/test_tracing.py):
a root span, a declared plan, an allowed and a blocked call through a real Guard, and a
tools/call relayed as plangate-mcp relays it, to the OTLP receiver the test names.

argv: control plane URL, API key, issuer, OTLP endpoint, then optionally the allowed tool,
the blocked tool and "relay" (default: github_list_issues, send_email, relay)."""

from __future__ import annotations

import json
import sys

from mcp_types import JSONRPCRequest
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from guard import Guard
from guard.gateway.relay import _request_meta, _under_decision_span
from guard.gateway.wire import Wire
from guard.tracing import trace_context_from


def main() -> None:
    url, api_key, issuer, endpoint = sys.argv[1:5]
    allowed, blocked, *relay = sys.argv[5:] or ["github_list_issues", "send_email", "relay"]
    plan = json.loads(sys.stdin.read())
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint + "/v1/traces")))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("agent")
    guard = Guard(url, api_key, issuer=issuer, report_interval=0.05)
    with tracer.start_as_current_span("agent run"):
        guard.declare(plan)
        guard.check(allowed, {"repo": "acme/public-app"})
        guard.check(blocked, {"to": "x@y.z"})
    if not relay:
        guard.close()
        provider.force_flush()
        return
    # A client's tools/call carrying its trace context in _meta, through the relay's steps.
    with tracer.start_as_current_span("mcp client"):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
    request = JSONRPCRequest(
        jsonrpc="2.0",
        id=1,
        method="tools/call",
        params={
            "name": "github_get_issue",
            "arguments": {"repo": "acme/public-app"},
            "_meta": {"traceparent": carrier["traceparent"], "other": 1},
        },
    )
    wire = Wire(request)
    meta = _request_meta(wire)
    with trace_context_from(meta):
        decision = guard.check("github_get_issue", {"repo": "acme/public-app"})
    assert decision.allowed, decision
    forwarded = _under_decision_span(wire, meta)
    sent = json.loads(forwarded.encoded())
    assert sent["params"]["_meta"]["other"] == 1
    # The wrapped server's own span, from the traceparent it received.
    upstream = trace.get_tracer("upstream")
    context = propagate.extract({"traceparent": sent["params"]["_meta"]["traceparent"]})
    with upstream.start_as_current_span("tool github_get_issue", context=context):
        pass
    guard.close()
    provider.force_flush()
    print("done")


if __name__ == "__main__":
    main()
