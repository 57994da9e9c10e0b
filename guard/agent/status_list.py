"""Reading a team's token status list (draft-ietf-oauth-status-list): one signed list per
team in which a token's ``status.status_list.idx`` names its status, fetched in the
background and shared by every guard of the process that holds a token of that team.

The list is a ``statuslist+jwt``: a compact JWS signed by the control plane's keys, the
same keys and the same checks as an intent token (guard.tokens: Ed25519 under ``EdDSA`` or
``Ed25519``, a known ``kid``, no key taken from the header), then ``typ`` =
``statuslist+jwt``, ``sub`` = the token's ``uri``, ``exp`` not past, and ``status_list``
``{"bits": 1|2|4|8, "lst": base64url(zlib DEFLATE of the byte array)}``. Index i is bits
``[i * bits, (i + 1) * bits)`` of the array, least significant first (1 bit: bit i % 8 of
byte i // 8). 0 is VALID; any other status (1 INVALID, 2 SUSPENDED, 3 and up) stops the
plan.

Where it is fetched: always under the guard's own control-plane URL, never at a host the
token names. The uri's part after the issuer the guard checks tokens against (its ``iss``)
is appended to the guard's base URL, so a guard that reaches the control plane at another
address than its public issuer (a proxy, a cache, a private network) asks the same path
there; a uri outside the issuer contributes its path only.

How often: a process asks for a list at most once per `REFETCH_SHARE` x its ``ttl`` (the
team's poll interval, half its revocation bound), with ``If-None-Match`` so that an unchanged
list costs a ``304``; every guard of the process reads the copy held. A watch reads it
every half ``ttl`` (jittered): a change reaches the guard within 0.85 ``ttl`` of reaching
the URL, and a cache in front that holds it up to its ``max-age`` (= ``ttl``) keeps the
total within the bound (2 x ``ttl``).

A revoked signing key leaves the published key set (decision 0020) but flips no bit: with
each list the process asks for the key set too (conditional, public, cacheable), and a
watch whose token's key is no longer published withdraws the token, as the per-plan feed's
``token_invalid`` does.

What cannot be read changes nothing: unreachable, 5xx, a bad signature or an expired list
leave the guard deciding with its valid token, as before the list existed. A ``404`` means
a control plane that predates the list (and another refusal, 4xx but 408 and 429, a list
this guard may not read): the guard's watch asks the per-plan feed instead
(guard.agent.status_watch), and asks for the list again after `MISSING_RECHECK` seconds.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from guard.agent.http import ControlPlaneError, ControlPlaneUnavailable
from guard.claims import StatusReference, integer_claim
from guard.errors import TokenInvalid
from guard.jwk import KeySet, b64url_decode
from guard.tokens import _verified_payload, unverified_header

__all__ = [
    "SHARED_STATUS_LISTS",
    "StatusList",
    "StatusListCache",
    "StatusListReader",
    "StatusReading",
    "fetch_url",
    "verify_status_list",
]

logger = logging.getLogger(__name__)

MEDIA_TYPE: Final = "application/statuslist+jwt"
TYP: Final = "statuslist+jwt"
ACCEPTED_BITS: Final = frozenset({1, 2, 4, 8})
# 16 MiB decompressed: 134 million tokens at 1 bit; a larger answer is refused, not
# inflated (a small zlib stream can expand a thousandfold).
MAX_LIST_BYTES: Final = 16 * 1024 * 1024
# Each process asks at most once per this share of the list's ttl; a watch reads the copy
# every half ttl (jittered down to 0.8 of it: 0.4 ttl), so its own read finds it due. The
# worst case stays within the bound (2 ttl): a cache in front may hold the list for its
# max-age (ttl), then up to 0.35 ttl in the process and 0.5 ttl until the watch reads it.
REFETCH_SHARE: Final = 0.35
WATCH_SHARE: Final = 0.5
# The key set is asked at most once per this share of the ttl (a key revoked is noticed
# within 0.9 + 0.5 ttl of leaving it), not with every list: it changes far more rarely.
KEYS_SHARE: Final = 0.9
DEFAULT_TTL: Final = 5.0  # until a list has said its ttl
MIN_TTL: Final = 1.0
MAX_TTL: Final = 60.0
MISSING_RECHECK: Final = 300.0  # a 404 (a server without lists) is asked again after this
MAX_LISTS: Final = 64  # lists held per process (one per team the process's tokens name)
LEEWAY: Final = 30


# --- the list -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusList:
    """A verified, decompressed status list."""

    uri: str
    bits: int
    data: bytes
    issued_at: int
    expires_at: int
    ttl: float

    def __len__(self) -> int:
        return len(self.data) * 8 // self.bits

    def status(self, idx: int) -> int | None:
        """The status of index `idx`, None when the list does not reach it."""
        if idx < 0:
            return None
        position = idx * self.bits
        byte = position // 8
        if byte >= len(self.data):
            return None
        return (self.data[byte] >> (position % 8)) & ((1 << self.bits) - 1)


def _inflate(compressed: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(compressed, MAX_LIST_BYTES + 1)
    except zlib.error:
        raise TokenInvalid("status_list.lst is not zlib DEFLATE data") from None
    if len(data) > MAX_LIST_BYTES or inflater.unconsumed_tail:
        raise TokenInvalid("status_list.lst is too large")
    if not inflater.eof or inflater.unused_data:
        raise TokenInvalid("status_list.lst is not one complete zlib stream")
    return data


def _typ_is_status_list(value: object) -> bool:
    # RFC 7515 4.1.9: a media type, "application/" may be left out, compared without case.
    if not isinstance(value, str):
        return False
    lowered = value.lower()
    return lowered.removeprefix("application/") == TYP


def verify_status_list(
    token: str, keys: KeySet, *, uri: str, now: float | None = None, leeway: int = LEEWAY
) -> StatusList:
    """Verify a ``statuslist+jwt`` served for `uri` and return the list.

    The JWS checks of an intent token (guard.tokens), then: header ``typ`` is
    ``statuslist+jwt``; ``sub`` equals `uri`; integer ``iat`` and ``exp``, ``exp`` not past
    by more than `leeway`; ``ttl``, when present, a positive number; ``status_list`` an
    object with ``bits`` 1, 2, 4 or 8 and ``lst`` strict base64url of one complete zlib
    stream. Raises TokenInvalid, and only TokenInvalid.
    """
    payload = _verified_payload(token, keys)
    if not _typ_is_status_list(unverified_header(token).get("typ")):
        raise TokenInvalid("header typ is not statuslist+jwt")
    if payload.get("sub") != uri:
        raise TokenInvalid("claim sub is not the status list's uri")
    current = time.time() if now is None else now
    expires_at = integer_claim(payload, "exp")
    issued_at = integer_claim(payload, "iat")
    if current - leeway >= expires_at:
        raise TokenInvalid("status list expired")
    ttl: Any = payload.get("ttl", DEFAULT_TTL)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise TokenInvalid("claim ttl is not a positive number")
    status_list = payload.get("status_list")
    if not isinstance(status_list, dict):
        raise TokenInvalid("claim status_list is not an object")
    bits = status_list.get("bits")
    if isinstance(bits, bool) or bits not in ACCEPTED_BITS:
        raise TokenInvalid("claim status_list.bits is not 1, 2, 4 or 8")
    lst = status_list.get("lst")
    if not isinstance(lst, str):
        raise TokenInvalid("claim status_list.lst is not a string")
    data = _inflate(b64url_decode(lst, "status_list.lst"))
    return StatusList(
        uri=uri,
        bits=bits,
        data=data,
        issued_at=issued_at,
        expires_at=expires_at,
        ttl=min(MAX_TTL, max(MIN_TTL, float(ttl))),
    )


# --- where and how it is fetched -----------------------------------------------------------


def fetch_url(uri: str, *, base_url: str, issuer: str) -> str:
    """Where a guard configured with `base_url` and `issuer` fetches the list named `uri`:
    the uri's part after the issuer under the base URL (the path alone for a uri outside
    the issuer). A guard never fetches from a host it was not configured with."""
    base = base_url.rstrip("/")
    prefix = issuer.rstrip("/")
    if uri.startswith(prefix + "/"):
        return base + uri[len(prefix) :]
    parts = urlsplit(uri)
    return base + (parts.path if parts.path.startswith("/") else "/" + parts.path)


@dataclass(frozen=True, slots=True)
class Fetched:
    """One answer: its HTTP status, its body (None for a 304) and its ETag."""

    status: int
    body: str | None
    etag: str | None


Fetch = Callable[[str, str | None], Fetched]


def http_fetch(client: httpx.Client, *, accept: str = MEDIA_TYPE) -> Fetch:
    """A `Fetch` over `client`. No credential is sent: the list is public (a shared cache
    would otherwise keep a copy per API key, or none). Raises httpx.HTTPError."""

    def fetch(url: str, etag: str | None) -> Fetched:
        headers = {"Accept": accept, "User-Agent": "plangate-guard/1"}
        if etag:
            headers["If-None-Match"] = etag
        response = client.get(url, headers=headers)
        new_etag = response.headers.get("ETag")
        if response.status_code == 304:
            return Fetched(304, None, new_etag or etag)
        return Fetched(response.status_code, response.text, new_etag)

    return fetch


class Reading(enum.Enum):
    VALID = "valid"  # the token's status is 0
    STOPPED = "stopped"  # the token's status is not 0
    UNKNOWN = "unknown"  # no valid list held: nothing changes
    UNSUPPORTED = "unsupported"  # 404 (or another refusal): no list to read here
    OUT_OF_RANGE = "out_of_range"  # the list does not reach the token's index


@dataclass(frozen=True, slots=True)
class StatusReading:
    """What the list says of one token: `reading`, the `status` value when one was read,
    and how long a watch should wait before reading again (`interval`, seconds)."""

    reading: Reading
    status: int | None
    interval: float
    published_kids: frozenset[str] | None = None
    kids_at: float = float("-inf")

    def key_withdrawn(self, kid: str, issued_at: float) -> bool:
        """The control plane no longer publishes `kid` (it was revoked), in a key set
        fetched after a token signed at `issued_at`, so not merely older than the key."""
        kids = self.published_kids
        return kids is not None and kid not in kids and self.kids_at > issued_at


class _Entry:
    __slots__ = (
        "etag",
        "failure",
        "fetched_at",
        "fetches",
        "jwks_etag",
        "kids",
        "kids_at",
        "kids_next_at",
        "list",
        "lock",
        "missing_until",
        "next_fetch_at",
        "uri",
    )

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.lock = threading.Lock()
        self.list: StatusList | None = None
        self.etag: str | None = None
        self.fetched_at = float("-inf")
        self.next_fetch_at = float("-inf")
        self.missing_until = float("-inf")
        self.fetches = 0
        self.failure: str | None = None
        # The key ids the control plane publishes, asked with the list (wall time of the
        # answer): a token whose key left them was signed by a revoked key.
        self.kids: frozenset[str] | None = None
        self.kids_at = float("-inf")
        self.jwks_etag: str | None = None
        self.kids_next_at = float("-inf")


class StatusListCache:
    """Status lists by fetch URL, shared by the guards of a process (`SHARED_STATUS_LISTS`).

    `read` answers from the copy held and fetches first when it is due, under the entry's
    lock: guards reading the same list at once cause one request. `clock` schedules
    fetches (monotonic); `wall` checks ``exp``.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_lists: int = MAX_LISTS,
    ) -> None:
        self._clock = clock
        self._max_lists = max_lists
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def _entry(self, url: str, uri: str) -> _Entry:
        with self._lock:
            entry = self._entries.get(url)
            if entry is None or entry.uri != uri:
                entry = self._entries[url] = _Entry(uri)
            self._entries.move_to_end(url)
            while len(self._entries) > self._max_lists:
                self._entries.popitem(last=False)
            return entry

    def clear(self) -> None:
        """Forget every list held (a test's server is not the next test's)."""
        with self._lock:
            self._entries.clear()

    def fetches(self, url: str) -> int:
        """Requests made for `url` so far (for tests and the bench)."""
        entry = self._entries.get(url)
        return entry.fetches if entry is not None else 0

    def read(
        self,
        url: str,
        reference: StatusReference,
        *,
        fetch: Fetch,
        keys_for: Callable[[object], KeySet],
        wall: Callable[[], float] = time.time,
        fetch_jwks: Fetch | None = None,
    ) -> StatusReading:
        entry = self._entry(url, reference.uri)
        with entry.lock:
            now = self._clock()
            if now >= entry.missing_until and now >= entry.next_fetch_at:
                self._fetch(entry, url, now, fetch, keys_for, wall)
                if fetch_jwks is not None and now >= max(entry.missing_until, entry.kids_next_at):
                    ttl = entry.list.ttl if entry.list is not None else DEFAULT_TTL
                    entry.kids_next_at = now + ttl * KEYS_SHARE
                    self._fetch_kids(entry, fetch_jwks, wall)
            ttl = entry.list.ttl if entry.list is not None else DEFAULT_TTL
            interval = ttl * WATCH_SHARE
            if now < entry.missing_until:
                return StatusReading(Reading.UNSUPPORTED, None, interval)
            held, kids, kids_at = entry.list, entry.kids, entry.kids_at
            if held is None or wall() - LEEWAY >= held.expires_at:
                return StatusReading(Reading.UNKNOWN, None, interval, kids, kids_at)
        status = held.status(reference.idx)
        if status is None:
            return StatusReading(Reading.OUT_OF_RANGE, None, interval, kids, kids_at)
        reading = Reading.VALID if status == 0 else Reading.STOPPED
        return StatusReading(reading, status, interval, kids, kids_at)

    @staticmethod
    def _fetch_kids(entry: _Entry, fetch_jwks: Fetch, wall: Callable[[], float]) -> None:
        """Ask for the published key set with its ETag; a failure keeps what is held."""
        try:
            answer = fetch_jwks("", entry.jwks_etag if entry.kids is not None else None)
        except (httpx.HTTPError, OSError):
            return
        if answer.status == 304 and entry.kids is not None:
            entry.kids_at = wall()
            return
        if answer.status != 200 or answer.body is None:
            return
        try:
            document = json.loads(answer.body)
        except ValueError:
            return
        entry.kids = frozenset(KeySet(document).kids) if isinstance(document, dict) else None
        entry.kids_at, entry.jwks_etag = wall(), answer.etag

    def _fetch(
        self,
        entry: _Entry,
        url: str,
        now: float,
        fetch: Fetch,
        keys_for: Callable[[object], KeySet],
        wall: Callable[[], float],
    ) -> None:
        entry.fetches += 1
        entry.fetched_at = now
        ttl = entry.list.ttl if entry.list is not None else DEFAULT_TTL
        entry.next_fetch_at = now + ttl * REFETCH_SHARE
        # A 304 keeps the copy held, and with it its exp: one about to expire is asked for
        # in full, so that a server whose ETag follows the bits alone re-sends it.
        held = entry.list
        fresh = held is not None and held.expires_at > wall() + 2 * held.ttl
        try:
            answer = fetch(url, entry.etag if fresh else None)
        except (httpx.HTTPError, OSError) as error:
            self._failed(entry, f"unreachable: {error}")
            return
        if answer.status == 304 and entry.list is not None:
            entry.etag = answer.etag or entry.etag
            entry.failure = None
            return
        if answer.status == 404 or (400 <= answer.status < 500 and answer.status not in (408, 429)):
            # No list here (a server that predates it), or one this guard may not read (a
            # proxy's refusal): the per-plan feed is the way, asked again later.
            entry.missing_until = now + MISSING_RECHECK
            entry.list, entry.etag = None, None
            return
        if answer.status != 200 or answer.body is None:
            self._failed(entry, f"answered {answer.status}")
            return
        token = answer.body.strip()
        try:
            kid = unverified_header(token).get("kid")
            verified = verify_status_list(token, keys_for(kid), uri=entry.uri, now=wall())
        except TokenInvalid as error:
            self._failed(entry, f"refused: {error}")
            return
        except (ControlPlaneUnavailable, ControlPlaneError) as error:  # no key set yet
            self._failed(entry, f"no keys to verify it: {error}")
            return
        entry.list, entry.etag, entry.failure = verified, answer.etag, None
        entry.next_fetch_at = now + verified.ttl * REFETCH_SHARE

    @staticmethod
    def _failed(entry: _Entry, why: str) -> None:
        # The copy held (if any) stays until its exp: a list that cannot be read changes
        # nothing, as an unreachable feed changes nothing.
        if entry.failure != why:
            logger.info("plangate guard: the status list %s %s", entry.uri, why)
        entry.failure = why


SHARED_STATUS_LISTS: Final = StatusListCache()


class StatusListReader:
    """What one guard needs to read its tokens' lists: where to fetch them (`fetch_url`),
    with which HTTP client, and which keys verify them; the lists themselves are held by a
    cache shared with the process's other guards."""

    def __init__(
        self,
        *,
        base_url: str,
        issuer: str,
        http: httpx.Client,
        keys_for: Callable[[object], KeySet],
        cache: StatusListCache | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = base_url
        self.issuer = issuer
        self._fetch = http_fetch(http)
        jwks = http_fetch(http, accept="application/jwk-set+json, application/json")
        jwks_url = base_url.rstrip("/") + "/v1/keys/jwks"
        self._fetch_jwks: Fetch = lambda _, etag: jwks(jwks_url, etag)
        self._keys_for = keys_for
        self.cache = cache if cache is not None else SHARED_STATUS_LISTS
        self._wall = wall

    def url_for(self, reference: StatusReference) -> str:
        return fetch_url(reference.uri, base_url=self.base_url, issuer=self.issuer)

    def read(self, reference: StatusReference) -> StatusReading:
        return self.cache.read(
            self.url_for(reference),
            reference,
            fetch=self._fetch,
            keys_for=self._keys_for,
            wall=self._wall,
            fetch_jwks=self._fetch_jwks,
        )
