"""The token status list against the per-plan status feed (draft-ietf-oauth-status-list;
docs/decisions/0068): how soon a revocation blocks, what the server spends per running
guard, and how large the list is.

Against Plangate under gunicorn (bench/run.py's server, its own instance), the team's
revocation bound set to ``--status-list-bound`` (default 15 s, the teams' default):

1. **Server CPU per guard per minute.** Simulated guards (asyncio, one coroutine each, over
   a pool of raw HTTP/1.1 connections) watch for ``--status-list-seconds``: today's feed
   (``GET /v1/plans/{id}/status`` with the plan's ETag, every ttl x [0.8, 1], one plan per
   guard; the baseline), then the list as the guard reads it (every half ttl x [0.8, 1],
   ``If-None-Match``, the key set every 0.9 ttl), served by the server directly and
   through nginx (from Debian, installed by the bench when absent, ``proxy_cache`` keeping
   what ``Cache-Control`` allows, started on a free port and stopped after). The gunicorn
   processes' CPU (/proc) over the window, per guard and per minute, as a multiple of the
   feed's.
2. **Revocation to the first blocked call**, p50/p99 over ``--status-list-guards`` (10,000)
   guards of one team, directly and through nginx: each guard watches one of the bench's
   plans, the plans are revoked in one transaction, and a guard counts as blocked once its
   list shows the bit and its one ask of the feed for the code has answered (the guard then
   blocks; its next call reads that). Each guard verifies a changed list with the real
   reader (guard.agent.status_list.verify_status_list; identical bytes are verified once per
   run, as each process would verify them once) and reads its index with it.
3. **The list's size** in bytes (the signed JWS as served) for 10,000 and 1,000,000 live
   plans with a few revoked, packed and compressed as the draft says, next to the same
   list with none revoked.

Prints; never fails on a figure. Guards are simulated in this process, which shares the
machine's cores with the server: the client's own limits show as requests it could not send
on time (``late``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))  # the repository root, for the guard

from guard.agent.status_list import (  # noqa: E402
    KEYS_SHARE,
    WATCH_SHARE,
    StatusList,
    verify_status_list,
)
from guard.agent.status_watch import CODE_ASK_SHARE, MIN_CODE_ASK  # noqa: E402
from guard.errors import TokenInvalid  # noqa: E402
from guard.jwk import KeySet  # noqa: E402

MAX_GUARDS = 20_000
MAX_FEED_GUARDS = 5_000
CONNECTIONS = 64  # the simulated guards' requests share this many connections per target
FEED_SHARE = 1.0  # the feed is polled every ttl (its pollInterval), jittered down to 0.8
JITTER = 0.8
SET_BOUND = """
from teams.models import Team
Team.objects.update(revocation_bound_seconds={bound})
"""


def shell(env: dict[str, str], code: str) -> str:
    """`manage.py shell -c code` against the bench's server (its env)."""
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=BENCH_DIR.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py shell failed: {result.stdout}{result.stderr}")
    return result.stdout


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--status-list-guards",
        type=int,
        default=10_000,
        help=f"simulated guards on one team (default 10,000, at most {MAX_GUARDS:,})",
    )
    group.add_argument(
        "--status-list-feed-guards",
        type=int,
        default=1_000,
        help="guards (one plan each) polling today's feed, the baseline (default 1,000)",
    )
    group.add_argument(
        "--status-list-bound",
        type=int,
        default=15,
        help="the team's revocation bound in seconds, 1-60 (default 15, the teams' default)",
    )
    group.add_argument(
        "--status-list-seconds",
        type=float,
        default=20.0,
        help="seconds each CPU scenario is measured (default 20)",
    )
    group.add_argument(
        "--status-list-proxy",
        choices=["nginx", "none"],
        default="nginx",
        help="the caching proxy measured in front of the server (default nginx)",
    )


# --- a small HTTP/1.1 client for many simulated guards ---------------------------------------


class Http:
    """GET over a pool of keep-alive connections to one host (reconnecting when the server
    closes, as gunicorn's sync workers do after each answer)."""

    def __init__(self, base_url: str, connections: int = CONNECTIONS) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._slots = asyncio.Semaphore(connections)
        self.requests = 0
        self.errors = 0
        self.first_error = ""
        self.cache_hits = 0  # answered from the proxy's cache (HIT, STALE, UPDATING)

    async def get(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        async with self._slots:
            for attempt in range(2):
                reused = bool(self._idle)
                connection = (
                    self._idle.pop()
                    if reused
                    else await asyncio.open_connection(self.host, self.port)
                )
                try:
                    status, answer, body, keep = await self._exchange(connection, path, headers)
                except asyncio.CancelledError:
                    connection[1].close()
                    raise
                except (ConnectionError, asyncio.IncompleteReadError, OSError) as error:
                    connection[1].close()
                    if reused and attempt == 0:
                        continue  # the server closed an idle connection: a new one
                    self.errors += 1
                    self.first_error = self.first_error or repr(error)
                    return 0, {}, b""
                self.requests += 1
                if answer.get("x-cache-status") in ("HIT", "STALE", "UPDATING"):
                    self.cache_hits += 1
                if keep:
                    self._idle.append(connection)
                else:
                    connection[1].close()
                return status, answer, body
        return 0, {}, b""

    async def _exchange(
        self,
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        path: str,
        headers: dict[str, str],
    ) -> tuple[int, dict[str, str], bytes, bool]:
        reader, writer = connection
        lines = [f"GET {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        answer: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                name, _, value = line.partition(":")
                answer[name.strip().lower()] = value.strip()
        keep = answer.get("connection", "").lower() != "close"
        if status in (204, 304) or 100 <= status < 200:
            return status, answer, b"", keep
        if "content-length" in answer:
            body = await reader.readexactly(int(answer["content-length"]))
        elif answer.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(chunk[:-2])
            body = b"".join(chunks)
        else:
            body, keep = await reader.read(), False
        return status, answer, body, keep

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


# --- simulated guards ------------------------------------------------------------------------


@dataclass
class Target:
    plan_id: str
    idx: int
    uri: str
    list_path: str
    feed_path: str  # with ?kid=
    feed_etag: str


@dataclass
class Run:
    """One scenario's shared state: the targets, the verified lists by their bytes, and
    what the guards saw."""

    targets: list[Target]
    keys: KeySet
    ttl: float  # the list's
    api_key: str
    feed_interval: float = 0.0  # the feed's pollInterval (half the bound)
    stopping: bool = False
    revoked: set[str] = field(default_factory=set)  # plan ids watched for their bit
    revoked_at: float = 0.0  # the revoking transaction's commit (epoch)
    blocked: list[float] = field(default_factory=list)  # when each guard blocked (epoch)
    codes: dict[str, int] = field(default_factory=dict)
    verified: dict[bytes, StatusList | None] = field(default_factory=dict)
    reads: int = 0
    late: int = 0  # reads started later than their schedule by more than a second

    def verify(self, body: bytes, uri: str) -> StatusList | None:
        digest = hashlib.sha256(body).digest()
        if digest not in self.verified:
            try:
                self.verified[digest] = verify_status_list(body.decode(), self.keys, uri=uri)
            except (TokenInvalid, UnicodeDecodeError):
                self.verified[digest] = None
        return self.verified[digest]


async def list_guard(http: Http, run: Run, target: Target, feed: Http) -> None:
    """A guard's watch of its team's list, as guard.agent.status_list schedules it for a
    process holding one plan: a read every half ttl x [0.8, 1], each finding the copy due
    (0.35 ttl), so a conditional GET; the key set every 0.9 ttl."""
    loop = asyncio.get_running_loop()
    interval = run.ttl * WATCH_SHARE
    etag: str | None = None
    held: StatusList | None = None
    jwks_etag: str | None = None
    keys_next = 0.0
    await asyncio.sleep(random.uniform(0, interval))
    due = loop.time()
    while not run.stopping:
        started = loop.time()
        if started - due > 1.0:
            run.late += 1
        status, headers, body = await http.get(
            target.list_path, {"If-None-Match": etag} if etag else {}
        )
        if status == 200:
            held = run.verify(body, target.uri) or held
            etag = headers.get("etag")
        if started >= keys_next:
            keys_next = started + run.ttl * KEYS_SHARE
            status, headers, _ = await http.get(
                "/v1/keys/jwks", {"If-None-Match": jwks_etag} if jwks_etag else {}
            )
            if status == 200:
                jwks_etag = headers.get("etag")
        run.reads += 1
        if held is not None and held.status(target.idx) and target.plan_id in run.revoked:
            # The list says invalid: ask the feed once for the code (waiting as long as the
            # guard does), then block.
            code = "plan_revoked"
            with contextlib.suppress(asyncio.TimeoutError, ValueError, AttributeError):
                _, _, body = await asyncio.wait_for(
                    feed.get(target.feed_path, {"Authorization": f"Bearer {run.api_key}"}),
                    max(MIN_CODE_ASK, CODE_ASK_SHARE * run.ttl),
                )
                code = json.loads(body).get("code") or code
            run.blocked.append(time.time())  # made relative to the commit's time after
            run.codes[code] = run.codes.get(code, 0) + 1
            return
        due = started + interval * random.uniform(JITTER, 1.0)
        await asyncio.sleep(max(0.0, due - loop.time()))


async def feed_guard(http: Http, run: Run, target: Target) -> None:
    """Today's watch: the plan's own feed every ttl x [0.8, 1] with its ETag."""
    loop = asyncio.get_running_loop()
    interval = run.feed_interval * FEED_SHARE
    etag = target.feed_etag
    await asyncio.sleep(random.uniform(0, interval))
    due = loop.time()
    headers = {"Authorization": f"Bearer {run.api_key}"}
    while not run.stopping:
        started = loop.time()
        if started - due > 1.0:
            run.late += 1
        status, answer, _ = await http.get(target.feed_path, {**headers, "If-None-Match": etag})
        if status in (200, 304):
            etag = answer.get("etag", etag)
        run.reads += 1
        due = started + interval * random.uniform(JITTER, 1.0)
        await asyncio.sleep(max(0.0, due - loop.time()))


# --- nginx -----------------------------------------------------------------------------------


NGINX_CONF = """
{user}
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {dir}/client_temp;
    proxy_temp_path {dir}/proxy_temp;
    fastcgi_temp_path {dir}/fastcgi_temp;
    uwsgi_temp_path {dir}/uwsgi_temp;
    scgi_temp_path {dir}/scgi_temp;
    proxy_cache_path {dir}/cache levels=1:2 keys_zone=plangate:10m max_size=100m
                     inactive=10m use_temp_path=off;
    server {{
        listen 127.0.0.1:{port};
        keepalive_requests 100000;
        location / {{
            proxy_pass {upstream};
            proxy_set_header Host $http_host;
            # What Cache-Control allows (the list: public, max-age=ttl), one request to
            # the server per expired entry, revalidated with its ETag.
            proxy_cache plangate;
            proxy_cache_lock on;
            proxy_cache_revalidate on;
            # While one request revalidates an expired copy, the others are served it.
            proxy_cache_use_stale updating;
            add_header X-Cache-Status $upstream_cache_status;
        }}
    }}
}}
"""


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if Path(path).exists()), None
    )


def ensure_nginx() -> str | None:
    """nginx from Debian: installed with apt-get when absent (as root); None if it cannot
    be had."""
    binary = nginx_binary()
    if binary is not None:
        return binary
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print("  nginx is not installed and cannot be installed here (needs root and apt-get)")
        return None
    print("  installing nginx from Debian (apt-get install -y nginx)...", flush=True)
    result = subprocess.run(
        ["apt-get", "install", "-y", "-q", "nginx"],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        print(f"  apt-get failed: {result.stderr[-500:]}")
        return None
    return nginx_binary()


@contextlib.contextmanager
def running_nginx(binary: str, upstream: str, workdir: Path) -> Iterator[str]:
    import run

    directory = workdir / "nginx"
    directory.mkdir()
    for name in ("client_temp", "proxy_temp", "fastcgi_temp", "uwsgi_temp", "scgi_temp", "cache"):
        (directory / name).mkdir()
    port = run.free_port()
    conf = directory / "nginx.conf"
    conf.write_text(
        NGINX_CONF.format(
            user="user root;" if os.geteuid() == 0 else "",
            dir=directory,
            port=port,
            upstream=upstream,
        )
    )
    process = subprocess.Popen(
        [binary, "-c", str(conf), "-p", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        import httpx

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited: {(directory / 'error.log').read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        yield url
    finally:
        run.stop(process)


# --- the scenarios ---------------------------------------------------------------------------


def kid_of(token: str) -> str:
    import base64

    header = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"]


def claims_of(token: str) -> dict:
    import base64

    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def declare_targets(server, count: int) -> list[Target]:
    """`count` plans of the bench team with their list index and feed ETag."""
    from concurrent.futures import ThreadPoolExecutor

    import bench_revocation
    import httpx

    headers = {"Authorization": f"Bearer {server.api_key}"}
    body = {"plan": bench_revocation.feed_plan()}
    issuer = server.env["PLANGATE_ISSUER"].rstrip("/")

    def declare(_: int) -> Target:
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            answer = client.post("/v1/plans", json=body)
            if answer.status_code != 201:
                raise RuntimeError(f"cannot declare: {answer.status_code} {answer.text[:300]}")
            token = answer.json()["token"]
            reference = (claims_of(token).get("status") or {}).get("status_list")
            if not reference:
                raise LookupError("the server signs no status claim: it serves no list yet")
            plan_id = answer.json()["id"]
            feed_path = f"/v1/plans/{plan_id}/status?kid={kid_of(token)}"
            status = client.get(feed_path)
            return Target(
                plan_id=plan_id,
                idx=reference["idx"],
                uri=reference["uri"],
                list_path=reference["uri"][len(issuer) :],
                feed_path=feed_path,
                feed_etag=status.headers.get("ETag", ""),
            )

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(declare, range(count)))


@dataclass
class CpuFigure:
    name: str
    guards: int
    seconds: float
    cpu: float | None
    requests: int
    reads: int
    late: int
    errors: int
    upstream: int  # requests that reached the server (not answered from the proxy's cache)

    @property
    def per_guard_minute_ms(self) -> float | None:
        if self.cpu is None or not self.guards or not self.seconds:
            return None
        return self.cpu / self.guards / (self.seconds / 60) * 1000


async def watch_for(
    name: str,
    server,
    base_url: str,
    run: Run,
    guards: int,
    seconds: float,
    *,
    feed: bool,
) -> CpuFigure:
    """`guards` simulated guards watch for `seconds` after a warm-up of one interval (so
    that their phases are spread); the server's CPU over the measured window."""
    http = Http(base_url)
    direct = Http(server.base_url, 16)
    run.stopping = False
    tasks = [
        asyncio.create_task(
            feed_guard(http, run, run.targets[i % len(run.targets)])
            if feed
            else list_guard(http, run, run.targets[i % len(run.targets)], direct)
        )
        for i in range(guards)
    ]
    await asyncio.sleep((run.feed_interval if feed else run.ttl * WATCH_SHARE) + 1)
    before_cpu, before_requests, before_reads = server.cpu_seconds(), http.requests, run.reads
    before_late, before_hits = run.late, http.cache_hits
    started = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - started
    after_cpu = server.cpu_seconds()
    figure = CpuFigure(
        name,
        guards,
        elapsed,
        None if before_cpu is None or after_cpu is None else after_cpu - before_cpu,
        http.requests - before_requests,
        run.reads - before_reads,
        run.late - before_late,
        http.errors,
        (http.requests - before_requests) - (http.cache_hits - before_hits),
    )
    run.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    http.close()
    direct.close()
    return figure


async def revocation_round(
    server, base_url: str, run: Run, guards: int, targets: list[Target]
) -> tuple[list[float], dict[str, int], int]:
    """`guards` guards watch `targets`; all of them are revoked at once; each guard's delay."""
    import bench_revocation

    http = Http(base_url)
    direct = Http(server.base_url, 16)
    run.stopping, run.blocked, run.codes = False, [], {}
    run.revoked = {target.plan_id for target in targets}
    tasks = [
        asyncio.create_task(list_guard(http, run, targets[i % len(targets)], direct))
        for i in range(guards)
    ]
    await asyncio.sleep(run.ttl * WATCH_SHARE + 2)  # every guard has read the list
    loop = asyncio.get_running_loop()
    run.revoked_at = await loop.run_in_executor(
        None, bench_revocation.revoke_all, server.env, sorted(run.revoked)
    )
    deadline = time.monotonic() + 3 * 2 * run.ttl
    while len(run.blocked) < guards and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    run.stopping = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    http.close()
    direct.close()
    revoked_at = run.revoked_at
    return sorted(max(0.0, at - revoked_at) for at in run.blocked), dict(run.codes), http.errors


# --- sizes -----------------------------------------------------------------------------------


def list_size(live: int, revoked: int) -> tuple[int, int]:
    """(compressed bytes of `lst`, bytes of the signed JWS) for `live` plans with `revoked`
    of them flipped at random, 1 bit each, zlib level 9, signed with a throwaway key."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from guard.jwk import b64url_encode

    data = bytearray((live + 7) // 8)
    for idx in random.Random(live + revoked).sample(range(live), revoked):
        data[idx // 8] |= 1 << (idx % 8)
    lst = zlib.compress(bytes(data), 9)
    now = int(time.time())
    token = jwt.encode(
        {
            "sub": "https://plangate.example/v1/status-lists/1",
            "iat": now,
            "exp": now + 86400,
            "ttl": 7,
            "status_list": {"bits": 1, "lst": b64url_encode(lst)},
        },
        Ed25519PrivateKey.generate(),
        algorithm="EdDSA",
        headers={"typ": "statuslist+jwt", "kid": "k" * 43},
    )
    return len(lst), len(token)


# --- main ------------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(BENCH_DIR))
    import run
    from benchlib import heading, percentile, print_table

    guards = max(1, min(args.status_list_guards, MAX_GUARDS))
    feed_guards = max(1, min(args.status_list_feed_guards, MAX_FEED_GUARDS))
    bound = max(1, min(args.status_list_bound, 60))
    seconds = max(1.0, min(args.status_list_seconds, 300.0))
    heading("Status list: revocation to the first blocked call, server CPU, the list's size")

    sizes = []
    for live, revoked in ((10_000, 0), (10_000, 10), (1_000_000, 0), (1_000_000, 1_000)):
        compressed, signed = list_size(live, revoked)
        sizes.append((live, revoked, compressed, signed))

    cpu: list[CpuFigure] = []
    rounds: list[tuple[str, list[float], dict[str, int], int]] = []
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="plangate-lists-")))
        server = stack.enter_context(run.running_server(args, tmp))
        shell(server.env, SET_BOUND.format(bound=bound))
        ttl = bound / 2
        try:
            targets = declare_targets(server, feed_guards)
        except LookupError as error:
            print(f"  cannot run: {error}")
            return 1
        import httpx

        jwks = httpx.get(server.base_url + "/v1/keys/jwks", timeout=10).json()
        probe = httpx.get(server.base_url + targets[0].list_path, timeout=10)
        if probe.status_code != 200:
            print(f"  cannot run: GET {targets[0].list_path} answered {probe.status_code}")
            return 1
        served_ttl = probe.headers.get("Cache-Control", "")
        print(
            f"database: {server.database}; gunicorn: {args.workers} sync worker(s); team bound"
            f" {bound} s (feed interval {bound / 2:g} s; the list answers"
            f" Cache-Control: {served_ttl}, {len(probe.content):,} bytes for"
            f" {len(targets):,} plans)"
        )
        proxy_url = None
        if args.status_list_proxy == "nginx":
            binary = ensure_nginx()
            if binary is not None:
                proxy_url = stack.enter_context(running_nginx(binary, server.base_url, tmp))
                version = subprocess.run(
                    [binary, "-v"], capture_output=True, text=True, check=False
                ).stderr.strip()
                print(f"caching proxy: {version} on {proxy_url}")

        # The guards go by the ttl the list says (whole seconds), as the guard does.
        served = verify_status_list(probe.text, KeySet(jwks), uri=targets[0].uri)
        ttl = served.ttl
        state = Run(
            targets=targets,
            keys=KeySet(jwks),
            ttl=ttl,
            api_key=server.api_key,
            feed_interval=bound / 2,
        )
        # Half the plans for the direct round, half for the proxy's; the CPU scenarios
        # watch plans that stay live.
        half = max(1, len(targets) // 2)
        scenarios: list[tuple[str, str, int, bool]] = [
            ("per-plan feed, direct (baseline)", server.base_url, feed_guards, True),
            ("status list, direct", server.base_url, feed_guards, False),
            ("status list, direct", server.base_url, guards, False),
        ]
        if proxy_url is not None:
            scenarios += [
                ("status list, nginx", proxy_url, feed_guards, False),
                ("status list, nginx", proxy_url, guards, False),
            ]
        for name, url, count, feed in scenarios:
            print(f"  {name}, {count:,} guards: {seconds:g} s...", flush=True)
            cpu.append(asyncio.run(watch_for(name, server, url, state, count, seconds, feed=feed)))
        vias = [("direct", server.base_url, targets[:half])]
        if proxy_url is not None:
            vias.append(("nginx", proxy_url, targets[half:] or targets[:half]))
        for via, url, watched in vias:
            print(f"  revocation through {via}, {guards:,} guards...", flush=True)
            delays, codes, errors = asyncio.run(
                revocation_round(server, url, state, guards, watched)
            )
            rounds.append((via, delays, codes, errors))
        errors_log = server.log_path.read_text().strip()

    print(f"\nTime from revocation to the first blocked call ({guards:,} guards, bound {bound} s):")
    rows = []
    for via, delays, codes, errors in rounds:
        p50, p99 = percentile(delays, 0.50), percentile(delays, 0.99)
        rows.append(
            [
                via,
                f"{len(delays):,} of {guards:,}",
                ", ".join(f"{code} {count:,}" for code, count in sorted(codes.items())),
                f"{p50:.2f}",
                f"{p99:.2f}",
                f"{delays[-1]:.2f}" if delays else "n/a",
                f"{p50 / bound:.2f}",
                f"{p99 / bound:.2f}",
                str(errors),
                "p99 < bound (" + ("met" if delays and p99 < bound else "not met") + ")",
            ]
        )
    print_table(
        [
            "list via",
            "blocked",
            "codes",
            "p50 s",
            "p99 s",
            "longest s",
            "p50/bound",
            "p99/bound",
            "errors",
            "target",
        ],
        rows,
    )

    baseline = cpu[0].per_guard_minute_ms if cpu else None
    rows = []
    for figure in cpu:
        value = figure.per_guard_minute_ms
        rows.append(
            [
                figure.name,
                f"{figure.guards:,}",
                f"{figure.requests / figure.seconds:,.0f}",
                f"{figure.upstream / figure.seconds:,.1f}",
                f"{figure.reads / figure.seconds / figure.guards * 60:.1f}",
                "n/a" if value is None else f"{value:.3f}",
                "n/a" if value is None or not baseline else f"{value / baseline:.3f}",
                str(figure.late),
                str(figure.errors),
            ]
        )
    print(
        f"\nServer CPU per guard per minute (gunicorn's processes, {seconds:g} s each; the"
        " simulated guards share the machine):"
    )
    print_table(
        [
            "watch",
            "guards",
            "req/s",
            "at server/s",
            "reads/guard/min",
            "srv CPU ms/guard/min",
            "vs feed",
            "late",
            "errors",
        ],
        rows,
    )
    proxied = {f.guards: f for f in cpu if f.name == "status list, nginx"}
    small, large = proxied.get(feed_guards), proxied.get(guards)
    if small is not None and large is not None and guards != feed_guards:
        rate_small, rate_large = small.upstream / small.seconds, large.upstream / large.seconds
        cpu_small, cpu_large = small.cpu, large.cpu
        print(
            f"  through nginx, {guards:,} guards sent the server"
            f" {rate_large / rate_small if rate_small else float('nan'):.2f}x the requests of"
            f" {feed_guards:,} guards"
            + (
                f", for {cpu_large / cpu_small:.2f}x its CPU"
                if cpu_small and cpu_large is not None
                else ""
            )
            + f" ({guards / feed_guards:g}x the guards; flat: 1.0x; target: flat behind a cache)"
        )

    print("\nThe list's size (1 bit per plan, zlib level 9, signed JWS as served):")
    base_signed = sizes[0][3]
    print_table(
        ["live plans", "revoked", "lst bytes", "JWS bytes", "bytes per plan", "vs 10,000 none"],
        [
            [
                f"{live:,}",
                f"{revoked:,}",
                f"{compressed:,}",
                f"{signed:,}",
                f"{signed / live:.4f}",
                f"{signed / base_signed:.1f}x",
            ]
            for live, revoked, compressed, signed in sizes
        ],
    )
    if any(errors for _, _, _, errors in rounds) and errors_log:
        print(f"\ngunicorn log (last lines):\n{errors_log[-1500:]}")
    return 0 if rounds and all(delays for _, delays, _, _ in rounds) else 1
