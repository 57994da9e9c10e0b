"""Watching the control plane's status feed, so that an admin's "stop" reaches a running
agent within its team's bound while its token is still valid (docs/decisions/0032).

A background thread polls ``GET /v1/plans/{id}/status`` at the pace the control plane
sets (``pollInterval``: half the team's bound), sending back the last ``ETag`` so that an
unchanged status costs a ``304``. A tool call never waits on it: on news the thread stops
the plan, and the next call reads the stop decision (one attribute, as for a refused
refresh).

- ``plan_revoked``, ``plan_expired``, ``user_disabled``, ``agent_disabled``: the plan is
  blocked for good with that code; its open ACP entries show ``cancelled``.
- ``token_invalid`` (the signing key of the token in use was revoked): the token is
  withdrawn, as when its key leaves the JWKS (decision 0020): calls get ``token_invalid``
  and the refresher asks for a token signed by another key at once; the control plane
  refuses to refresh a revoked key's token, which then blocks the plan for good.
- ``401 invalid_api_key``: the agent's API key was revoked or has expired. The guard can
  no longer refresh or report, and the key's owner asked it to stop: it is treated as a
  disabled agent (``agent_disabled``).
- Unreachable, throttled or failing (5xx): nothing changes; the guard keeps deciding with
  its valid token, as before the feed existed, and polls again at the same pace.

When the token carries a ``status`` claim and the control plane serves its team's status
list (guard.agent.status_list), the watch reads the list instead, every half of its
``ttl``, from a copy shared by the process's guards; the feed is not asked. A status other
than 0 stops the plan: the list says only "invalid", so the feed is asked once for the
code (``plan_revoked`` when it cannot say). The feed stays the way for a token without a
``status`` claim, for a control plane that answers the list with ``404`` (it predates the
list), and for an index the list does not reach. A list that cannot be read (unreachable,
5xx, a bad signature) changes nothing, as an unreachable feed changes nothing.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from guard.agent.http import ControlPlaneClient, ControlPlaneError, ControlPlaneUnavailable
from guard.agent.session import CallDecision, PlanState
from guard.agent.status_list import Reading, StatusListReader
from guard.decisions import Decision

__all__ = ["FEED_STOPS", "StatusWatcher"]

logger = logging.getLogger(__name__)

# The feed's codes that stop a plan for good, and the decision every later call gets.
FEED_STOPS: Final = {
    "plan_revoked": Decision.PLAN_REVOKED,
    "plan_expired": Decision.PLAN_EXPIRED,
    "user_disabled": Decision.USER_DISABLED,
    "agent_disabled": Decision.AGENT_DISABLED,
}
TOKEN_INVALID: Final = "token_invalid"  # noqa: S105 (a decision code, not a secret)
# Until the control plane has said how often (its first answer), and the limits on what it
# may say: a buggy or hostile answer can neither hammer it nor silence the watch.
DEFAULT_POLL_INTERVAL: Final = 5.0
MIN_POLL_INTERVAL: Final = 0.5
MAX_POLL_INTERVAL: Final = 30.0
# Each wait is drawn in [JITTER, 1] x the interval, so that guards started together spread
# out, and the bound (twice the interval) still holds with a poll lost on the way.
JITTER: Final = 0.8
# A flipped bit's one ask of the feed for the code waits this share of the list's ttl (at
# least MIN_CODE_ASK seconds), then stops the plan as plan_revoked: behind a cache the bit
# may take 1.85 ttl to arrive, and the bound is 2 ttl.
CODE_ASK_SHARE: Final = 0.15
MIN_CODE_ASK: Final = 1.0


class StatusWatcher:
    """Polls the status feed for the session's current plan.

    `current_plan()` returns the plan the session holds now; `block(plan, decision)` stops
    it for good (`Decider.block`); `withdraw_token(plan, reason)` marks its token as no
    longer trusted and has the refresher replace it.
    """

    def __init__(
        self,
        *,
        control_plane: ControlPlaneClient,
        current_plan: Callable[[], PlanState | None],
        block: Callable[[PlanState, CallDecision], None],
        withdraw_token: Callable[[PlanState, str], None],
        status_lists: StatusListReader | None = None,
    ) -> None:
        self._control_plane = control_plane
        self._current_plan = current_plan
        self._block = block
        self._withdraw_token = withdraw_token
        self._wake = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._etag: tuple[str, str | None, str] | None = None  # (plan id, kid, etag)
        self._lists = status_lists
        self.interval = DEFAULT_POLL_INTERVAL  # the feed's pace
        self.list_interval: float | None = None  # the list's, while the list is read
        self.polls = 0
        self.not_modified = 0
        self.list_reads = 0

    @property
    def next_interval(self) -> float:
        """How long the watch waits before its next look (before jitter)."""
        return self.interval if self.list_interval is None else self.list_interval

    def poll(self) -> bool:
        """Ask the feed once about the current plan; True when the answer stopped it (or
        withdrew its token). Never raises for a failed request: the guard goes on."""
        plan = self._current_plan()
        if plan is None or plan.blocked is not None or plan.ended:
            return False
        self.polls += 1  # every look, at the list or the feed
        reference = plan.token.claims.status
        if reference is not None and self._lists is not None:
            reading = self._lists.read(reference)
            if reading.reading in (Reading.VALID, Reading.UNKNOWN, Reading.STOPPED):
                self.list_reads += 1
                self.list_interval = min(
                    MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, reading.interval)
                )
                if reading.reading is Reading.STOPPED:
                    return self._listed_stop(plan, reading.status, 2 * reading.interval)
                token = plan.token
                if token.withdrawn is None and reading.key_withdrawn(token.kid, token.claims.iat):
                    self._withdraw_token(
                        plan, f"its signing key {token.kid} is no longer published (revoked)"
                    )
                    return True
                return False
        # No status claim, a control plane without lists (404), or an index past the list.
        self.list_interval = None
        return self._poll_feed(plan)

    def _listed_stop(self, plan: PlanState, status: int | None, ttl: float) -> bool:
        """The list says the plan's token is not valid: ask the feed once for the code,
        waiting at most `CODE_ASK_SHARE` x the list's ttl (at least a second), so that the
        stop stays within the bound when every guard of a team asks at once."""
        stop = CallDecision(
            Decision.PLAN_REVOKED,
            f"the control plane's status list marks the plan's token invalid (status {status})",
        )
        try:
            body, _ = self._control_plane.plan_status(
                plan.id, kid=plan.token.kid, timeout=max(MIN_CODE_ASK, CODE_ASK_SHARE * ttl)
            )
        except ControlPlaneError as error:
            if self._refused(plan, error):
                return True
        except ControlPlaneUnavailable as error:
            logger.info("plangate guard: the status feed is unreachable: %s", error)
        else:
            code = body.get("code") if body is not None else None
            if code == TOKEN_INVALID and body is not None:
                # The token's signing key was revoked: withdrawn, as the feed would have it
                # (the refresher asks for another token; a refused one blocks the plan).
                if plan.token.withdrawn is not None:
                    return False
                self._withdraw_token(plan, str(body.get("reason") or code)[:300])
                return True
            if isinstance(code, str) and code in FEED_STOPS:
                reason = str(body.get("reason") or code)[:300] if body else code
                stop = CallDecision(FEED_STOPS[code], f"the control plane says {reason}")
        logger.warning(
            "plangate guard: plan %s stopped by the status list: %s", plan.id, stop.code.value
        )
        self._block(plan, stop)
        return True

    def _poll_feed(self, plan: PlanState) -> bool:
        kid = plan.token.kid
        etag = (
            self._etag[2] if self._etag is not None and self._etag[:2] == (plan.id, kid) else None
        )
        try:
            body, new_etag = self._control_plane.plan_status(plan.id, kid=kid, etag=etag)
        except ControlPlaneError as error:
            return self._refused(plan, error)
        except ControlPlaneUnavailable as error:
            logger.info("plangate guard: the status feed is unreachable: %s", error)
            return False
        if new_etag is not None:
            self._etag = (plan.id, kid, new_etag)
        if body is None:
            self.not_modified += 1
            return False
        return self._news(plan, body)

    def _news(self, plan: PlanState, body: dict[str, Any]) -> bool:
        interval = body.get("pollInterval")
        if isinstance(interval, int | float) and math.isfinite(interval):
            self.interval = min(MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, float(interval)))
        code = body.get("code")
        reason = str(body.get("reason") or code)[:300]
        stop = FEED_STOPS.get(code) if isinstance(code, str) else None
        if stop is not None:
            logger.warning(
                "plangate guard: plan %s stopped by the control plane: %s", plan.id, code
            )
            self._block(plan, CallDecision(stop, f"the control plane says {reason}"))
            return True
        if code == TOKEN_INVALID and plan.token.withdrawn is None:
            self._withdraw_token(plan, reason)
            return True
        return False

    def _refused(self, plan: PlanState, error: ControlPlaneError) -> bool:
        if error.status == 401 and error.code == "invalid_api_key":
            self._block(
                plan,
                CallDecision(
                    Decision.AGENT_DISABLED,
                    "the control plane no longer accepts the agent's API key (revoked or"
                    f" expired): {error.detail}",
                ),
            )
            return True
        # Throttled, failing, or an answer this guard does not know: keep deciding.
        logger.info("plangate guard: the status feed answered %s", error)
        return False

    # --- the background thread ----------------------------------------------------------

    def start(self) -> None:
        with self._start_lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._loop, name="plangate-guard-status", daemon=True
            )
        self._thread.start()

    def wake(self) -> None:
        """Poll now (a new plan was declared)."""
        self._wake.set()

    def stop(self, timeout: float | None) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._closed:
            self._wake.clear()
            started = time.monotonic()
            try:
                self.poll()
            except Exception:  # pragma: no cover - keep the watch alive
                logger.exception("plangate guard: unexpected status feed failure")
            wait = self.next_interval * random.uniform(JITTER, 1.0) - (time.monotonic() - started)
            self._wake.wait(max(wait, 0.05))
