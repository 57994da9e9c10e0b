"""The guard for asyncio applications: the same session as `Guard`, awaited.

    from guard import AsyncGuard

    async with AsyncGuard("http://localhost:8000", api_key) as guard:
        await guard.declare(plan)            # or: await guard.handle_declare_plan(model_args)

        @guard.tool()
        async def github_get_issue(repo: str, number: int) -> dict: ...

        issue = await github_get_issue("acme/app", 7)   # checked, awaited, then completed

An `AsyncGuard` wraps a `Guard` and adds no rule of its own: every decision, code, budget
and status comes from the wrapped guard. `check` is the same synchronous, I/O-free call;
what touches the network (declaring, the wait for a person's approval, refreshing, polling
the status feed, flushing the decision log, closing) runs in a worker thread
(`asyncio.to_thread`), so the event loop never waits for the control plane. The token
refresher, the status watch and the decision log already run in the guard's own threads.

Cancelling an awaited `declare` (or `poll_approval`) cuts a wait for approval short at its
next pause, leaving the plan awaiting approval as ``approval_pending`` would (declaring the
same plan again or `poll_approval` picks it up); a request already sent is let finish, so
when `CancelledError` reaches the caller the guard is settled: the plan is installed if the
control plane had issued its token, else the session is as it was. `status()` tells.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar

from guard.agent.delegation import Delegation
from guard.agent.errors import GUARD_CLOSED, CallBlocked, GuardError
from guard.agent.guard import Guard
from guard.agent.reporter import ReporterStats
from guard.agent.session import CallDecision
from guard.agent.status import DeclaredPlan, GuardStatus

__all__ = ["AsyncGuard"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class _Wait:
    """One blocking call sent to a worker thread: set when its awaiting task was cancelled
    (or the guard is closing), so that a wait for approval in it stops at its next pause."""

    __slots__ = ("closing", "stop")

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.closing = False


class _WaitCancelled(Exception):
    """Raised in the worker thread when the task awaiting it was cancelled."""


def _stopped(wait: _Wait) -> Exception:
    """Why a blocking call stops: the guard closed (``guard_closed``, as `Guard.close`
    ends a wait), or its task was cancelled: not a GuardError, so that a plan awaiting
    approval stays awaiting, as with ``approval_pending``."""
    if wait.closing:
        return GuardError(GUARD_CLOSED, "the guard closed while the plan awaited approval")
    return _WaitCancelled()


# The blocking call the current worker thread runs for (asyncio.to_thread carries the
# context into the thread): its approval wait checks it at every pause.
_CURRENT_WAIT: contextvars.ContextVar[_Wait | None] = contextvars.ContextVar(
    "plangate_async_wait", default=None
)


class AsyncGuard:
    """One agent session's guard for asyncio code: `Guard`'s API, with the calls that reach
    the control plane awaited.

    Takes the same arguments as `Guard` (see its docstring). `approval_sleep`, when given,
    is called in the worker thread between two asks for a person's decision.
    """

    def __init__(self, url: str, api_key: str, **options: Any) -> None:
        self._sleep: Callable[[float], object] | None = options.pop("approval_sleep", None)
        self._waits: set[_Wait] = set()
        self._closing = threading.Event()
        self._guard = Guard(url, api_key, approval_sleep=self._approval_sleep, **options)

    @property
    def guard(self) -> Guard:
        """The `Guard` this wraps, the same session: for code already running in a worker
        thread of its own (a LangGraph node declaring for the run), which may call its
        blocking methods directly."""
        return self._guard

    @property
    def url(self) -> str:
        return self._guard.url

    @property
    def issuer(self) -> str:
        return self._guard.issuer

    @property
    def session_id(self) -> str:
        """The ACP session id put in the notifications."""
        return self._guard.session_id

    @session_id.setter
    def session_id(self, value: str) -> None:
        self._guard.session_id = value

    # --- running the blocking calls off the event loop ---------------------------------

    async def _off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` in a worker thread. On cancellation, stop its wait for approval
        and let it finish before re-raising, so that the guard is settled when the caller
        sees `CancelledError`."""
        wait = _Wait()

        def run() -> T:
            if wait.stop.is_set():  # cancelled or closed before the thread started
                raise _stopped(wait)
            return fn(*args)

        token = _CURRENT_WAIT.set(wait)
        try:
            task = asyncio.ensure_future(asyncio.to_thread(run))  # copies the context
        finally:
            _CURRENT_WAIT.reset(token)
        self._waits.add(wait)
        task.add_done_callback(lambda _: self._waits.discard(wait))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            wait.stop.set()
            await asyncio.wait({task})  # a second cancellation stops waiting for it
            if not task.cancelled():
                task.exception()  # retrieved: the caller asked for the cancellation
            raise

    def _approval_sleep(self, seconds: float) -> None:
        """The pause between two asks for a person's decision (in the worker thread):
        cut short when the awaiting task is cancelled or the guard closes."""
        wait = _CURRENT_WAIT.get()
        if self._sleep is not None:
            self._sleep(seconds)
        elif wait is not None:
            wait.stop.wait(seconds)
        else:
            self._closing.wait(seconds)
        if wait is not None and wait.stop.is_set():
            raise _stopped(wait)

    # --- declaring --------------------------------------------------------------------

    async def declare(
        self, plan: object, *, approval_wait_seconds: float | None = None
    ) -> DeclaredPlan:
        """`Guard.declare`, awaited: the request and any wait for a person's approval (up to
        `approval_wait_seconds`) run off the event loop; raises as `Guard.declare` does.
        The declaration is in flight (`decide` waits for it) from this call on, before the
        worker thread starts."""
        declare = functools.partial(
            self._guard.declare, approval_wait_seconds=approval_wait_seconds
        )
        with self._guard.declaring():
            return await self._off_loop(declare, plan)

    async def delegate(
        self,
        plan: object,
        to: str | None = None,
        ttl: int | None = None,
        *,
        jkt: str | None = None,
    ) -> Delegation:
        """`Guard.delegate`, awaited: the request runs off the event loop."""
        return await self._off_loop(functools.partial(self._guard.delegate, plan, to, ttl, jkt=jkt))

    @property
    def dpop_jkt(self) -> str | None:
        """`Guard.dpop_jkt`: what a delegating agent names to bind a child to this guard."""
        return self._guard.dpop_jkt

    async def adopt(self, delegation: Delegation) -> DeclaredPlan:
        """`Guard.adopt`, awaited: the key set is fetched off the event loop."""
        return await self._off_loop(self._guard.adopt, delegation)

    @classmethod
    async def from_delegation(
        cls, delegation: Delegation, api_key: str, **options: Any
    ) -> AsyncGuard:
        """`Guard.from_delegation` for asyncio code."""
        options.setdefault("issuer", delegation.issuer)
        guard = cls(delegation.url, api_key, **options)
        try:
            await guard.adopt(delegation)
        except BaseException:
            await guard.aclose()
            raise
        return guard

    async def handle_declare_plan(
        self, arguments: object, *, approval_wait_seconds: float | None = None
    ) -> dict[str, Any]:
        """`Guard.handle_declare_plan`, awaited: the ``declare_plan`` tool result for the
        model (a refused plan is explained in it, never raised)."""
        handle = functools.partial(
            self._guard.handle_declare_plan, approval_wait_seconds=approval_wait_seconds
        )
        with self._guard.declaring():
            return await self._off_loop(handle, arguments)

    def declaring(self) -> AbstractContextManager[None]:
        """`Guard.declaring`: mark a declaration in flight (an adapter that sees the model's
        ``declare_plan`` call before its siblings start)."""
        return self._guard.declaring()

    @property
    def declaration_in_flight(self) -> bool:
        return self._guard.declaration_in_flight

    async def wait_for_declaration(self, timeout: float | None = None) -> bool:
        """`Guard.wait_for_declaration`, awaited off the event loop (at once when no
        declaration is in flight)."""
        if not self._guard.declaration_in_flight:
            return True
        return await asyncio.to_thread(self._guard.wait_for_declaration, timeout)

    async def poll_approval(self, wait_seconds: float = 0.0) -> DeclaredPlan:
        """`Guard.poll_approval`, awaited: ask again about the plan awaiting approval."""
        return await self._off_loop(self._guard.poll_approval, wait_seconds)

    # --- deciding ---------------------------------------------------------------------

    def check(self, tool: str, args: Mapping[str, Any]) -> CallDecision:
        """Decide a call locally (`Guard.check`): synchronous, never touches the network,
        and never waits, not even for a declaration in flight (the event loop would stop
        with it): `decide` waits."""
        return self._guard.check(tool, args, wait=False)

    async def decide(self, tool: str, args: Mapping[str, Any]) -> CallDecision:
        """`check`, after waiting (off the event loop, up to ``declare_wait_seconds``) for a
        declaration in flight on this session: the model's sibling of a ``declare_plan``
        call is decided under the plan it declared, not blocked as ``no_plan``."""
        if self._guard.declaration_in_flight:
            await self.wait_for_declaration()
        return self._guard.check(tool, args, wait=False)

    async def call(
        self, tool: str, args: Mapping[str, Any], fn: Callable[..., Awaitable[T] | T]
    ) -> T:
        """Check the call, run ``fn(**args)`` when allowed and await its result when it is
        awaitable (a coroutine function); only once it has returned is its step completed.

        A plain function is called on the event loop's thread, as the application wrote
        it. Raises CallBlocked (with `.decision`) when the call is not allowed. When the
        tool raises (or is cancelled), the call is recorded as failed (`Guard.failed`): it
        does not count as its step having run.
        """
        decision = await self.decide(tool, args)
        if not decision.allowed:
            raise CallBlocked(decision)
        try:
            result = fn(**args)
            if inspect.isawaitable(result):
                result = await result
        except BaseException:
            self._guard.failed(decision)
            raise
        self._guard.completed(decision)
        return result

    def tool(self, name: str | None = None) -> Callable[[F], F]:
        """Decorator (`Guard.tool`): on an ``async def`` the call is checked when awaited and
        its step completed only once the coroutine returned; a plain function stays
        synchronous. Raises CallBlocked when the call is not allowed."""
        return self._guard.tool(name)

    def completed(self, decision: CallDecision) -> None:
        """Record that an allowed call has returned (`call` and `tool` do it for you)."""
        self._guard.completed(decision)

    def failed(self, decision: CallDecision) -> None:
        """Record that an allowed call raised (`Guard.failed`; `call` and `tool` do it)."""
        self._guard.failed(decision)

    # --- refreshing and the status feed -------------------------------------------------

    async def refresh(self) -> bool:
        """`Guard.refresh`, awaited: refresh the token now."""
        return await self._off_loop(self._guard.refresh)

    async def refresh_if_due(self) -> bool:
        """`Guard.refresh_if_due`, awaited."""
        return await self._off_loop(self._guard.refresh_if_due)

    async def poll_status(self) -> bool:
        """`Guard.poll_status`, awaited: ask the status feed about the plan now."""
        return await self._off_loop(self._guard.poll_status)

    # --- status and reporting -----------------------------------------------------------

    def status(self) -> GuardStatus:
        """Where the session stands (`Guard.status`): no I/O."""
        return self._guard.status()

    def report_display_update(self, message: Mapping[str, Any]) -> None:
        """Attach an ACP ``session/update`` the agent showed its user to the decision log."""
        self._guard.report_display_update(message)

    def reporter_stats(self) -> ReporterStats | None:
        return self._guard.reporter_stats()

    async def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait, off the event loop, until the queued decisions are posted (or dropped)."""
        return await self._off_loop(self._guard.flush, timeout)

    # --- ending -----------------------------------------------------------------------

    def end_plan(self) -> None:
        """End the current plan (`Guard.end_plan`): no I/O, the decision log posts later."""
        self._guard.end_plan()

    def new_session(self, session_id: str | None = None) -> None:
        """End the plan and start a new session (`Guard.new_session`): only for a fresh
        model context."""
        self._guard.new_session(session_id)

    async def aclose(self, timeout: float | None = 10.0) -> None:
        """`Guard.close`, awaited: end the plan, flush the decision log, stop the background
        threads. A wait for approval still running ends with ``guard_closed``."""
        self._closing.set()
        for wait in list(self._waits):
            wait.closing = True
            wait.stop.set()
        await asyncio.to_thread(self._guard.close, timeout)

    async def __aenter__(self) -> AsyncGuard:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
