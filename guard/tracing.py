"""The guard's OpenTelemetry spans (docs/decisions/0080): one per decision, following the
GenAI semantic conventions, and the W3C trace context on its requests to the control plane.

Only the OpenTelemetry *API* is used (the ``otel`` extra): the application that embeds the
guard installs an SDK and its exporters, or not. Each decision is then an ``execute_tool
{tool}`` span (kind INTERNAL) in the caller's current context, with
``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name``, and ``plangate.decision``,
``plangate.plan.id``, ``plangate.step``, ``plangate.rule``, ``plangate.policy.version``; a
blocked call's span has status ERROR with its code.

Without the API installed, or while the global tracer provider is still the API's default
(no SDK), a decision pays one read of a module attribute: `decision_tracer` answers None,
and looks at the global provider again only every ``RECHECK_EVERY`` decisions, so that a
provider an application installs after creating its guard is still picked up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

try:  # the `otel` extra
    from opentelemetry import context as _context
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
    from opentelemetry.trace import ProxyTracerProvider as _Proxy
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # pragma: no cover - tested by the install tests without the extra
    _trace = None  # type: ignore[assignment]

__all__ = ["RECHECK_EVERY", "decision_tracer", "inject_trace_context", "record_decision"]

RECHECK_EVERY = 1024
_SCOPE = "plangate.guard"

_tracer: Any = None  # the tracer while a real provider is installed
_countdown = 0  # decisions left before the provider is looked at again
#: the span of the last decision made in this thread or task (a gateway passes its context
#: on to the tool it calls)
last_decision_span: ContextVar[Any] = ContextVar("plangate_last_decision_span", default=None)


def _refresh() -> Any:
    global _tracer, _countdown
    _countdown = RECHECK_EVERY
    if _trace is None:
        _tracer = None
        return None
    provider = _trace.get_tracer_provider()
    real = not isinstance(provider, _Proxy) and type(provider).__name__ != "NoOpTracerProvider"
    _tracer = provider.get_tracer(_SCOPE) if real else None
    return _tracer


def decision_tracer() -> Any:
    """The tracer to record decisions with, or None (no API, or no SDK installed)."""
    global _countdown
    if _tracer is not None:
        return _tracer
    _countdown -= 1
    if _countdown > 0:
        return None
    return _refresh()


def record_decision(
    tracer: Any,
    *,
    start_ns: int,
    tool: object,
    decision: Any,
    plan_id: str | None,
    policy_version: int | None,
) -> Any:
    """One ``execute_tool`` span for a decision made from ``start_ns`` to now; the span
    (ended), whose context a gateway passes on to the tool it calls."""
    name = tool if isinstance(tool, str) else repr(tool)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "plangate.decision": decision.code.value,
    }
    if plan_id:
        attributes["plangate.plan.id"] = plan_id
    if decision.step is not None:
        attributes["plangate.step"] = decision.step
    if decision.rule is not None:
        attributes["plangate.rule"] = decision.rule
    if decision.rule_description:
        attributes["plangate.rule.description"] = decision.rule_description
    if policy_version is not None:
        attributes["plangate.policy.version"] = policy_version
    span = tracer.start_span(
        f"execute_tool {name}",
        kind=_trace.SpanKind.INTERNAL,
        attributes=attributes,
        start_time=start_ns,
    )
    if not decision.allowed:
        span.set_status(Status(StatusCode.ERROR, decision.code.value))
    span.end()
    last_decision_span.set(span)
    return span


def traceparent_of(span: Any) -> str:
    """The W3C ``traceparent`` naming ``span``."""
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def now_ns() -> int:
    return time.time_ns()


def inject_trace_context(headers: MutableMapping[str, str]) -> None:
    """Add the current context's ``traceparent`` (and ``tracestate``) to ``headers`` when
    decisions are traced."""
    if decision_tracer() is not None:
        _propagate.inject(headers)


@contextmanager
def trace_context_from(carrier: Mapping[str, Any] | None) -> Iterator[None]:
    """Make the W3C trace context in ``carrier`` (an MCP request's ``_meta``: ``traceparent``,
    ``tracestate``) the current one while the block runs; nothing when there is none or
    decisions are not traced."""
    if _trace is None or not carrier or "traceparent" not in carrier or decision_tracer() is None:
        yield
        return
    values = {key: carrier[key] for key in ("traceparent", "tracestate") if key in carrier}
    token = _context.attach(_propagate.extract({k: str(v) for k, v in values.items()}))
    try:
        yield
    finally:
        _context.detach(token)


def traceparent_of_current() -> dict[str, str]:
    """The current context as W3C headers (``traceparent``, ``tracestate``), {} when off."""
    carrier: dict[str, str] = {}
    if decision_tracer() is not None:
        _propagate.inject(carrier)
    return carrier


# --- a process of its own: the OTEL_* environment -----------------------------------------

#: the exporters a process configured from the environment can use
EXPORTERS = ("otlp", "console")


def exporters_named(environ: Mapping[str, str]) -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names, ``[]`` when tracing is off."""
    value = environ.get("OTEL_TRACES_EXPORTER", "")
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    return [] if names in ([], ["none"]) else names


def provider_from_environment(environ: Mapping[str, str], *, service_name: str) -> Any:
    """An SDK tracer provider as the standard ``OTEL_*`` variables describe it, installed as
    the global one; None when ``OTEL_TRACES_EXPORTER`` names no exporter. The SDK reads the
    rest itself (``OTEL_SERVICE_NAME``, else `service_name`; ``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_*``, ``OTEL_BSP_*``). Needs
    ``opentelemetry-sdk`` (and ``opentelemetry-exporter-otlp-proto-http`` for ``otlp``):
    ImportError otherwise. The control plane and ``plangate-mcp`` both start here."""
    names = exporters_named(environ)
    if not names:
        return None
    unknown = sorted(set(names) - set(EXPORTERS))
    if unknown:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: only {', '.join(EXPORTERS)}"
            " are available"
        )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    attributes = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    if "otlp" in names:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if "console" in names:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    _trace.set_tracer_provider(provider)
    _refresh()
    return provider
