"""The inserts of kernel.sql (the intake's events and decision records among them) write a
JSON column's text themselves (kernel.sql.json_text): it must be what ``json.dumps``
writes, for any value, flat or not."""

from __future__ import annotations

import enum
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kernel.sql import json_text

texts = st.text(max_size=20)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=10,
)
flat_objects = st.dictionaries(
    texts, st.none() | st.booleans() | st.integers(-(2**70), 2**70) | texts, max_size=6
)


@given(value=values)
def test_any_json_value_is_written_as_json_dumps_writes_it(value: Any) -> None:
    assert json_text(value) == json.dumps(value)


@given(objects=st.lists(flat_objects, min_size=1, max_size=5))
def test_flat_objects_one_after_another_are_written_as_json_dumps_writes_them(
    objects: list[dict[str, Any]],
) -> None:
    assert [json_text(value) for value in objects] == [json.dumps(value) for value in objects]


class Colour(enum.StrEnum):
    RED = "red"


def test_keys_and_values_that_are_not_plain_texts_or_integers_go_to_json_dumps() -> None:
    odd: list[dict[Any, Any]] = [
        {1: "one", "two": 2},
        {"colour": Colour.RED},
        {"n": 1.5, "ok": True, "none": None},
        {"nested": {"a": [1, "b"]}},
        {"esc": 'é"\\\n\u2028', "é": "x"},
        {},
    ]

    assert [json_text(value) for value in odd] == [json.dumps(value) for value in odd]
