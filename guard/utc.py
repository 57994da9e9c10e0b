"""Instants as the wire writes them: RFC 3339 in UTC with a ``Z``, the one spelling shared by
the guard (events, tool answers, messages) and the control plane (API bodies, commands)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

__all__ = ["isoformat_z"]

Timespec = Literal["auto", "seconds", "milliseconds", "microseconds"]


def isoformat_z(moment: datetime | float, *, timespec: Timespec = "auto") -> str:
    """``2026-11-30T09:00:00.250000Z``: an aware datetime, or a Unix time, in UTC.

    `timespec` is `datetime.isoformat`'s: ``auto`` writes microseconds only when there are
    some, ``seconds`` never, ``microseconds`` always.
    """
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise ValueError("a naive datetime has no instant: give it a time zone")
        instant = moment.astimezone(UTC)
    else:
        instant = datetime.fromtimestamp(moment, tz=UTC)
    return instant.isoformat(timespec=timespec).removesuffix("+00:00") + "Z"
