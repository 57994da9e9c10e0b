"""Showing the plan's progress to the agent's user as ACP ``session/update`` notifications,
and attaching what was shown to the decision log."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from guard.agent import acp
from guard.agent.reporter import DecisionReporter

__all__ = ["PlanDisplay", "ShownPlan"]

logger = logging.getLogger(__name__)


class ShownPlan(Protocol):
    """What the display reads of a plan: a declared one (`PlanState`) or one awaiting a
    person's approval (`AwaitingPlan`)."""

    @property
    def id(self) -> str: ...

    @property
    def document(self) -> dict[str, Any]: ...

    @property
    def statuses(self) -> list[str]: ...


class PlanDisplay:
    """Publishes each state of a plan, numbered so that the newest state shown wins when
    threads (a call, the refresher) publish at the same time.

    `lock` is the guard's lock over budgets and statuses: a state and its sequence number
    are taken together under it.
    """

    def __init__(
        self,
        *,
        session_id: str,
        sink: Callable[[dict[str, Any]], object] | None,
        plan_updates: bool,
        reporter: DecisionReporter | None,
        report_updates: bool,
        lock: threading.Lock,
        clock: Callable[[], float],
    ) -> None:
        self.session_id = session_id
        self.plan_updates = plan_updates
        self._sink = sink
        self._reporter = reporter
        # Only what was shown is reported: without a sink, nothing reached the user.
        self._report_updates = report_updates and reporter is not None and sink is not None
        self._lock = lock
        self._clock = clock
        self._emit_lock = threading.Lock()
        self._sequence = 0
        self._emitted_sequence = 0

    def publish(self, plan: ShownPlan, *, removed: bool = False) -> None:
        """Show the plan's current state (or its removal) to the user, newest first wins."""
        if self._sink is None and not self._report_updates:
            return
        with self._lock:
            statuses = tuple(plan.statuses)
            self._sequence += 1
            sequence = self._sequence
        if removed:
            params = acp.plan_removed_params(session_id=self.session_id, plan_id=plan.id)
        else:
            params = acp.plan_update_params(
                session_id=self.session_id,
                plan_id=plan.id,
                goal=plan.document["goal"],
                steps=plan.document["steps"],
                budgets=plan.document.get("budgets", ()),
                statuses=statuses,
                plan_updates=self.plan_updates,
                # Only while it awaits: once approved (or dropped) there is nothing to do there.
                approval_url=getattr(plan, "approval_url", None)
                if acp.AWAITING_APPROVAL in statuses
                else None,
            )
        with self._emit_lock:
            if sequence <= self._emitted_sequence:
                return  # a newer state has been shown already
            self._emitted_sequence = sequence
            if self._sink is not None:
                try:
                    self._sink(acp.notification(params))
                except Exception:
                    logger.exception("plangate guard: the ACP sink failed")
            if self._report_updates and self._reporter is not None:
                self._reporter.display(plan.id, self._clock(), params)
