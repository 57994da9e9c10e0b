"""What the request middleware (kernel.observability) costs a request, in microseconds.

In a process of its own, no server: the middleware wraps a view that answers at once, and
each figure is the CPU time per request minus that of the bare view, measured in the same
run (CPU time, not wall time: on a shared machine, waiting for a core is not the cost).
Cases: metrics and the request line both off; metrics on for an endpoint that is not counted
(/healthz); metrics on for a declaration (a counter and a histogram); the request line on,
as JSON, to a stream that discards it.

Run alone: ``python bench/bench_observability.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchlib import heading, print_table  # noqa: E402


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--observability-iterations",
        type=int,
        default=20_000,
        help="requests per timed repeat (default 20000)",
    )


def per_call_microseconds(function: Callable[[], object], iterations: int, repeats: int) -> float:
    for _ in range(min(iterations, 1000)):
        function()
    samples = []
    for _ in range(repeats):
        start = time.process_time_ns()
        for _ in range(iterations):
            function()
        samples.append((time.process_time_ns() - start) / iterations / 1000)
    return statistics.median(samples)


def main(args: argparse.Namespace) -> int:
    """Measures in a child process, so this one never loads Django's settings."""
    from cryptography.fernet import Fernet

    iterations = max(1, getattr(args, "observability_iterations", 20_000))
    repeats = max(1, getattr(args, "guard_repeats", 7))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PLANGATE_ENV_FILE": os.devnull,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "LOG_LEVEL": "WARNING",
        "METRICS_ENABLED": "false",  # each case turns it on itself
        "PYTHONPATH": str(ROOT),
    }
    sys.stdout.flush()
    child = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(iterations), str(repeats)],
        cwd=ROOT,
        env=env,
        check=False,
    )
    return child.returncode


def _child(iterations: int, repeats: int) -> None:
    import django

    django.setup()
    from django.http import HttpRequest, HttpResponse, JsonResponse
    from django.test import RequestFactory, override_settings
    from django.urls import resolve

    from kernel.log_format import JsonFormatter
    from kernel.observability import RequestObservabilityMiddleware, request_logger

    factory = RequestFactory()

    def request_for(path: str, method: str = "get") -> HttpRequest:
        request = getattr(factory, method)(path)
        request.resolver_match = resolve(path)  # as the URL resolver leaves it
        return request

    healthz = request_for("/healthz")
    declaration = request_for("/v1/plans", "post")
    answer = JsonResponse({"status": "ok"})

    def view(request: HttpRequest) -> HttpResponse:
        return answer

    middleware = RequestObservabilityMiddleware(view)
    heading("request middleware: cost per request")
    level = request_logger.level
    handlers = list(request_logger.handlers)
    rows = []
    try:
        request_logger.setLevel(logging.WARNING)
        bare = per_call_microseconds(lambda: view(healthz), iterations, repeats)
        cases = [
            ("metrics off, line off (/healthz)", False, healthz),
            ("metrics on, line off (/healthz, not counted)", True, healthz),
            ("metrics on, line off (POST /v1/plans, counted)", True, declaration),
        ]
        for name, enabled, request in cases:
            with override_settings(METRICS_ENABLED=enabled, METRICS_TOKEN="x" * 16):
                cost = per_call_microseconds(lambda r=request: middleware(r), iterations, repeats)
            rows.append([name, f"{cost - bare:.2f}"])
        with open(os.devnull, "w") as discard:
            sink = logging.StreamHandler(discard)
            sink.setFormatter(JsonFormatter())
            request_logger.handlers = [sink]
            request_logger.setLevel(logging.INFO)
            with override_settings(METRICS_ENABLED=True, METRICS_TOKEN="x" * 16):
                cost = per_call_microseconds(lambda: middleware(declaration), iterations, repeats)
        rows.append(["metrics on, JSON line on (POST /v1/plans)", f"{cost - bare:.2f}"])
    finally:
        request_logger.handlers = handlers
        request_logger.setLevel(level)
    print(
        f"median of {repeats} repeats of {iterations} requests, CPU time; bare view {bare:.2f} us"
    )
    print_table(["case", "middleware us / request"], rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser.add_argument_group("observability"))
    parser.add_argument("--guard-repeats", type=int, default=7)
    sys.exit(main(parser.parse_args()))
