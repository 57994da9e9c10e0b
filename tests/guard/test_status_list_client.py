"""The guard's side of the token status list: lists signed here, read bit by bit as
draft-ietf-oauth-status-list says, verified with the guard's keys, fetched once per process
and per ttl with their ETag, and the watch that stops a plan on a flipped bit, asking the
per-plan feed once for the code; the feed stays the way for a server without lists."""

from __future__ import annotations

import base64
import json
import time
import zlib
from typing import Any

import httpx
import jwt
import pytest
from django.conf import settings

from guard.agent.status_list import (
    MAX_LIST_BYTES,
    SHARED_STATUS_LISTS,
    Fetched,
    Reading,
    StatusListCache,
    fetch_url,
    verify_status_list,
)
from guard.claims import StatusReference
from guard.decisions import Decision
from guard.errors import TokenInvalid
from guard.jwk import KeySet
from guard.tokens import unverified_header
from plans.models import Plan
from plans.services import plan_revoke
from tests.conftest import plan_document

from .client_helpers import TestSigner, reissuing

REPO = {"repo": "acme/public-app"}
URI = "https://plangate.test/v1/status-lists/7"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def packed(statuses: dict[int, int], *, size: int = 64, bits: int = 1) -> bytes:
    """The byte array of `size` entries of `bits` bits, as the draft packs them."""
    data = bytearray(size * bits // 8)
    for idx, value in statuses.items():
        position = idx * bits
        data[position // 8] |= value << (position % 8)
    return bytes(data)


def list_token(
    signer: TestSigner,
    statuses: dict[int, int] | None = None,
    *,
    bits: int = 1,
    size: int = 64,
    uri: str = URI,
    ttl: int = 10,
    lst: str | None = None,
    header: dict[str, Any] | None = None,
    **claims: Any,
) -> str:
    now = int(time.time())
    payload = {
        "sub": uri,
        "iat": now,
        "exp": now + 300,
        "ttl": ttl,
        "status_list": {
            "bits": bits,
            "lst": lst or b64url(zlib.compress(packed(statuses or {}, size=size, bits=bits))),
        },
        **claims,
    }
    return signer.sign(payload, **({"typ": "statuslist+jwt"} | (header or {})))


@pytest.fixture
def signer() -> TestSigner:
    return TestSigner()


@pytest.fixture
def keys(signer) -> KeySet:
    return KeySet({"keys": [signer.jwk]})


# --- reading and verifying a list ----------------------------------------------------------


def test_one_bit_is_bit_idx_mod_8_of_byte_idx_div_8_least_significant_first(signer, keys):
    token = list_token(signer, {0: 1, 9: 1, 63: 1})
    listed = verify_status_list(token, keys, uri=URI)

    assert listed.data[:2] == bytes([0b0000_0001, 0b0000_0010])
    assert [listed.status(idx) for idx in (0, 1, 8, 9, 62, 63)] == [1, 0, 0, 1, 0, 1]
    assert len(listed) == 64 and listed.status(64) is None


def test_two_bits_read_invalid_and_suspended(signer, keys):
    token = list_token(signer, {1: 0x01, 2: 0x02, 3: 0x03}, bits=2, size=8)
    listed = verify_status_list(token, keys, uri=URI)

    assert listed.data[0] == 0b11_10_01_00
    assert [listed.status(idx) for idx in range(5)] == [0, 1, 2, 3, 0]


@pytest.mark.parametrize(
    ("bits", "lst", "statuses"),
    [
        (1, "eNrbuRgAAhcBXQ", [1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1]),
        (2, "eNo76fITAAPfAgc", [1, 2, 0, 3, 0, 1, 0, 1, 1, 2, 3, 3]),
    ],
    ids=["1 bit", "2 bits"],
)
def test_the_drafts_own_examples_read_as_it_says(signer, keys, bits, lst, statuses):
    """draft-ietf-oauth-status-list, section 4.1's examples: their `lst` as published."""
    listed = verify_status_list(list_token(signer, bits=bits, lst=lst), keys, uri=URI)
    assert [listed.status(idx) for idx in range(len(statuses))] == statuses


def test_the_fully_specified_algorithm_name_is_accepted(signer, keys):
    now = int(time.time())
    payload = {
        "sub": URI,
        "iat": now,
        "exp": now + 60,
        "status_list": {"bits": 1, "lst": b64url(zlib.compress(b"\x04"))},
    }
    # PyJWT names the algorithm EdDSA; the same signature under the RFC 9864 name.
    jws = jwt.PyJWS()
    jws.register_algorithm("Ed25519", jws.get_algorithm_by_name("EdDSA"))
    token = jws.encode(
        json.dumps(payload).encode(),
        signer.private_key,
        algorithm="Ed25519",
        headers={"kid": signer.kid, "typ": "statuslist+jwt"},
    )
    assert unverified_header(token)["alg"] == "Ed25519"
    assert verify_status_list(token, keys, uri=URI).status(2) == 1


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda s: list_token(s, header={"typ": "JWT"}), "typ"),
        (lambda s: list_token(TestSigner(), header={"kid": s.kid}), "bad signature"),
        (lambda s: list_token(s, uri="https://plangate.test/v1/status-lists/8"), "sub"),
        (lambda s: list_token(s, exp=int(time.time()) - 120), "expired"),
        (lambda s: list_token(s, bits=3), "bits"),
        (lambda s: list_token(s, ttl=0), "ttl"),
        (lambda s: list_token(s, lst="not*base64"), "base64url"),
        (lambda s: list_token(s, lst=b64url(b"plain bytes")), "zlib"),
        (lambda s: list_token(s, lst=b64url(zlib.compress(b"\0")[:-2])), "complete"),
        (
            lambda s: list_token(s, lst=b64url(zlib.compress(bytes(MAX_LIST_BYTES + 1)))),
            "too large",
        ),
    ],
    ids=[
        "typ",
        "other key",
        "sub",
        "expired",
        "bits",
        "ttl",
        "lst alphabet",
        "not zlib",
        "truncated",
        "inflates too far",
    ],
)
def test_a_list_is_refused_with_its_reason(signer, keys, make, reason):
    with pytest.raises(TokenInvalid, match=reason):
        verify_status_list(make(signer), keys, uri=URI)


def test_typ_may_carry_the_application_prefix(signer, keys):
    token = list_token(signer, header={"typ": "application/statuslist+jwt"})
    assert verify_status_list(token, keys, uri=URI).status(0) == 0


@pytest.mark.parametrize(
    ("uri", "base", "issuer", "expected"),
    [
        (URI, "https://plangate.test", "https://plangate.test", URI),
        (URI, "http://10.0.0.5:8000/", "https://plangate.test", "http://10.0.0.5:8000/v1/status-lists/7"),
        (URI, "http://cache.internal/plangate", "https://plangate.test/", "http://cache.internal/plangate/v1/status-lists/7"),
        ("https://elsewhere.example/v1/status-lists/7", "http://cp:8000", "https://plangate.test", "http://cp:8000/v1/status-lists/7"),
    ],
    ids=["same", "another base", "base with a path", "uri outside the issuer"],
)  # fmt: skip
def test_the_list_is_fetched_under_the_guards_own_url(uri, base, issuer, expected):
    assert fetch_url(uri, base_url=base, issuer=issuer) == expected


# --- the shared cache ------------------------------------------------------------------------


class FakeServer:
    """Answers the list's fetches: the current token, its ETag, 304 when it matches."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.status = 200
        self.requests: list[str | None] = []

    def __call__(self, url: str, etag: str | None) -> Fetched:
        self.requests.append(etag)
        if self.status != 200:
            return Fetched(self.status, "", None)
        current = f'"{hash(self.token)}"'
        if etag == current:
            return Fetched(304, None, current)
        return Fetched(200, self.token, current)


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def monotonic() -> Monotonic:
    return Monotonic()


def reader(cache: StatusListCache, server: FakeServer, keys: KeySet):
    def read(idx: int):
        return cache.read(
            "http://cp/v1/status-lists/7",
            StatusReference(idx=idx, uri=URI),
            fetch=server,
            keys_for=lambda kid: keys,
        )

    return read


def test_guards_sharing_a_list_cause_one_request_per_refetch(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(signer, {3: 1}, ttl=10))
    read = reader(cache, server, keys)

    readings = [read(idx) for idx in range(8) for _ in range(100)]
    assert len(server.requests) == 1
    assert {r.reading for r in readings} == {Reading.VALID, Reading.STOPPED}
    assert read(3).reading is Reading.STOPPED and read(3).status == 1
    assert read(3).interval == 5.0  # half the ttl

    monotonic.now += 3.4  # under 0.35 x ttl: the copy held
    read(0)
    assert len(server.requests) == 1
    monotonic.now += 0.2
    read(0)
    assert server.requests == [None, f'"{hash(server.token)}"']  # If-None-Match: a 304


def test_a_flipped_bit_is_read_at_the_next_refetch(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(signer, {}, ttl=10))
    read = reader(cache, server, keys)
    assert read(5).reading is Reading.VALID

    server.token = list_token(signer, {5: 1}, ttl=10)
    assert read(5).reading is Reading.VALID  # not due yet
    monotonic.now += 4
    assert read(5).reading is Reading.STOPPED


@pytest.mark.parametrize("status", [500, 503, 429, 408])
def test_a_failing_server_changes_nothing(signer, keys, monotonic, status):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(signer, {}, ttl=10))
    read = reader(cache, server, keys)
    assert read(5).reading is Reading.VALID

    server.status = status
    monotonic.now += 4
    assert read(5).reading is Reading.VALID  # the copy held, still unexpired
    assert len(server.requests) == 2


def test_a_badly_signed_list_changes_nothing(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(signer, {}, ttl=10))
    read = reader(cache, server, keys)
    assert read(5).reading is Reading.VALID

    server.token = list_token(TestSigner(), {5: 1}, header={"kid": signer.kid})
    monotonic.now += 4
    assert read(5).reading is Reading.VALID


def test_without_a_list_held_the_reading_is_unknown(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(TestSigner(), {}, header={"kid": signer.kid}))
    assert reader(cache, server, keys)(5).reading is Reading.UNKNOWN


@pytest.mark.parametrize("status", [404, 401, 403, 410])
def test_a_server_without_lists_is_asked_again_only_minutes_later(signer, keys, monotonic, status):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(signer, {}))
    server.status = status
    read = reader(cache, server, keys)

    assert read(5).reading is Reading.UNSUPPORTED
    monotonic.now += 60
    assert read(5).reading is Reading.UNSUPPORTED
    assert len(server.requests) == 1
    server.status = 200
    monotonic.now += 300
    assert read(5).reading is Reading.VALID


def test_an_index_past_the_list_is_out_of_range(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    read = reader(cache, FakeServer(list_token(signer, {}, size=16)), keys)
    assert read(15).reading is Reading.VALID
    assert read(16).reading is Reading.OUT_OF_RANGE


# --- the guard's watch -----------------------------------------------------------------------


LIST_PATH = "/v1/status-lists/7"


class Control:
    """The tampering proxy of these tests: tokens re-signed with a `status` claim (index
    `idx` of list 7), the list served by the test, the paths counted."""

    def __init__(self, signer: TestSigner, *, idx: int = 5) -> None:
        self.signer = signer
        self.idx = idx
        self.flipped: dict[int, int] = {}
        self.list_status = 200
        self.feed_status: int | None = None  # None: the real feed
        self.key_revoked = False  # the signer's key left the published set
        self.feed_answer: dict[str, Any] | None = None  # None: the real feed's
        self.reissue = reissuing(signer, self.edit)
        self.monotonic = Monotonic()

    def edit(self, claims: dict[str, Any], body: dict[str, Any]) -> None:
        claims["status"] = {"status_list": {"idx": self.idx, "uri": URI}}

    def __call__(self, request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path == LIST_PATH:
            if self.list_status != 200:
                return httpx.Response(self.list_status, json={"code": "not_found"})
            token = list_token(self.signer, self.flipped, ttl=4)
            return httpx.Response(
                200,
                text=token,
                headers={"Content-Type": "application/statuslist+jwt", "ETag": '"1"'},
            )
        if request.url.path == "/v1/keys/jwks" and self.key_revoked:
            return response
        if request.url.path.endswith("/status") and self.feed_answer is not None:
            return httpx.Response(200, json=self.feed_answer)
        if request.url.path.endswith("/status") and self.feed_status is not None:
            return httpx.Response(self.feed_status, json={"code": "server_error"})
        return self.reissue(request, response)


@pytest.fixture
def control(switchboard, signer, monkeypatch) -> Control:
    control = Control(signer)
    switchboard.rewrite = control
    monkeypatch.setattr(SHARED_STATUS_LISTS, "_clock", control.monotonic)
    return control


def feed_requests(switchboard) -> int:
    return sum(path.endswith("/status") for path in switchboard.paths)


def next_period(control: Control) -> None:
    control.monotonic.now += 60


def test_the_watch_reads_the_list_and_not_the_feed(make_any_guard, control, switchboard):
    guard = make_any_guard()
    guard.declare(plan_document())

    assert [guard.poll_status() for _ in range(3)] == [False] * 3
    next_period(control)
    assert guard.poll_status() is False

    assert switchboard.count(LIST_PATH) == 2
    assert feed_requests(switchboard) == 0
    assert guard.check("github_list_issues", REPO).allowed


def test_a_flipped_bit_stops_the_plan_with_the_feeds_code(make_any_guard, control, switchboard):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    assert guard.poll_status() is False

    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin", reason="stop now")
    control.flipped = {control.idx: 1}
    next_period(control)
    assert guard.poll_status() is True

    decision = guard.check("github_list_issues", REPO)
    assert decision.code == Decision.PLAN_REVOKED
    assert decision.reason.startswith("the control plane says")  # the feed, asked once
    assert feed_requests(switchboard) == 1
    next_period(control)
    assert guard.poll_status() is False  # a stopped plan is not watched again
    assert feed_requests(switchboard) == 1


def test_a_flipped_bit_with_a_failing_feed_is_plan_revoked(make_any_guard, control):
    guard = make_any_guard()
    guard.declare(plan_document())
    control.flipped = {control.idx: 1}
    control.feed_status = 503

    assert guard.poll_status() is True
    decision = guard.check("github_list_issues", REPO)
    assert decision.code == Decision.PLAN_REVOKED
    assert "status list" in decision.reason


def test_the_feed_says_which_stop_a_flipped_bit_is(make_any_guard, control, agent):
    from members.services import member_disable

    guard = make_any_guard()
    guard.declare(plan_document())
    member_disable(team=agent.team, email="alice@acme.dev")
    control.flipped = {control.idx: 1}

    assert guard.poll_status() is True
    assert guard.check("github_list_issues", REPO).code == Decision.USER_DISABLED


def test_a_token_whose_key_left_the_key_set_is_withdrawn(
    make_any_guard, control, switchboard, clock
):
    guard = make_any_guard()
    guard.declare(plan_document())
    assert guard.poll_status() is False

    control.key_revoked = True
    next_period(control)
    # A key set says nothing of a token signed after it was fetched (its key may be new):
    # the guard's wall clock, which the fake clock holds still, must be past the token's
    # iat, which the server took from the real one.
    clock.now = max(clock.now, time.time()) + 1
    assert guard.poll_status() is True

    assert guard.check("github_list_issues", REPO).code == Decision.TOKEN_INVALID
    assert feed_requests(switchboard) == 0
    assert switchboard.count("/v1/keys/jwks") >= 2


def test_a_flipped_bit_the_feed_calls_token_invalid_withdraws_the_token(make_any_guard, control):
    guard = make_any_guard()
    guard.declare(plan_document())
    control.flipped = {control.idx: 1}
    control.feed_answer = {"code": "token_invalid", "reason": "its signing key was revoked"}

    assert guard.poll_status() is True
    assert guard.check("github_list_issues", REPO).code == Decision.TOKEN_INVALID
    next_period(control)
    assert guard.poll_status() is False  # withdrawn once; the refresher has it from here
    assert guard.check("github_list_issues", REPO).code == Decision.TOKEN_INVALID


def test_a_server_without_lists_is_watched_through_the_feed(make_any_guard, control, switchboard):
    control.list_status = 404
    guard = make_any_guard()
    declared = guard.declare(plan_document())

    assert guard.poll_status() is False
    assert guard.poll_status() is False
    assert (switchboard.count(LIST_PATH), feed_requests(switchboard)) == (1, 2)

    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin", reason="stop now")
    assert guard.poll_status() is True
    assert guard.check("github_list_issues", REPO).code == Decision.PLAN_REVOKED


def test_an_unreadable_list_changes_nothing_and_does_not_fall_back(
    make_any_guard, control, switchboard
):
    guard = make_any_guard()
    guard.declare(plan_document())
    assert guard.poll_status() is False
    control.list_status = 503
    control.flipped = {control.idx: 1}
    next_period(control)

    assert guard.poll_status() is False
    assert feed_requests(switchboard) == 0
    assert guard.check("github_list_issues", REPO).allowed


def test_a_token_without_a_status_claim_is_watched_through_the_feed(
    make_any_guard, switchboard, signer
):
    def strip(claims: dict[str, Any], body: dict[str, Any]) -> None:
        claims.pop("status", None)

    switchboard.rewrite = reissuing(signer, strip)
    guard = make_any_guard()
    guard.declare(plan_document())

    assert guard.poll_status() is False
    assert feed_requests(switchboard) == 1
    assert switchboard.count("/v1/status-lists/") == 0


def test_status_list_false_keeps_the_feed(make_any_guard, control, switchboard):
    guard = make_any_guard(status_list=False)
    guard.declare(plan_document())
    assert guard.poll_status() is False
    assert (switchboard.count(LIST_PATH), feed_requests(switchboard)) == (0, 1)


def test_the_list_is_fetched_from_the_guards_url_without_credentials(
    make_any_guard, control, switchboard
):
    assert settings.PLANGATE_ISSUER == "https://plangate.test"  # the uri's host
    seen: list[tuple[str, str | None]] = []

    def record(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path == LIST_PATH:
            seen.append((str(request.url), request.headers.get("Authorization")))
        return control(request, response)

    switchboard.rewrite = record
    guard = make_any_guard()
    guard.declare(plan_document())
    guard.poll_status()

    assert seen == [("http://testserver/v1/status-lists/7", None)]


def test_a_list_with_a_short_exp_is_revalidated_while_it_lasts(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    # The server's choice: exp four ttl after iat (with a ttl far below the leeway).
    server = FakeServer(list_token(signer, {}, ttl=5, exp=int(time.time()) + 20))
    read = reader(cache, server, keys)
    assert read(5).reading is Reading.VALID
    monotonic.now += 2

    read(5)
    assert server.requests[1] is not None  # If-None-Match: a 304 serves


def test_a_list_near_its_exp_is_asked_for_in_full(signer, keys, monotonic):
    cache = StatusListCache(clock=monotonic)
    server = FakeServer(list_token(signer, {}, ttl=10, exp=int(time.time()) + 19))
    read = reader(cache, server, keys)
    assert read(5).reading is Reading.VALID
    monotonic.now += 4

    read(5)
    assert server.requests == [None, None]  # no If-None-Match: a 304 would keep the exp
