"""Fixtures for the agent-side guard: the real control plane behind httpx transports.

`make_guard` serves the Django app in-process through ``httpx.WSGITransport`` on the
test's own database connection (requests run on the calling thread, so these guards run
with no background threads). `live_guard` talks to a real HTTP server (pytest-django's
`live_server`) for what needs threads: background refresh and the decision log.

`make_any_guard` and `live_any_guard` build the same guards for each `guard_kind`: a
`Guard`, or an `AsyncGuard` behind a facade with `Guard`'s API (see guard_kinds). A test
that covers the guard's public behaviour takes them instead, and runs for both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from guard.agent import Guard

from .client_helpers import FakeClock, Switchboard
from .guard_kinds import GUARD_KINDS, GuardKind, build_guard

WSGI_URL = "http://testserver"


@pytest.fixture
def wsgi_transport(db) -> Iterator[httpx.WSGITransport]:
    # As Django's test client does: a request must not close the test's connection, which
    # holds the test transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield httpx.WSGITransport(app=WSGIHandler())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def switchboard(wsgi_transport) -> Switchboard:
    return Switchboard(wsgi_transport)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_guard(agent, switchboard, clock) -> Iterator[Callable[..., Guard]]:
    """Guards for the `agent` persona over the in-process transport, on the fake clock,
    with no background thread (refresh only when asked or on expiry; no decision log)."""
    guards: list[Guard] = []

    def make(**options) -> Guard:
        options = {
            "issuer": settings.PLANGATE_ISSUER,
            "transport": switchboard,
            "clock": clock,
            "auto_refresh": False,
            "report": False,
            **options,
        }
        api_key = options.pop("api_key", agent.api_key)
        guard = Guard(WSGI_URL, api_key, **options)
        guards.append(guard)
        return guard

    yield make
    for guard in guards:
        guard.close()


@pytest.fixture
def live_guard(live_server, agent) -> Iterator[Callable[..., Guard]]:
    """Guards for the `agent` persona against a real HTTP server, threads and all."""
    guards: list[Guard] = []

    def make(**options) -> Guard:
        options = {"issuer": settings.PLANGATE_ISSUER, "report_interval": 0.05, **options}
        api_key = options.pop("api_key", agent.api_key)
        guard = Guard(live_server.url, api_key, **options)
        guards.append(guard)
        return guard

    yield make
    for guard in guards:
        guard.close()


@pytest.fixture(params=GUARD_KINDS)
def guard_kind(request) -> GuardKind:
    return request.param


@pytest.fixture
def make_any_guard(agent, switchboard, clock, guard_kind) -> Iterator[Callable[..., Any]]:
    """`make_guard`, for the `guard_kind` of the test."""
    guards: list[Any] = []

    def make(**options) -> Any:
        options = {
            "issuer": settings.PLANGATE_ISSUER,
            "transport": switchboard,
            "clock": clock,
            "auto_refresh": False,
            "report": False,
            **options,
        }
        api_key = options.pop("api_key", agent.api_key)
        guard = build_guard(guard_kind, WSGI_URL, api_key, share_test_connection=True, **options)
        guards.append(guard)
        return guard

    yield make
    for guard in guards:
        guard.close()


@pytest.fixture
def live_any_guard(live_server, agent, guard_kind) -> Iterator[Callable[..., Any]]:
    """`live_guard`, for the `guard_kind` of the test."""
    guards: list[Any] = []

    def make(**options) -> Any:
        options = {"issuer": settings.PLANGATE_ISSUER, "report_interval": 0.05, **options}
        api_key = options.pop("api_key", agent.api_key)
        guard = build_guard(guard_kind, live_server.url, api_key, **options)
        guards.append(guard)
        return guard

    yield make
    for guard in guards:
        guard.close()
