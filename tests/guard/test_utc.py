"""isoformat_z: the one spelling of an instant on the wire, RFC 3339 in UTC with a Z."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.utc import isoformat_z

instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1), timezones=st.just(UTC)
)
offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


@given(instants, offsets)
def test_an_instant_is_written_in_utc_whatever_its_zone(moment, zone):
    local = moment.astimezone(zone)

    assert isoformat_z(local) == moment.isoformat().replace("+00:00", "Z")
    assert isoformat_z(local, timespec="seconds") == moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert isoformat_z(local, timespec="microseconds") == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@given(st.floats(min_value=0, max_value=4e9))
def test_a_unix_time_is_that_instant(seconds):
    assert isoformat_z(seconds) == isoformat_z(datetime.fromtimestamp(seconds, tz=UTC))


def test_examples():
    moment = datetime(2026, 11, 30, 9, 0, 0, 250000, tzinfo=UTC)

    assert isoformat_z(moment) == "2026-11-30T09:00:00.250000Z"
    assert isoformat_z(moment.replace(microsecond=0)) == "2026-11-30T09:00:00Z"
    assert isoformat_z(moment, timespec="seconds") == "2026-11-30T09:00:00Z"
    assert isoformat_z(0.5, timespec="microseconds") == "1970-01-01T00:00:00.500000Z"


def test_a_naive_datetime_is_refused():
    with pytest.raises(ValueError, match="time zone"):
        isoformat_z(datetime(2026, 11, 30, 9, 0))
