"""An OTLP/HTTP receiver in the test's own process: what an OpenTelemetry Collector's
``otlp`` receiver does with ``/v1/traces`` and ``/v1/logs``, decoded with the protocol's own
protobuf definitions (opentelemetry-proto), so a test asserts on the spans and log records
an exporter really sent over HTTP.

    with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, ...}
        ...
        spans = receiver.wait_for_spans(lambda spans: len(spans) >= 3)

``fail_next(n, status)`` answers the next ``n`` exports with that status (503: the exporter
retries), for at-least-once tests. Both protobuf (``application/x-protobuf``) and OTLP JSON
(``application/json``) bodies are accepted, gzip-compressed or not.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as the Python value it carries."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16
    parent_span_id: str  # "" for a root span
    kind: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    status_code: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class ReceivedLog:
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str
    time_ns: int
    severity_text: str
    trace_id: str
    span_id: str


@dataclass
class OtlpReceiver:
    """A running receiver; ``endpoint`` is its base URL (``OTEL_EXPORTER_OTLP_ENDPOINT``)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    logs: list[ReceivedLog] = field(default_factory=list)
    #: one entry per export request received: (path, status answered)
    requests: list[tuple[str, int]] = field(default_factory=list)
    _failures: list[int] = field(default_factory=list)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                json_body = "json" in (self.headers.get("Content-Type") or "")
                status = receiver._take(self.path, body, json_body)
                reply = b""
                if status == 200:
                    answer = (
                        ExportTraceServiceResponse()
                        if self.path.endswith("/traces")
                        else ExportLogsServiceResponse()
                    )
                    reply = (
                        json_format.MessageToJson(answer).encode()
                        if json_body
                        else answer.SerializeToString()
                    )
                self.send_response(status)
                content_type = "application/json" if json_body else "application/x-protobuf"
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` export requests with ``status``, storing nothing."""
        with self._lock:
            self._failures.extend([status] * count)

    def _take(self, path: str, body: bytes, json_body: bool) -> int:
        with self._lock:
            if self._failures:
                status = self._failures.pop(0)
                self.requests.append((path, status))
                return status
            if path.endswith("/v1/traces"):
                traces = ExportTraceServiceRequest()
                _parse(traces, body, json_body)
                self.spans.extend(_spans(traces))
            elif path.endswith("/v1/logs"):
                logs = ExportLogsServiceRequest()
                _parse(logs, body, json_body)
                self.logs.extend(_logs(logs))
            else:
                self.requests.append((path, 404))
                return 404
            self.requests.append((path, 200))
            self._lock.notify_all()
            return 200

    def wait_for_spans(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 20.0
    ) -> list[ReceivedSpan]:
        """The spans received once ``done(spans)`` holds; AssertionError after ``timeout``."""
        return self._wait(lambda: self.spans, done, timeout, "spans")

    def wait_for_logs(
        self, done: Callable[[list[ReceivedLog]], bool], timeout: float = 20.0
    ) -> list[ReceivedLog]:
        return self._wait(lambda: self.logs, done, timeout, "log records")

    def _wait(
        self,
        items: Callable[[], list[Any]],
        done: Callable[[list[Any]], bool],
        timeout: float,
        what: str,
    ) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not done(list(items())):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"the receiver did not get the expected {what} in {timeout} s; "
                        f"it has {len(items())}: {[getattr(i, 'name', i) for i in items()]}"
                    )
                self._lock.wait(min(left, 0.2))
            return list(items())


def _parse(message: Any, body: bytes, json_body: bool) -> None:
    if json_body:
        json_format.Parse(body.decode(), message)
    else:
        message.ParseFromString(body)


def _hex(value: bytes) -> str:
    return value.hex()


def _spans(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    received = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=_hex(span.trace_id),
                        span_id=_hex(span.span_id),
                        parent_span_id=_hex(span.parent_span_id),
                        kind=span.kind,
                        attributes=attributes(span.attributes),
                        resource=resource,
                        scope=scope_spans.scope.name,
                        status_code=span.status.code,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                    )
                )
    return received


def _logs(request: ExportLogsServiceRequest) -> list[ReceivedLog]:
    received = []
    for resource_logs in request.resource_logs:
        resource = attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                received.append(
                    ReceivedLog(
                        body=any_value(record.body),
                        attributes=attributes(record.attributes),
                        resource=resource,
                        scope=scope_logs.scope.name,
                        time_ns=record.time_unix_nano,
                        severity_text=record.severity_text,
                        trace_id=_hex(record.trace_id),
                        span_id=_hex(record.span_id),
                    )
                )
    return received


__all__ = [
    "OtlpReceiver",
    "ReceivedLog",
    "ReceivedSpan",
    "any_value",
    "attributes",
]
