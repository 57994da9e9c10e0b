"""Keeping a plan's intent token fresh: refresh before expiry, back off on failures, and
notice a withdrawn signing key by refetching the JWKS at its max-age.

A tool call never waits on any of this: it only wakes the background thread (see
`Refresher.wake`) and reads whatever token the plan holds.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable
from typing import Final

from guard.agent.answer import AnswerVerifier
from guard.agent.errors import GuardError
from guard.agent.http import (
    ControlPlaneClient,
    ControlPlaneError,
    ControlPlaneUnavailable,
    JwksCache,
)
from guard.agent.session import CallDecision, PlanState
from guard.agent.verified import VerifiedToken
from guard.decisions import Decision

__all__ = ["EXPIRED_RETRY_DELAY", "MAX_RETRY_DELAY", "REFRESH_REFUSALS", "Refresher"]

logger = logging.getLogger(__name__)

# A refresh refused with one of these problem codes ends the plan: every later call is
# blocked with the mapped decision code.
REFRESH_REFUSALS: Final = {
    "plan_revoked": Decision.PLAN_REVOKED,
    "plan_expired": Decision.PLAN_EXPIRED,
    "user_disabled": Decision.USER_DISABLED,
    "unknown_user": Decision.USER_DISABLED,  # the member left the team
    "agent_disabled": Decision.AGENT_DISABLED,
    "policy_denied": Decision.POLICY_DENIED,
    # The policy now sends a step to a person that the plan's approval did not cover: the
    # plan cannot go on under this token; declaring it again asks for a new approval.
    "approval_required": Decision.POLICY_DENIED,
}
MAX_RETRY_DELAY: Final = 60.0
# Once the token has expired (or its key was withdrawn) every call is blocked, so a failed
# refresh is retried this often, jittered so that many guards do not return in step.
EXPIRED_RETRY_DELAY: Final = (0.5, 1.0)
_REFRESHER_MAX_SLEEP: Final = 30.0
# Floor between two key-set checks of the refresher, whatever the server's max-age says.
_JWKS_CHECK_FLOOR: Final = 0.5


class Refresher:
    """Refreshes the token of the session's current plan, on demand or from a background
    thread.

    `current_plan()` returns the plan the session holds now; `block(plan, decision)` stops
    a plan whose refresh was refused for good (its steps are cancelled and shown so);
    `wake` is set to make the background thread look now.
    """

    def __init__(
        self,
        *,
        control_plane: ControlPlaneClient,
        jwks: JwksCache,
        clock: Callable[[], float],
        ttl: int | None,
        accept: AnswerVerifier,
        current_plan: Callable[[], PlanState | None],
        block: Callable[[PlanState, CallDecision], None],
        wake: threading.Event,
    ) -> None:
        self._control_plane = control_plane
        self._jwks = jwks
        self._clock = clock
        self._ttl = ttl
        self._accept = accept
        self._current_plan = current_plan
        self._block = block
        self._wake = wake
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def wake(self) -> None:
        """Ask the background thread to look now (a call saw a refresh due)."""
        self._wake.set()

    def refresh(self) -> bool:
        """Refresh the current plan's token now; True on success."""
        plan = self._current_plan()
        if plan is None or plan.blocked is not None or plan.ended:
            return False
        return self._attempt(plan, plan.token, force=True)

    def refresh_if_due(self) -> bool:
        """Refresh when the token is within its refresh margin (or a retry is due), or at
        once when the key set, refetched at its max-age, no longer holds the token's key.
        True when a fresh token was installed."""
        plan = self._current_plan()
        if plan is None or plan.blocked is not None or plan.ended:
            return False
        if self._key_withdrawn(plan):
            return self._attempt(plan, plan.token, force=True)
        if self._clock() < plan.next_attempt_at:
            return False
        return self._attempt(plan, plan.token)

    def _key_withdrawn(self, plan: PlanState) -> bool:
        """Refetch the key set when its max-age has passed; True when the token in use was
        signed by a key it no longer lists (revoked, say), which has just been noticed."""
        token = plan.token
        if token.withdrawn is not None:
            return False
        keys = self._jwks.refetch_if_stale()
        if keys is None or token.kid in keys:
            return False
        token.withdrawn = f"its signing key {token.kid} is no longer published"
        token.refresh_at = -math.inf
        logger.warning(
            "plangate guard: the signing key of plan %s's token left the JWKS; refreshing",
            plan.id,
        )
        return True

    def withdraw(self, plan: PlanState, reason: str) -> None:
        """The control plane says the token in use can no longer be trusted (its signing key
        was revoked: the status feed): calls get ``token_invalid`` from now on, and the
        background thread asks at once for a token signed by another key."""
        token = plan.token
        if token.withdrawn is not None:
            return
        token.withdrawn = reason
        token.refresh_at = -math.inf
        plan.next_attempt_at = -math.inf
        logger.warning("plangate guard: plan %s's token was withdrawn: %s", plan.id, reason)
        self._wake.set()

    def _attempt(self, plan: PlanState, seen: VerifiedToken, *, force: bool = False) -> bool:
        with plan.refresh_lock:
            if plan.token is not seen:
                return True  # another thread refreshed meanwhile
            if plan.blocked is not None or plan.ended or self._current_plan() is not plan:
                return False
            now = self._clock()
            if not force and now < plan.next_attempt_at:
                return False
            try:
                body = self._control_plane.refresh(plan.id, seen.token, ttl=self._ttl)
                _, token = self._accept(body, plan.document, plan.hash, expected_id=plan.id)
            except ControlPlaneError as error:
                self._refused(plan, seen, now, error)
                logger.warning("plangate guard: refreshing plan %s failed: %s", plan.id, error)
                return False
            except (ControlPlaneUnavailable, GuardError) as error:
                _retry_later(plan, now, str(error), None)
                logger.warning("plangate guard: refreshing plan %s failed: %s", plan.id, error)
                return False
            plan.install(token)
            plan.refresh_error = None
            plan.retry_delay = 0.0
            # A token already within its margin (a short lifetime, a skewed clock) is not
            # refreshed again and again in a loop.
            plan.next_attempt_at = max(token.refresh_at, now + EXPIRED_RETRY_DELAY[0])
            return True

    def _refused(
        self, plan: PlanState, seen: VerifiedToken, now: float, error: ControlPlaneError
    ) -> None:
        refusal = REFRESH_REFUSALS.get(error.code)
        if refusal is not None and error.status in (403, 410):
            self._block(
                plan,
                CallDecision(
                    refusal, f"the control plane refused to refresh the plan: {error.detail}"
                ),
            )
        elif error.transient:
            _retry_later(plan, now, str(error), error.retry_after)
        elif seen.withdrawn is not None:
            # Asking again cannot help, and the token may not serve out: its key was
            # withdrawn (the control plane refuses such a token as well).
            self._block(
                plan,
                CallDecision(
                    Decision.TOKEN_INVALID,
                    f"the intent token can no longer be trusted ({seen.withdrawn})"
                    f" and the control plane refused to refresh it: {error.detail}",
                ),
            )
        else:
            # Asking again cannot help (a revoked API key, a mismatch): the token serves
            # until it expires.
            plan.refresh_error = f"refresh refused: {error}"
            plan.next_attempt_at = math.inf

    # --- the background thread ----------------------------------------------------------

    def start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._loop, name="plangate-guard-refresher", daemon=True
            )
        self._thread.start()

    def stop(self, timeout: float | None) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._closed:
            plan = self._current_plan()
            wait = _REFRESHER_MAX_SLEEP
            if plan is not None and plan.blocked is None and not plan.ended:
                now = self._clock()
                if now >= plan.next_attempt_at or now >= self._jwks.next_check_at:
                    try:
                        self.refresh_if_due()
                    except Exception:  # pragma: no cover - keep the refresher alive
                        logger.exception("plangate guard: unexpected refresh failure")
                    if plan.next_attempt_at <= self._clock():
                        # Nothing moved the next attempt forward (a clock that stands
                        # still, a plan replaced meanwhile): never spin.
                        self._wake.wait(1.0)
                        continue
                    now = self._clock()
                jwks_wait = max(self._jwks.next_check_at - now, _JWKS_CHECK_FLOOR)
                wait = min(wait, plan.next_attempt_at - now, jwks_wait)
            self._wake.wait(max(wait, 0.01))
            self._wake.clear()


def _retry_later(plan: PlanState, now: float, error: str, retry_after: float | None) -> None:
    token = plan.token
    honoured = min(MAX_RETRY_DELAY, retry_after or 0.0)
    if token.withdrawn is not None or now >= token.expires_at:
        # Every call is blocked until a refresh succeeds: ask again within a second, so
        # calls resume about a second after the control plane is back.
        delay = max(random.uniform(*EXPIRED_RETRY_DELAY), honoured)
    else:
        plan.retry_delay = min(MAX_RETRY_DELAY, max(1.0, plan.retry_delay * 2))
        delay = max(plan.retry_delay, honoured)
        delay = min(delay, max(1.0, token.expires_at - now))  # try again at expiry
    plan.refresh_error = error
    plan.next_attempt_at = now + delay
