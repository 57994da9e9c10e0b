"""The guard's view of the control plane: its REST API over httpx, and a JWKS cache.

Nothing here runs on the path of a tool call: declaring, refreshing, fetching keys and
posting decision batches all happen at declare time or in the guard's background threads.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx

from guard.dpop import DpopKey
from guard.jwk import KeySet
from guard.tracing import decision_tracer, inject_trace_context

__all__ = [
    "ControlPlaneClient",
    "ControlPlaneError",
    "ControlPlaneUnavailable",
    "JwksCache",
]

USER_AGENT: Final = "plangate-guard/1"
DEFAULT_TIMEOUT: Final = 10.0
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)", re.IGNORECASE)


class ControlPlaneError(Exception):
    """The control plane answered with an RFC 9457 problem (or another non-2xx status).

    `code` is the problem's stable machine code (``plan_revoked``, ``policy_denied``...), or
    ``http_<status>`` when the body is not a problem document.
    """

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors or []
        self.retry_after = retry_after
        super().__init__(f"{status} {code}: {detail}")

    @property
    def transient(self) -> bool:
        """Worth retrying later: throttled or a server-side failure."""
        return self.status == 429 or self.status >= 500


class ControlPlaneUnavailable(Exception):
    """The control plane could not be reached, or answered something that is not JSON."""


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _problem(response: httpx.Response) -> ControlPlaneError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("code"), str):
        errors = body.get("errors")
        return ControlPlaneError(
            response.status_code,
            body["code"],
            str(body.get("detail") or body.get("title") or ""),
            errors=[error for error in errors if isinstance(error, dict)]
            if isinstance(errors, list)
            else None,
            retry_after=_retry_after(response),
        )
    return ControlPlaneError(
        response.status_code,
        f"http_{response.status_code}",
        response.reason_phrase or "unexpected response",
        retry_after=_retry_after(response),
    )


class ControlPlaneClient:
    """Thin, thread-safe client of the agent-facing REST API (v1).

    Pass `http_client` to share a configured ``httpx.Client`` (it is then not closed by
    `close()`), or `transport` to plug in any httpx transport (``httpx.WSGITransport`` in
    tests, a proxy...).
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        dpop_key: DpopKey | None = None,
        dpop_url: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._api_key = api_key
        # With a key, every request carries a DPoP proof by it (RFC 9449): a declaration's
        # binds the plan's tokens to the key, the others prove the holder of a bound plan
        # (the control plane ignores them for an unbound one).
        self.dpop_key = dpop_key
        # A proof names the control plane by its public URL, the issuer's (`dpop_url`),
        # which the server knows whatever proxy is in between; by default `url`.
        self._dpop_url = (dpop_url or url).rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        self._owns_client = http_client is None
        self._http = http_client or httpx.Client(transport=transport, timeout=timeout)

    def close(self) -> None:
        if self._owns_client:
            self._http.close()

    def _request(
        self, method: str, path: str, body: object = None, *, bearer: str | None = None
    ) -> httpx.Response:
        headers = self._headers
        if bearer is not None:
            headers = {**headers, "Authorization": f"Bearer {bearer}"}
        headers = self._with_proof(headers, method, path, bearer)
        if decision_tracer() is not None:  # the agent's trace goes on in the control plane
            headers = dict(headers)
            inject_trace_context(headers)
        content = None
        if body is not None:
            headers = {**headers, "Content-Type": "application/json"}
            content = json.dumps(body, separators=(",", ":"))
        try:
            return self._http.request(method, self.url + path, headers=headers, content=content)
        except httpx.HTTPError as error:
            raise ControlPlaneUnavailable(f"{method} {path}: {error}") from error

    def _with_proof(
        self, headers: dict[str, str], method: str, path: str, bearer: str | None = None
    ) -> dict[str, str]:
        if self.dpop_key is None:
            return headers
        proof = self.dpop_key.proof(
            htm=method,
            htu=self._dpop_url + path,
            access_token=bearer if bearer is not None else self._api_key,
        )
        return {**headers, "DPoP": proof}

    def _json(
        self,
        method: str,
        path: str,
        body: object,
        expected: int | tuple[int, ...],
        *,
        bearer: str | None = None,
    ) -> dict[str, Any]:
        response = self._request(method, path, body, bearer=bearer)
        if response.status_code not in (expected if isinstance(expected, tuple) else (expected,)):
            raise _problem(response)
        try:
            data = response.json()
        except ValueError as error:
            raise ControlPlaneUnavailable(f"{method} {path}: the answer is not JSON") from error
        if not isinstance(data, dict):
            raise ControlPlaneUnavailable(f"{method} {path}: the answer is not a JSON object")
        return data

    def declare(self, plan: Mapping[str, Any], *, ttl: int | None = None) -> dict[str, Any]:
        """POST /v1/plans: ``{id, token, planHash, expiresAt, policy, reportArguments}``
        (201), or, for a plan a policy's ``review`` rule sends to a person, ``{id, status:
        "pending_approval", review}`` (202, no token yet: see `approval_token`)."""
        body: dict[str, Any] = {"plan": plan}
        if ttl is not None:
            body["ttl"] = ttl
        return self._json("POST", "/v1/plans", body, (201, 202))

    def approval_token(self, plan_id: str) -> dict[str, Any]:
        """POST /v1/plans/{id}/token (no body): the same answer as a 201 declaration once a
        person approved the plan. Raises ControlPlaneError ``approval_pending`` (409, with
        its ``Retry-After``), ``approval_denied`` (403, the approver's reason as detail) or
        ``approval_expired`` (410)."""
        return self._json("POST", f"/v1/plans/{plan_id}/token", None, 200)

    def delegate(
        self,
        plan_id: str,
        plan: Mapping[str, Any],
        *,
        agent: str | None = None,
        ttl: int | None = None,
        jkt: str | None = None,
    ) -> dict[str, Any]:
        """POST /v1/plans/{id}/delegations: the declaration's 201 answer for a child plan,
        plus ``parent`` ``{id, planHash}``, ``agent`` and ``reserved``; `jkt` binds the
        child's tokens to that key (the receiving guard's)."""
        body: dict[str, Any] = {"plan": plan}
        if agent is not None:
            body["agent"] = agent
        if jkt is not None:
            body["jkt"] = jkt
        if ttl is not None:
            body["ttl"] = ttl
        return self._json("POST", f"/v1/plans/{plan_id}/delegations", body, 201)

    def refresh(self, plan_id: str, token: str, *, ttl: int | None = None) -> dict[str, Any]:
        """POST /v1/plans/{id}/refresh: the same shape as `declare`."""
        body: dict[str, Any] = {"token": token}
        if ttl is not None:
            body["ttl"] = ttl
        return self._json("POST", f"/v1/plans/{plan_id}/refresh", body, 200)

    def post_events(
        self, plan_id: str, batch: Mapping[str, Any], *, token: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/plans/{id}/events: ``{events, displayUpdates, argumentsStored, lost,
        duplicate}`` (202 stored, 200 a batch stored before). With `token` (the plan's
        intent token) the batch is sent with it instead of the API key, which the control
        plane refused (docs/decisions/0054)."""
        return self._json("POST", f"/v1/plans/{plan_id}/events", batch, (202, 200), bearer=token)

    def plan_status(
        self,
        plan_id: str,
        *,
        kid: str | None = None,
        etag: str | None = None,
        timeout: float | None = None,
    ) -> tuple[dict[str, Any] | None, str | None]:
        """GET /v1/plans/{id}/status: ``(status or None when 304, etag)``; the status is
        ``{plan, status, code, reason, boundSeconds, pollInterval}``. `timeout` (seconds)
        replaces the client's for this request."""
        path = f"/v1/plans/{plan_id}/status"
        headers = self._with_proof(dict(self._headers), "GET", path)
        if etag:
            headers["If-None-Match"] = etag
        params = {"kid": kid} if kid else None
        try:
            response = self._http.get(
                self.url + path,
                headers=headers,
                params=params,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.HTTPError as error:
            raise ControlPlaneUnavailable(f"GET {path}: {error}") from error
        new_etag = response.headers.get("ETag")
        if response.status_code == 304:
            return None, new_etag or etag
        if response.status_code != 200:
            raise _problem(response)
        try:
            body = response.json()
        except ValueError as error:
            raise ControlPlaneUnavailable(f"GET {path}: the answer is not JSON") from error
        if not isinstance(body, dict):
            raise ControlPlaneUnavailable(f"GET {path}: the answer is not a JSON object")
        return body, new_etag

    def jwks(self, etag: str | None = None) -> tuple[dict[str, Any] | None, str | None, float]:
        """GET /v1/keys/jwks: ``(document or None when 304, etag, max_age seconds)``."""
        # Public keys need no credential: the API key is not sent where it is not needed.
        headers = {
            "Accept": "application/jwk-set+json, application/json",
            "User-Agent": USER_AGENT,
        }
        if etag:
            headers["If-None-Match"] = etag
        try:
            response = self._http.get(self.url + "/v1/keys/jwks", headers=headers)
        except httpx.HTTPError as error:
            raise ControlPlaneUnavailable(f"GET /v1/keys/jwks: {error}") from error
        match = _MAX_AGE.search(response.headers.get("Cache-Control", ""))
        max_age = float(match.group(1)) if match else 0.0
        new_etag = response.headers.get("ETag")
        if response.status_code == 304:
            return None, new_etag or etag, max_age
        if response.status_code != 200:
            raise _problem(response)
        try:
            document = response.json()
        except ValueError as error:
            raise ControlPlaneUnavailable("GET /v1/keys/jwks: the answer is not JSON") from error
        if not isinstance(document, dict):
            raise ControlPlaneUnavailable("GET /v1/keys/jwks: the answer is not a JWK Set")
        return document, new_etag, max_age


class JwksCache:
    """The control plane's verification keys, cached.

    The set is fetched on first use, again when older than the server's ``max-age`` (when a
    token is verified, and from the guard's refresher through `refetch_if_stale`, so that a
    withdrawn key is noticed), and again when a token names a key id the set does not hold
    (a key rotated in since), but never more than once per `min_refetch_interval` seconds: a
    stream of tokens with made-up key ids cannot turn the guard into a load generator
    against the control plane.
    """

    def __init__(
        self,
        fetch: Callable[[str | None], tuple[dict[str, Any] | None, str | None, float]],
        *,
        clock: Callable[[], float] = time.time,
        min_refetch_interval: float = 30.0,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._min_refetch_interval = min_refetch_interval
        self._lock = threading.Lock()
        self._keys: KeySet | None = None
        self._etag: str | None = None
        self._fetched_at = float("-inf")
        self._fresh_until = float("-inf")
        self.fetches = 0

    def _refetch(self, now: float) -> None:
        self.fetches += 1
        self._fetched_at = now
        document, self._etag, max_age = self._fetch(self._etag if self._keys else None)
        if document is not None:
            self._keys = KeySet(document)
        self._fresh_until = now + max_age

    @property
    def next_check_at(self) -> float:
        """When `refetch_if_stale` will next ask the control plane."""
        return max(self._fresh_until, self._fetched_at + self._min_refetch_interval)

    def refetch_if_stale(self) -> KeySet | None:
        """Refetch the set once it is older than its max-age (and the refetch interval has
        passed since the last attempt). The refetched set, or None when nothing was asked or
        the control plane could not answer (the cached set then stays)."""
        with self._lock:
            now = self._clock()
            if self._keys is None or now < self.next_check_at:
                return None
            try:
                self._refetch(now)
            except (ControlPlaneUnavailable, ControlPlaneError):
                return None
            return self._keys

    def keys_for(self, kid: object) -> KeySet:
        """A key set to verify a token whose header names `kid`.

        Raises ControlPlaneUnavailable / ControlPlaneError only when no key set was ever
        fetched; a failed refetch keeps the cached set.
        """
        with self._lock:
            now = self._clock()
            if self._keys is None:
                self._refetch(now)
            elif (
                now >= self._fresh_until or kid not in self._keys
            ) and now - self._fetched_at >= self._min_refetch_interval:
                # A failed refetch keeps what we have; verification then decides.
                with contextlib.suppress(ControlPlaneUnavailable, ControlPlaneError):
                    self._refetch(now)
            assert self._keys is not None
            return self._keys
