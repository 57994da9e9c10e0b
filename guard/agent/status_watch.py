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
        self.interval = DEFAULT_POLL_INTERVAL
        self.polls = 0
        self.not_modified = 0

    def poll(self) -> bool:
        """Ask the feed once about the current plan; True when the answer stopped it (or
        withdrew its token). Never raises for a failed request: the guard goes on."""
        plan = self._current_plan()
        if plan is None or plan.blocked is not None or plan.ended:
            return False
        kid = plan.token.kid
        etag = (
            self._etag[2] if self._etag is not None and self._etag[:2] == (plan.id, kid) else None
        )
        self.polls += 1
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
            wait = self.interval * random.uniform(JITTER, 1.0) - (time.monotonic() - started)
            self._wake.wait(max(wait, 0.05))
