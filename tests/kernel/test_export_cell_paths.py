"""``csv_cell`` answers exact strings, integers and datetimes by a short path of its own;
held here to the general rule it shortcuts (``csv_cell_general``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kernel.admin_export import csv_cell, csv_cell_general


class Text(str):
    """A str subclass (as lazy or safe strings are): the general path."""


values = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.text().map(Text)
    | st.sampled_from(["=1+1", "+1", "-1", "@x", "\tx", "\rx", "", "'", "a=b"])
    | st.datetimes(timezones=st.just(None) | st.timezones())
    | st.dates()
    | st.lists(st.text(), max_size=3)
)


@given(values)
def test_every_cell_is_what_the_general_rule_makes(value):
    assert csv_cell(value) == csv_cell_general(value)
