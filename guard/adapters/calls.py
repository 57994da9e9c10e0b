"""What every framework adapter asks of the guard, for a `Guard` or an `AsyncGuard` alike,
without blocking an event loop: decide a call after any declaration in flight, declare,
and collect a person's decision on a plan that awaited approval."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any, NoReturn

from guard.agent.async_guard import AsyncGuard
from guard.agent.errors import GuardError
from guard.agent.guard import Guard
from guard.agent.session import CallDecision
from guard.agent.status import DeclaredPlan, GuardStatus
from guard.agent.tools import declare_plan_result
from guard.decisions import Decision

__all__ = ["AnyGuard", "collect_decision", "decide", "decision_answer", "declare"]

AnyGuard = Guard | AsyncGuard


async def decide(guard: AnyGuard, tool: str, args: Mapping[str, Any]) -> CallDecision:
    """Decide a call after any declaration in flight, the wait off the event loop."""
    if isinstance(guard, AsyncGuard):
        return await guard.decide(tool, args)
    if guard.declaration_in_flight:
        await asyncio.to_thread(guard.wait_for_declaration)
    return guard.check(tool, args, wait=False)


async def declare(
    guard: AnyGuard, arguments: object, approval_wait_seconds: float | None = None
) -> dict[str, Any]:
    """`Guard.handle_declare_plan`, off the event loop (0 for `approval_wait_seconds`: an
    adapter that pauses its run itself while the person decides)."""
    if isinstance(guard, AsyncGuard):
        return await guard.handle_declare_plan(
            arguments, approval_wait_seconds=approval_wait_seconds
        )
    return await asyncio.to_thread(
        functools.partial(guard.handle_declare_plan, approval_wait_seconds=approval_wait_seconds),
        arguments,
    )


def decision_answer(
    guard: Guard, pending: Mapping[str, Any], wait_seconds: float = 0.0
) -> dict[str, Any]:
    """The ``declare_plan`` answer of a plan that awaited approval (`pending`, the answer it
    had): the approved plan, the approver's reason, or ``approval_pending`` still (after
    `wait_seconds`)."""
    try:
        declared = guard.poll_approval(wait_seconds)
    except GuardError as error:
        return _not_collected(guard.status(), pending, error)
    return declare_plan_result(lambda _: declared, {})


async def collect_decision(
    guard: AnyGuard, pending: Mapping[str, Any], wait_seconds: float = 0.0
) -> dict[str, Any]:
    """`decision_answer`, off the event loop."""
    if not isinstance(guard, AsyncGuard):
        return await asyncio.to_thread(decision_answer, guard, pending, wait_seconds)
    try:
        declared: DeclaredPlan = await guard.poll_approval(wait_seconds)
    except GuardError as error:
        return _not_collected(guard.status(), pending, error)
    return declare_plan_result(lambda _: declared, {})


def _not_collected(
    status: GuardStatus, pending: Mapping[str, Any], error: GuardError
) -> dict[str, Any]:
    if error.code == Decision.NO_PLAN.value and status.plan_id == pending.get("planId"):
        # The application collected the decision itself (poll_approval): the plan is in force.
        return {
            "ok": True,
            "planId": status.plan_id,
            "detail": "The plan is declared. Only calls that match one of its steps will run.",
        }

    def refuse(_: object) -> NoReturn:
        raise error

    return declare_plan_result(refuse, {})
