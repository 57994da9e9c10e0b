"""The token status list (draft-ietf-oauth-status-list): one signed, cacheable list per
team in which every token's ``status.status_list.idx`` names a bit (docs/decisions/0068).

* ``status_idx_allocate``: the next index of a team, taken when a plan is first signed
  (issuance, an approved plan's token, a child plan);
* ``team_status_bits``: the team's bits from the live rows; a plan's bit is 1 (INVALID)
  once it may not go on, every other index 0 (VALID: no token holds an index without a
  plan row);
* ``status_list_view``: ``GET /v1/status-lists/{team}``, the list as a ``statuslist+jwt``
  signed by the active key, without authentication, cacheable by any proxy.

A GET never writes the database: the signed list is kept per process for at most a quarter
of its ``ttl`` (and re-signed at least every ``ttl``), so a team with many guards costs one
build per process per quarter ``ttl`` however many read it.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import threading
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Final, cast

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from kernel.problems import (
    PROBLEM_CONTENT_TYPE,
    Code,
    DomainError,
    database_unavailable_error,
    is_database_unavailable,
    problem_body,
)
from kernel.sql import row_read, statement
from kernel.tracing import traced_view
from members.models import ApiKey, ApiKeyQuerySet
from teams.models import Team

from .keys import active_signer
from .models import Plan, PlanToken, SigningKey
from .status_feed import poll_interval

__all__ = [
    "MEDIA_TYPE",
    "StatusBits",
    "status_idx_allocate",
    "status_idx_assign",
    "status_list_bytes",
    "status_list_cache_clear",
    "status_list_lst",
    "status_list_signed",
    "status_list_uri",
    "status_list_view",
    "team_status_bits",
]

MEDIA_TYPE: Final = "application/statuslist+jwt"
TYP: Final = "statuslist+jwt"
#: A list token stays acceptable for this many ``ttl`` after its ``iat`` (two bounds): a
#: guard that misses a fetch or two keeps its list, one that cannot fetch for longer drops it.
EXP_TTLS: Final = 4
#: A process rebuilds a team's list when its copy is older than this share of ``ttl``...
CACHE_SHARE: Final = 0.25
#: ...or, for a list that takes long to build, than this many times its build took, up to
#: half ``ttl`` (1,000,000 plans: about 1.4 s a build on PostgreSQL; docs/decisions/0068).
BUILD_TIMES: Final = 4
CACHE_SHARE_MAX: Final = 0.5
_TEAM_ID_MAX: Final = 2**63 - 1


def status_list_uri(team_id: int) -> str:
    """The URI a team's tokens name in ``status.status_list.uri``: the list's address under
    the issuer, and the ``sub`` of the list token served there."""
    return f"{settings.PLANGATE_ISSUER.rstrip('/')}/v1/status-lists/{team_id}"


def status_idx_allocate(*, team: Team) -> int:
    """The next free index of ``team``'s status list, for a plan about to be signed first.

    One statement, ``UPDATE ... SET status_list_next = status_list_next + 1 ... RETURNING``
    (PostgreSQL; SQLite 3.35 and later): atomic on its own, so two processes never get the
    same index, and one query where the ORM's update and read took four with their
    savepoint. An index whose plan is never saved (the signature failed after it) is held
    by no token."""
    return _allocate(team.pk)


def _allocate_statement() -> str:
    quote = connection.ops.quote_name
    table, column = quote(Team._meta.db_table), quote("status_list_next")
    # Only the model's own table and column names are formatted in; the id is a parameter.
    return (
        f"UPDATE {table} SET {column} = {column} + 1 "  # noqa: S608
        f"WHERE {quote('id')} = %s RETURNING {column}"
    )


def _allocate(team_id: int) -> int:
    row = row_read(statement("plans.status_idx_allocate", _allocate_statement), [team_id])
    if row is None:
        raise Team.DoesNotExist(f"no team {team_id}")
    return int(row[0]) - 1


def status_idx_assign(plan: Plan) -> None:
    """Give the saved ``plan`` an index unless it has one (an approved plan's first token; a
    plan issued before lists existed, at its refresh). Two requests signing it at once agree:
    the first index written wins, the other's stays unused (no token holds it)."""
    if plan.status_idx is not None:
        return
    with transaction.atomic():
        idx = _allocate(plan.team_id)
        if not Plan.objects.filter(pk=plan.pk, status_idx__isnull=True).update(status_idx=idx):
            taken = Plan.objects.filter(pk=plan.pk).values_list("status_idx", flat=True).get()
            if taken is not None:
                idx = taken
    plan.status_idx = idx


# --- the bits ----------------------------------------------------------------------------


def status_list_bytes(size: int, invalid: Iterable[int]) -> bytes:
    """A 1-bit list of ``size`` statuses: every index VALID (0) but those in ``invalid``.
    Bit ``i`` is bit ``i % 8`` (least significant first) of byte ``i // 8``; the bits past
    ``size`` in the last byte are 0. At least one byte."""
    data = bytearray(max(1, math.ceil(size / 8)))
    for idx in invalid:
        if 0 <= idx < size:
            data[idx >> 3] |= 1 << (idx & 7)
    return bytes(data)


def status_list_lst(data: bytes) -> str:
    """The draft's ``lst``: the bytes zlib-compressed (DEFLATE, RFC 1950), base64url without
    padding."""
    return base64.urlsafe_b64encode(zlib.compress(data, 9)).rstrip(b"=").decode()


@dataclass(frozen=True)
class StatusBits:
    """A team's list as the rows say now: its bytes and its number of statuses."""

    size: int
    data: bytes
    bound_seconds: int

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.size.to_bytes(8, "big") + self.data).hexdigest()


def _invalid_indices(team_id: int, now: datetime) -> Iterator[int]:
    """The indices of ``team_id``'s plans that may not go on at ``now``: not active, or
    expired, or whose member or agent is disabled, whose agent holds no usable API key, or
    whose latest token was signed by a revoked key. An index without a plan row is not one
    of them: no token holds it yet (its plan is being signed and saved) or ever will (the
    signature failed), and reading it INVALID would stop a new plan whose list was built
    between its index and its row."""
    usable_key = ApiKey.objects.filter(
        Q(agent_id=OuterRef("agent_id")) & ApiKeyQuerySet.usable_condition(now)
    )
    stopped: Q = (
        ~Q(status=Plan.Status.ACTIVE)
        | Q(expires_at__lte=now)
        | Q(member__is_active=False)
        | Q(agent__is_active=False)
        | Q(~Exists(usable_key))
    )
    plans = Plan.objects.filter(team_id=team_id, status_idx__isnull=False)
    revoked = list(
        SigningKey.objects.filter(state=SigningKey.State.REVOKED).values_list("kid", flat=True)
    )
    if revoked:  # rare: only then is each plan's latest token looked at
        latest_kid = PlanToken.objects.filter(plan_id=OuterRef("pk")).order_by("-issued_at", "-id")
        plans = plans.annotate(latest_kid=Subquery(latest_kid.values("kid")[:1]))
        stopped |= Q(latest_kid__in=revoked)
    # status_idx is not null here: the filter says so.
    indices = plans.filter(stopped).order_by().values_list("status_idx", flat=True)
    return cast("Iterator[int]", indices.iterator(chunk_size=20_000))


def team_status_bits(team_id: int, now: datetime | None = None) -> StatusBits:
    """``team_id``'s list from the live rows, or DomainError ``not_found``. Reads only."""
    row = (
        Team.objects.filter(pk=team_id)
        .values_list("status_list_next", "revocation_bound_seconds")
        .first()
    )
    if row is None:
        raise DomainError(Code.NOT_FOUND, f"No status list for team {team_id}.")
    size, bound = row
    data = status_list_bytes(size, _invalid_indices(team_id, now or timezone.now()))
    return StatusBits(size=size, data=data, bound_seconds=bound)


def list_ttl(bound_seconds: int) -> int:
    """The list's ``ttl``: the team's poll interval, rounded up to whole seconds."""
    return max(1, math.ceil(poll_interval(bound_seconds)))


# --- the signed list, kept per process -----------------------------------------------------


@dataclass(frozen=True)
class SignedList:
    token: str
    etag: str
    ttl: int
    iat: int
    digest: str
    kid: str
    alg: str
    built_at: float  # time.monotonic() when the rows it carries were read
    build_seconds: float


_cache: dict[int, SignedList] = {}
_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()


def status_list_cache_clear() -> None:
    """Forget every signed list of this process (tests; a list is rebuilt on the next GET)."""
    _cache.clear()


def _fresh_seconds(signed: SignedList) -> float:
    """How long this process serves its copy before reading the rows again."""
    return min(
        CACHE_SHARE_MAX * signed.ttl,
        max(CACHE_SHARE * signed.ttl, BUILD_TIMES * signed.build_seconds),
    )


def _age(signed: SignedList) -> float:
    return time.monotonic() - signed.built_at


def _sign(bits: StatusBits, team_id: int, key: SigningKey, ttl: int, started: float) -> SignedList:
    signer = active_signer(key)
    iat = int(time.time())
    claims = {
        "sub": status_list_uri(team_id),
        "iat": iat,
        "exp": iat + EXP_TTLS * ttl,
        "ttl": ttl,
        "status_list": {"bits": 1, "lst": status_list_lst(bits.data)},
    }
    token = signer.sign(claims, typ=TYP)
    etag = '"' + hashlib.sha256(token.encode()).hexdigest()[:32] + '"'
    return SignedList(
        token=token,
        etag=etag,
        ttl=ttl,
        iat=iat,
        digest=bits.digest,
        kid=key.kid,
        alg=str(settings.PLANGATE_SIGNING_ALG),
        built_at=started,
        build_seconds=time.monotonic() - started,
    )


def _build(team_id: int, cached: SignedList | None) -> SignedList:
    started = time.monotonic()
    bits = team_status_bits(team_id)
    ttl = list_ttl(bits.bound_seconds)
    key = SigningKey.objects.filter(state=SigningKey.State.ACTIVE).first()
    if key is None:  # a read never creates the first key (that is the signing path's)
        if bits.size == 0:  # nothing was ever signed: no token names this list
            raise DomainError(Code.NOT_FOUND, f"Team {team_id} has no status list yet.")
        raise DomainError(Code.NO_SIGNING_KEY, "No signing key is active; try again shortly.")
    if (
        cached is not None
        and cached.digest == bits.digest
        and cached.kid == key.kid
        and cached.alg == settings.PLANGATE_SIGNING_ALG
        and cached.ttl == ttl
        and time.time() - cached.iat < ttl / 2
    ):
        # The same bits, recently signed: the same token, so the ETag holds and caches
        # revalidate with 304s. Half a ttl at most: with a cache's ttl on top, a guard
        # still receives a token at least 2.5 ttl from its exp.
        return dataclasses.replace(
            cached, built_at=started, build_seconds=time.monotonic() - started
        )
    return _sign(bits, team_id, key, ttl, started)


def status_list_signed(team_id: int) -> SignedList:
    """``team_id``'s signed list, from this process's copy while it is fresh (a quarter
    ``ttl``, longer for a list slow to build: ``_fresh_seconds``); DomainError
    ``not_found`` for an unknown team. While one thread rebuilds a team's list, the others
    serve the copy they have if it is younger than ``ttl``."""
    cached = _cache.get(team_id)
    if cached is not None and _age(cached) < _fresh_seconds(cached):
        return cached
    with _locks_guard:
        lock = _locks.setdefault(team_id, threading.Lock())
    if not lock.acquire(blocking=False):
        if cached is not None and _age(cached) < cached.ttl:
            return cached
        lock.acquire()
    try:
        cached = _cache.get(team_id)
        if cached is not None and _age(cached) < _fresh_seconds(cached):
            return cached
        signed = _build(team_id, cached)
        _cache[team_id] = signed
        return signed
    finally:
        lock.release()


# --- the view ------------------------------------------------------------------------------


def _problem(request: HttpRequest, error: DomainError) -> JsonResponse:
    body = problem_body(error.code, error.detail, errors=error.errors, instance=request.path)
    response = JsonResponse(body, status=error.status, content_type=PROBLEM_CONTENT_TYPE)
    for name, value in error.headers.items():
        response[name] = value
    return response


def _team_id(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and int(text) <= _TEAM_ID_MAX else None


@traced_view("plangate.status_list")
def status_list_view(request: HttpRequest, team_id: str) -> HttpResponse:
    """``GET /v1/status-lists/{team}``: the team's list as a ``statuslist+jwt``. No
    authentication: it names indices, never plans. HEAD answers the same headers."""
    if request.method not in ("GET", "HEAD"):
        refused = _problem(request, DomainError(Code.METHOD_NOT_ALLOWED))
        refused["Allow"] = "GET, HEAD"
        return refused
    team = _team_id(team_id)
    try:
        if team is None:
            raise DomainError(Code.NOT_FOUND, f"No status list for team {team_id}.")
        signed = status_list_signed(team)
    except DomainError as error:
        return _problem(request, error)
    except DatabaseError as error:
        if not is_database_unavailable(error):
            raise
        return _problem(request, database_unavailable_error())
    # What a cache may still serve: the ttl less the age of this process's copy of the bits,
    # so that no copy anywhere is older than ttl.
    max_age = max(0, signed.ttl - int(_age(signed)))
    headers = {
        "ETag": signed.etag,
        "Cache-Control": f"public, max-age={max_age}",
    }
    if signed.etag in _etags(request.headers.get("If-None-Match", "")):
        return HttpResponse(status=304, headers=headers)
    body = signed.token.encode()
    response = HttpResponse(
        b"" if request.method == "HEAD" else body, content_type=MEDIA_TYPE, headers=headers
    )
    response["Content-Length"] = str(len(body))
    return response


def _etags(header: str) -> set[str]:
    return {part.strip().removeprefix("W/") for part in header.split(",") if part.strip()}
