"""Who is acting, for the records that writes append.

Doors say it once: the admin (the signed-in person), a management command
(``manage.py <name>``), ``make run``'s seeding, a Celery task. Services read it when they
append a record, so a service's signature does not change with the door that called it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: an actor's name, or a function that finds it when a write first asks (a request's
#: signed-in person is only looked up by requests that write)
Actor = str | Callable[[], str]

_actor: ContextVar[Actor] = ContextVar("plangate_audit_actor", default="")


def current_actor() -> str:
    """The actor set by the innermost ``acting_as``, or "" when no door said."""
    actor = _actor.get()
    return actor if isinstance(actor, str) else actor()


@contextmanager
def acting_as(actor: Actor) -> Iterator[None]:
    token = _actor.set(actor)
    try:
        yield
    finally:
        _actor.reset(token)
