"""One facade over both guards, so that the same tests run for `Guard` and `AsyncGuard`.

`AsyncFacade` offers `Guard`'s synchronous API and runs every method through the
`AsyncGuard`'s own: an awaited method runs to completion on the facade's event loop, whose
worker threads (`asyncio.to_thread`) do the blocking work as in an application; a tool the
test passes as a plain function is called from an ``async def`` that `AsyncGuard.call` or
its ``@tool`` decorator awaits, so a step completes only after that coroutine returned.

With the in-process WSGI transport the control plane runs on the thread that sends the
request: the facade's worker thread then shares the test's database connection (one worker,
so the connection is never used by two threads at once), as a live server thread would.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from django.db import connections

from guard.agent import AsyncGuard, Guard

GuardKind = Literal["sync", "async"]
GUARD_KINDS: tuple[GuardKind, ...] = ("sync", "async")
T = TypeVar("T")


class AsyncFacade:
    """`Guard`'s API over an `AsyncGuard`, every awaited method really awaited."""

    def __init__(self, guard: AsyncGuard, *, share_test_connection: bool = False) -> None:
        self.guard = guard
        self.runner = asyncio.Runner()
        self._closed = False
        self._shared = None
        if share_test_connection:
            shared = connections["default"]
            shared.inc_thread_sharing()
            self._shared = shared

            def use_test_connection() -> None:
                connections["default"] = shared

            self.runner.get_loop().set_default_executor(
                ThreadPoolExecutor(max_workers=1, initializer=use_test_connection)
            )

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    # The awaited methods.
    def declare(self, plan: object, **options: Any) -> Any:
        return self.run(self.guard.declare(plan, **options))

    def delegate(
        self, plan: object, to: str | None = None, ttl: int | None = None, **options: Any
    ) -> Any:
        return self.run(self.guard.delegate(plan, to, ttl, **options))

    def adopt(self, delegation: Any) -> Any:
        return self.run(self.guard.adopt(delegation))

    def handle_declare_plan(self, arguments: object, **options: Any) -> dict[str, Any]:
        return self.run(self.guard.handle_declare_plan(arguments, **options))

    def poll_approval(self, wait_seconds: float = 0.0) -> Any:
        return self.run(self.guard.poll_approval(wait_seconds))

    def refresh(self) -> bool:
        return self.run(self.guard.refresh())

    def refresh_if_due(self) -> bool:
        return self.run(self.guard.refresh_if_due())

    def poll_status(self) -> bool:
        return self.run(self.guard.poll_status())

    def flush(self, timeout: float | None = 10.0) -> bool:
        return self.run(self.guard.flush(timeout))

    def close(self, timeout: float | None = 10.0) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.run(self.guard.aclose(timeout))
        finally:
            self.runner.close()
            if self._shared is not None:
                self._shared.dec_thread_sharing()
                self._shared = None

    def __enter__(self) -> AsyncFacade:
        self.run(self.guard.__aenter__())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if not self._closed:
            self.run(self.guard.__aexit__(None, None, None))
        self.close()

    # Tools: the test's plain function, called from a coroutine the guard awaits.
    def call(self, tool: str, args: Any, fn: Callable[..., T]) -> T:
        async def tool_coroutine(**arguments: Any) -> T:
            await asyncio.sleep(0)  # the step is not completed before this returns
            return fn(**arguments)

        return self.run(self.guard.call(tool, args, tool_coroutine))

    def tool(self, name: str | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            @functools.wraps(fn)  # the signature too: arguments are bound by name
            async def tool_coroutine(*args: Any, **kwargs: Any) -> T:
                await asyncio.sleep(0)
                return fn(*args, **kwargs)

            guarded = self.guard.tool(name)(tool_coroutine)
            assert inspect.iscoroutinefunction(guarded)

            @functools.wraps(fn)
            def run_tool(*args: Any, **kwargs: Any) -> T:
                return self.run(guarded(*args, **kwargs))

            return run_tool

        return decorate

    # The synchronous, I/O-free methods are the AsyncGuard's own; a test reading the
    # session's internals (an interval...) reads those of the Guard it wraps.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            return getattr(self.guard._guard, name)
        return getattr(self.guard, name)


def build_guard(
    kind: GuardKind, url: str, api_key: str, *, share_test_connection: bool = False, **options: Any
) -> Any:
    """A `Guard`, or an `AsyncGuard` behind the facade, with the same arguments."""
    if kind == "sync":
        return Guard(url, api_key, **options)
    return AsyncFacade(
        AsyncGuard(url, api_key, **options), share_test_connection=share_test_connection
    )
