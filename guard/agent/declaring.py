"""Declarations in flight: a tool call the model sent in the same turn as ``declare_plan``
waits for the declaration instead of being blocked as ``no_plan``.

Models do write "declare the plan, then start" in one response, and every framework (and
MCP client) runs a response's tool calls concurrently: without a wait, the sibling call is
decided before the token exists. The wait is on the declaration, never on the network: a
call that finds no declaration in flight is decided at once, and one that finds one waits
at most `seconds` (``declare_wait_seconds``, default 30 s), then is decided under whatever
the session holds (the new plan, ``approval_pending`` for a plan sent to a person, or
``no_plan`` when the declaration failed or is still running).

A declaration counts as in flight from the moment its caller marks it (`declaring`) until
the control plane has answered it: a plan it stored for a person's approval ends the wait
(`settled`), since every call is then ``approval_pending`` for as long as the person takes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["DEFAULT_DECLARE_WAIT", "DeclarationsInFlight"]

DEFAULT_DECLARE_WAIT: Final = 30.0


class DeclarationsInFlight:
    """How many declarations are in flight on one session, and a wait for them to end."""

    __slots__ = ("_changed", "count", "seconds")

    def __init__(self, seconds: float = DEFAULT_DECLARE_WAIT) -> None:
        self.seconds = max(0.0, seconds)
        # Written under the lock; read without it by `Guard.check`, whose hot path pays one
        # attribute read when nothing is in flight.
        self.count = 0
        self._changed = threading.Condition(threading.Lock())

    @property
    def busy(self) -> bool:
        """Whether a declaration is in flight (read without the lock: the hot path's test)."""
        return self.count > 0

    @contextmanager
    def declaring(self) -> Iterator[None]:
        """Marks one declaration in flight for the duration of the block. Nests: a caller
        that marks it early (an adapter that sees the model's ``declare_plan`` before its
        siblings start) and `Guard.declare` inside it count as one wait."""
        with self._changed:
            self.count += 1
        try:
            yield
        finally:
            with self._changed:
                self.count -= 1
                self._changed.notify_all()

    def notify(self) -> None:
        """Wake the waiters to look again (a plan now awaits a person's approval)."""
        with self._changed:
            self._changed.notify_all()

    def wait(self, settled: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until no declaration is in flight or `settled()` is true, at most `timeout`
        seconds (default `seconds`). True when it ended that way, False on the bound."""
        bound = self.seconds if timeout is None else max(0.0, timeout)
        with self._changed:
            return self._changed.wait_for(lambda: self.count == 0 or settled(), bound)
