"""OpenTelemetry traces of the control plane (docs/decisions/0077), off unless configured.

Configuration is the standard ``OTEL_*`` environment and nothing else: tracing is on when
``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``, or both, comma-separated;
``none`` or unset: off). The SDK reads the rest itself: ``OTEL_SERVICE_NAME`` (default here
``plangate``), ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, the OTLP exporter's
``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`` and ``_HEADERS``, the batch processor's
``OTEL_BSP_*``. ``tracing_configure`` (called once per process by the kernel app's
``ready``) installs the SDK's tracer provider and the Django instrumentation, which makes
each request a server span continuing the caller's W3C ``traceparent``.

The doors add one span of their own inside the request's (`TracedView`, `traced_view`,
`span`): ``plangate.plan.issue``, ``.refresh``, ``.token``, ``plangate.events.record``,
``plangate.status_feed``, ``plangate.status_list``, ``plangate.approval.decide``, with
``plangate.plan.id``, ``plangate.agent.id``, ``plangate.policy.version`` and
``plangate.code`` (``ok``, or the refusal's problem code). Off, each door pays one read of a
module flag.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse

from guard.tracing import exporters_named, provider_from_environment

logger = logging.getLogger(__name__)

#: whether ``tracing_configure`` installed an SDK provider in this process
_enabled = False
_tracer: Any = None


def tracing_exporters(environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names, ``[]`` when tracing is off."""
    return exporters_named(environ if environ is not None else os.environ)


def tracing_enabled() -> bool:
    return _enabled


def tracing_configure(environ: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's tracer provider (guard.tracing.provider_from_environment, the one
    reading of the OTEL_* environment) and the Django instrumentation when the environment
    asks for traces; True when it did. Once per process: a second call does nothing."""
    global _enabled, _tracer
    if _enabled:
        return True
    environ = environ if environ is not None else os.environ
    try:
        provider = provider_from_environment(environ, service_name="plangate")
    except ValueError as error:
        logger.warning("no traces: %s", error)
        return False
    if provider is None:
        return False
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    DjangoInstrumentor().instrument(tracer_provider=provider)
    _tracer = trace.get_tracer("plangate")
    _enabled = True
    return True


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span of the current trace, or nothing when tracing is off (yields None)."""
    if not _enabled:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield current


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in attributes.items()
        if isinstance(value, str | bool | int | float) and value != ""
    }


def _body(response: HttpResponse) -> Mapping[str, Any]:
    data = getattr(response, "data", None)
    if isinstance(data, Mapping):
        return data
    if response.status_code >= 400 and not response.streaming:
        try:
            parsed = json.loads(response.content)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def response_attributes(
    request: HttpRequest, response: HttpResponse, kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """What a door's span says of the request it answered: the plan, the agent, the policy
    version and the code (``ok`` or the problem's ``code``)."""
    body = _body(response)
    attributes: dict[str, Any] = {"http.response.status_code": response.status_code}
    code = body.get("code") if response.status_code >= 400 else "ok"
    attributes["plangate.code"] = code if isinstance(code, str) else "error"
    plan_id = kwargs.get("plan_id") or body.get("id")
    if isinstance(plan_id, str):
        attributes["plangate.plan.id"] = plan_id
    policy = body.get("policy")
    if isinstance(policy, Mapping):
        attributes["plangate.policy.id"] = policy.get("id")
        attributes["plangate.policy.version"] = policy.get("version")
    user = request.__dict__.get("user")
    meta = getattr(user, "_meta", None)
    if meta is not None and meta.label_lower == "members.agent":
        attributes["plangate.agent.id"] = str(user.pk)  # type: ignore[union-attr]
        attributes["plangate.team.id"] = user.team_id  # type: ignore[union-attr]
    if isinstance(body.get("events"), int):
        attributes["plangate.events.count"] = body["events"]
    return _clean(attributes)


class TracedView:
    """A DRF view whose requests get a span of their own (``span_name``) inside the request's,
    carrying `response_attributes`. Put it first among the view's bases."""

    span_name: ClassVar[str | None] = None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not _enabled or self.span_name is None:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        with _tracer.start_as_current_span(self.span_name) as current:
            response: HttpResponse = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
            current.set_attributes(response_attributes(request, response, kwargs))
            return response


def traced_view(name: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """`TracedView` for a function view."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not _enabled:
                return view(request, *args, **kwargs)
            with _tracer.start_as_current_span(name) as current:
                response = view(request, *args, **kwargs)
                current.set_attributes(response_attributes(request, response, kwargs))
                return response

        return wrapped

    return decorate
