"""``csv_cell`` makes every value a cell no spreadsheet evaluates, whatever its type (one
rule since decision 0061 removed its exact-type fast path, measured at under 2x)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kernel.admin_export import FORMULA_TRIGGERS, csv_cell


class Text(str):
    """A str subclass (as lazy or safe strings are)."""


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
def test_no_cell_but_a_number_starts_as_a_formula(value):
    cell = csv_cell(value)

    assert isinstance(cell, str)
    if cell.startswith(FORMULA_TRIGGERS):
        assert isinstance(value, int | float) and not isinstance(value, bool)


@given(st.text() | st.text().map(Text))
def test_text_is_kept_whole_behind_at_most_one_quote(text):
    cell = csv_cell(text)

    assert cell == text or cell == "'" + text
    assert (cell != text) == text.startswith(FORMULA_TRIGGERS)
