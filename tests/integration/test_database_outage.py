"""A real gunicorn on a real PostgreSQL whose connection the test cuts.

A small TCP proxy on 127.0.0.1 sits between the web server and PostgreSQL; closing it is a
database that cannot be reached (connections refused, every open connection dropped),
reopening it is the database coming back; stalling it is a database host that does not
answer at all. Three stories:

- an outage under load: every request answers 2xx or 503 ``database_unavailable`` with
  Retry-After, never 500; /healthz stays up, /readyz fails; every acknowledged plan is stored;
- a restart while the workers are idle: each worker's persistent connection is dead, and the
  next request of each must still succeed (Django's connection health checks);
- a host that never answers: a request answers 503 after the connect timeout rather than
  hanging until gunicorn kills its worker.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from kernel.problems import Code
from plans.keys import signing_keys_bootstrap
from plans.models import Plan, PlanToken
from tests.conftest import PLAN

from .processes import (
    BIN,
    IS_POSTGRES,
    NEEDS_POSTGRES,
    free_port,
    process_env,
    start,
    stop,
    subprocess_database_url,
    tail,
)

RETRY_AFTER = "5"  # PLANGATE_DATABASE_RETRY_AFTER's default
SERVER_START_SECONDS = 60.0
CUT_SECONDS = 3.0
RECOVERY_SECONDS = 30.0  # generous: the first success normally follows the reopening at once


class TcpProxy:
    """Forwards 127.0.0.1:<port> to PostgreSQL, with threads; `close()` cuts it, `open()`
    brings it back on the same port, `stall()` drops every connection and then accepts new
    ones without ever answering."""

    @dataclass(eq=False)
    class _Pair:
        sockets: tuple[socket.socket, socket.socket]
        pumps_done: int = 0

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0
        self.accepted = 0
        self._lock = threading.Lock()
        self._pairs: set[TcpProxy._Pair] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._stalled: list[socket.socket] | None = None  # held, never answered

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def open(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.settimeout(0.1)  # the accept loop notices close() within this time
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accepting.start()

    def close(self) -> None:
        """Refuse new connections and drop every open one, as a database going away does."""
        listener, self._listener = self._listener, None
        if self._accepting is not None:
            self._accepting.join(timeout=5)
        if listener is not None:
            listener.close()
        self._drop_all()
        for sock in self._stalled or []:
            sock.close()
        self._stalled = None

    def stall(self) -> None:
        self._stalled = []
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._shut(pair)

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._stalled is not None:
                self._stalled.append(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            server.settimeout(None)
            pair = TcpProxy._Pair((client, server))
            with self._lock:
                self._pairs.add(pair)
                self.accepted += 1
            for source, target in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(pair, source, target), daemon=True
                ).start()

    def _pump(self, pair: _Pair, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        self._shut(pair)  # wakes the other direction's pump
        with self._lock:
            pair.pumps_done += 1
            last = pair.pumps_done == 2
            if last:
                self._pairs.discard(pair)
        if last:  # only once both pumps are done with the sockets
            for sock in pair.sockets:
                sock.close()

    @staticmethod
    def _shut(pair: _Pair) -> None:
        for sock in pair.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _url_through(proxy: TcpProxy) -> str:
    """The test database's URL, with the proxy's address instead of PostgreSQL's."""
    parts = urlsplit(subprocess_database_url())
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@127.0.0.1:{proxy.port}" if credentials else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@contextlib.contextmanager
def _proxied_server(tmp_path: Path, *, workers: int, **env_overrides: str):
    """(proxy, base URL, log): gunicorn with `workers` sync workers on the proxied database."""
    params = connection.settings_dict
    proxy = TcpProxy((params["HOST"] or "127.0.0.1", int(params["PORT"] or 5432)))
    proxy.open()
    port = free_port()
    env = process_env(
        DATABASE_URL=_url_through(proxy),
        PLANGATE_RATE_LIMIT="1000000/min",
        PLANGATE_AUTH_FAILURE_LIMIT="1000000/min",
        **env_overrides,
    )
    log = tmp_path / "gunicorn.log"
    server = start(
        [
            str(BIN / "gunicorn"),
            "controlplane.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "60",
            "--graceful-timeout",
            "5",
            "--no-control-socket",
        ],
        env=env,
        log=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            assert server.poll() is None, f"gunicorn exited:\n{tail(log)}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"gunicorn did not get ready:\n{tail(log)}"
            time.sleep(0.2)
        yield proxy, base, log
    finally:
        stop(server)
        proxy.close()


@dataclass
class Result:
    path: str
    started: float
    ended: float
    status: int  # 0: no HTTP answer at all
    content_type: str = ""
    code: str | None = None
    retry_after: str | None = None
    plan_id: str | None = None


@dataclass
class Recorder:
    results: list[Result] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, client: httpx.Client, method: str, path: str, **kwargs) -> Result:
        started = time.monotonic()
        try:
            response = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            result = Result(path, started, time.monotonic(), 0, code=repr(exc))
        else:
            content_type = response.headers.get("Content-Type", "")
            body = response.json() if "json" in content_type else {}
            result = Result(
                path,
                started,
                time.monotonic(),
                response.status_code,
                content_type,
                body.get("code") if isinstance(body, dict) else None,
                response.headers.get("Retry-After"),
                body.get("id") if response.status_code == 201 else None,
            )
        with self.lock:
            self.results.append(result)
        return result


def _counts(results: list[Result]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    return dict(sorted(counts.items()))


def _admin_session_cookie() -> dict[str, str]:
    user = get_user_model().objects.create_superuser("root", "root@example.test", "x" * 20)
    browser = Client()
    browser.force_login(user)
    return {settings.SESSION_COOKIE_NAME: browser.cookies[settings.SESSION_COOKIE_NAME].value}


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.django_db(transaction=True)
def test_a_database_outage_under_load_answers_503_never_500(tmp_path, agent):
    signing_keys_bootstrap()
    cookies = _admin_session_cookie()
    recorder = Recorder()
    stopping = threading.Event()
    auth = {"Authorization": f"Bearer {agent.api_key}"}

    def declare_plans() -> None:
        with httpx.Client(base_url=base, timeout=30, headers=auth) as client:
            while not stopping.is_set():
                recorder.call(client, "POST", "/v1/plans", json={"plan": PLAN})

    def probe(paths: list[str]) -> None:
        with httpx.Client(base_url=base, timeout=30, cookies=cookies) as client:
            while not stopping.is_set():
                for path in paths:
                    recorder.call(client, "GET", path)
                time.sleep(0.05)

    with _proxied_server(tmp_path, workers=4) as (proxy, base, log):
        threads = [threading.Thread(target=declare_plans) for _ in range(8)]
        threads += [
            threading.Thread(target=probe, args=(["/healthz"],)),
            threading.Thread(target=probe, args=(["/readyz"],)),
            threading.Thread(target=probe, args=(["/v1/keys/jwks", "/admin/"],)),
        ]
        for thread in threads:
            thread.start()
        try:

            def declared() -> int:
                return sum(1 for result in recorder.results if result.status == 201)

            deadline = time.monotonic() + 30
            while declared() < 20 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert declared() >= 20, f"no load before the cut:\n{tail(log)}"

            proxy.close()
            # The cut starts when close() has dropped every connection: until its accept
            # loop stops (up to 0.1 s) open connections still reach the database.
            cut_at = time.monotonic()
            time.sleep(CUT_SECONDS)
            proxy.open()
            reopened_at = time.monotonic()

            def recovered() -> Result | None:
                successes = [
                    r
                    for r in list(recorder.results)
                    if r.path == "/v1/plans" and r.status == 201 and r.started >= reopened_at
                ]
                return min(successes, key=lambda r: r.ended) if successes else None

            deadline = reopened_at + RECOVERY_SECONDS
            while recovered() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # some traffic after recovery too
        finally:
            stopping.set()
            for thread in threads:
                thread.join(timeout=60)

    results = list(recorder.results)
    during = [r for r in results if r.started >= cut_at and r.ended <= reopened_at]
    by_path = {
        path: [r for r in during if r.path == path]
        for path in ("/v1/plans", "/healthz", "/readyz", "/v1/keys/jwks", "/admin/")
    }
    first_success = recovered()
    print(
        f"\nduring the {CUT_SECONDS:.0f} s cut: "
        + ", ".join(f"{path} {_counts(rs)}" for path, rs in by_path.items())
        + f"\nwhole run: {len(results)} requests {_counts(results)}"
        + "\nfirst POST /v1/plans success after reopening: "
        + (f"{first_success.ended - reopened_at:.3f} s" if first_success else "none")
    )

    unexpected = [r for r in results if not (200 <= r.status < 300 or r.status == 503)]
    assert not unexpected, f"{unexpected[:5]}\n{tail(log)}"
    assert by_path["/v1/plans"], "no plan was declared during the cut"
    for result in by_path["/v1/plans"] + by_path["/readyz"] + by_path["/v1/keys/jwks"]:
        assert result.status == 503 or result.path == "/v1/keys/jwks", result
        if result.status == 503:
            assert result.content_type == "application/problem+json", result
            assert result.code == Code.DATABASE_UNAVAILABLE, result
            assert result.retry_after == RETRY_AFTER, result
    assert by_path["/readyz"] and by_path["/admin/"]
    for result in by_path["/admin/"]:
        assert result.status == 503, result
        assert result.content_type.startswith("text/html"), result
        assert result.retry_after == RETRY_AFTER, result
    healthz = [r for r in results if r.path == "/healthz"]
    assert by_path["/healthz"] and all(r.status == 200 for r in healthz)
    assert first_success is not None, f"no plan declared after reopening:\n{tail(log)}"

    acknowledged = {r.plan_id for r in results if r.status == 201}
    assert None not in acknowledged
    stored = set(Plan.objects.filter(id__in=acknowledged).values_list("id", flat=True))
    assert stored == acknowledged
    with_token = set(
        PlanToken.objects.filter(plan_id__in=acknowledged).values_list("plan_id", flat=True)
    )
    assert with_token == acknowledged


WORKERS = 3


@pytest.mark.parametrize("health_checks", [True, False], ids=["health-checks", "no-checks"])
@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.django_db(transaction=True)
def test_idle_workers_survive_a_database_restart(tmp_path, agent, health_checks):
    """Without health checks (the negative control) the first request after the restart
    reuses a dead connection and fails; with them (the default) every request succeeds."""
    signing_keys_bootstrap()
    recorder = Recorder()
    auth = {"Authorization": f"Bearer {agent.api_key}"}
    overrides = {"DATABASE_CONN_MAX_AGE": "600"}
    if not health_checks:
        overrides["DATABASE_CONN_HEALTH_CHECKS"] = "false"

    with _proxied_server(tmp_path, workers=WORKERS, **overrides) as (proxy, base, log):

        def declare() -> Result:
            with httpx.Client(base_url=base, timeout=30, headers=auth) as client:
                return recorder.call(client, "POST", "/v1/plans", json={"plan": PLAN})

        # Concurrent bursts until every worker holds a persistent connection of its own.
        for _ in range(40):
            burst = [threading.Thread(target=declare) for _ in range(2 * WORKERS)]
            for thread in burst:
                thread.start()
            for thread in burst:
                thread.join(timeout=60)
            if proxy.open_connections >= WORKERS:
                break
        assert proxy.open_connections == WORKERS, f"{proxy.open_connections}\n{tail(log)}"
        assert all(r.status == 201 for r in recorder.results), recorder.results[:3]

        accepted_before = proxy.accepted
        proxy.close()  # every connection dropped while the workers are idle
        proxy.open()
        time.sleep(0.5)
        after = [declare() for _ in range(3 * WORKERS)]  # one after another
        reconnected = proxy.accepted - accepted_before

    print(
        f"\nhealth checks {'on' if health_checks else 'off'}: after the restart "
        f"{[r.status for r in after]}, {reconnected} new database connections"
    )
    assert all(r.status in (201, 503) for r in after), after
    if health_checks:
        assert all(r.status == 201 for r in after), f"{after}\n{tail(log)}"
    else:
        assert after[0].status == 503, after
        assert after[0].code == Code.DATABASE_UNAVAILABLE
        # A worker whose request failed drops the dead connection: one failure each at most.
        assert sum(1 for r in after if r.status == 503) <= WORKERS, after
    acknowledged = {r.plan_id for r in recorder.results if r.status == 201}
    assert Plan.objects.filter(id__in=acknowledged).count() == len(acknowledged)


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.django_db(transaction=True)
def test_a_database_that_never_answers_is_a_503_after_the_connect_timeout(tmp_path, agent):
    signing_keys_bootstrap()
    recorder = Recorder()
    auth = {"Authorization": f"Bearer {agent.api_key}"}

    with _proxied_server(tmp_path, workers=2, DATABASE_CONNECT_TIMEOUT="2") as (proxy, base, log):
        proxy.stall()
        with httpx.Client(base_url=base, timeout=30, headers=auth) as client:
            declared = recorder.call(client, "POST", "/v1/plans", json={"plan": PLAN})
            ready = recorder.call(client, "GET", "/readyz")
        proxy.close()
        proxy.open()
        with httpx.Client(base_url=base, timeout=30, headers=auth) as client:
            after = recorder.call(client, "POST", "/v1/plans", json={"plan": PLAN})

    print(
        f"\nstalled database: POST /v1/plans {declared.status} after "
        f"{declared.ended - declared.started:.1f} s, /readyz {ready.status} after "
        f"{ready.ended - ready.started:.1f} s"
    )
    for result in (declared, ready):
        assert result.status == 503, f"{result}\n{tail(log)}"
        assert result.code == Code.DATABASE_UNAVAILABLE
        assert result.retry_after == RETRY_AFTER
    assert after.status == 201, f"{after}\n{tail(log)}"
