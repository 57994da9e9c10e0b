"""Who is acting, for the records that writes append.

Doors say it once: the admin (the signed-in person), a management command
(``manage.py <name>``), ``make run``'s seeding, a Celery task. Services read it when they
append a record, so a service's signature does not change with the door that called it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_actor: ContextVar[str] = ContextVar("plangate_audit_actor", default="")


def current_actor() -> str:
    """The actor set by the innermost ``acting_as``, or "" when no door said."""
    return _actor.get()


@contextmanager
def acting_as(actor: str) -> Iterator[None]:
    token = _actor.set(actor)
    try:
        yield
    finally:
        _actor.reset(token)
