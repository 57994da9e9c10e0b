"""A request body is passed on exactly as sent, or refused naming each bad path, by DRF's
own validation of its serializer: unknown and missing keys, a ttl that is not an integer
within the bounds, a token that is not a string; the plan document is the guard's to judge."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError

from plans.serializers import (
    PlanDeclarationSerializer,
    PlanRefreshSerializer,
    PlanTokenRequestSerializer,
)
from tests.conftest import plan_document

SERIALIZERS = [PlanDeclarationSerializer, PlanRefreshSerializer, PlanTokenRequestSerializer]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([59, 60, 900, 3600, 3601, 0, -1, 900.0, 1e100]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["", " ", "eyJ.a.b", "a\x00b", "\ud800", "x\udfffy", "\t"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=5), children, max_size=3),
    ),
    max_leaves=8,
)
keys = st.sampled_from(["plan", "ttl", "token", "Plan", "ttl ", "extra", ""])
bodies = st.one_of(
    st.dictionaries(keys, json_values, max_size=4),
    json_values,
)


def _answer(call, data):
    try:
        return "valid", dict(call(data))
    except ValidationError as exc:
        return "refused", json.loads(json.dumps(exc.detail))


@settings(max_examples=400, deadline=None)
@given(body=bodies, serializer=st.sampled_from(SERIALIZERS))
def test_a_body_is_passed_on_as_sent_or_refused_by_path(body, serializer):
    verdict, answer = _answer(serializer.validated, body)
    declared = set(serializer().fields)

    if verdict == "valid":
        assert answer == body  # nothing coerced, trimmed or added
    elif isinstance(body, dict):
        assert set(answer) <= declared | set(body)
        assert {key: ["unknown field"] for key in set(body) - declared}.items() <= answer.items()
    else:
        assert answer == {
            "non_field_errors": ["No data provided" if body is None else "expected an object"]
        }


DOCUMENT = plan_document()
RANGE = ["must be between 60 and 3600"]
NOT_AN_INTEGER = ["expected an integer"]
REQUIRED = ["this field is required"]
VALID = None  # the body itself


@pytest.mark.parametrize(
    ("serializer", "body", "refused"),
    [
        (PlanDeclarationSerializer, {"plan": DOCUMENT}, VALID),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "ttl": 900}, VALID),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "ttl": None}, VALID),
        (PlanDeclarationSerializer, {"plan": None}, VALID),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "ttl": 59}, {"ttl": RANGE}),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "ttl": True}, {"ttl": NOT_AN_INTEGER}),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "ttl": "900"}, {"ttl": NOT_AN_INTEGER}),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "ttl": 900.0}, {"ttl": NOT_AN_INTEGER}),
        (PlanDeclarationSerializer, {"plan": DOCUMENT, "tll": 900}, {"tll": ["unknown field"]}),
        (PlanDeclarationSerializer, {"ttl": 900}, {"plan": REQUIRED}),
        (PlanDeclarationSerializer, {}, {"plan": REQUIRED}),
        (PlanDeclarationSerializer, None, {"non_field_errors": ["No data provided"]}),
        (PlanDeclarationSerializer, [], {"non_field_errors": ["expected an object"]}),
        (PlanRefreshSerializer, {"token": "eyJhbGciOiJFZERTQSJ9.e30.sig"}, VALID),
        (PlanRefreshSerializer, {"token": "", "ttl": 3600}, VALID),
        (PlanRefreshSerializer, {"token": "   "}, VALID),
        (
            PlanRefreshSerializer,
            {"token": "a\ud800"},
            {"token": ["Surrogate characters are not allowed: U+D800."]},
        ),
        (
            PlanRefreshSerializer,
            {"token": "a\x00b"},
            {"token": ["Null characters are not allowed."]},
        ),
        (PlanRefreshSerializer, {"token": None}, {"token": ["This field may not be null."]}),
        (PlanRefreshSerializer, {"token": 5}, {"token": ["expected a string"]}),
        (
            PlanRefreshSerializer,
            {"tokens": "x"},
            {"token": REQUIRED, "tokens": ["unknown field"]},
        ),
        (PlanTokenRequestSerializer, {}, VALID),
        (PlanTokenRequestSerializer, {"ttl": 60}, VALID),
        (PlanTokenRequestSerializer, {"ttl": 3600}, VALID),
        (PlanTokenRequestSerializer, {"ttl": 3601}, {"ttl": RANGE}),
    ],
)
def test_known_bodies_are_answered_as_declared(serializer, body, refused):
    expected = ("valid", body) if refused is VALID else ("refused", refused)

    assert _answer(serializer.validated, body) == expected


def test_the_ttl_bounds_are_read_at_each_call(settings):
    settings.PLANGATE_TOKEN_MAX_TTL = 600
    body = {"plan": plan_document(), "ttl": 900}

    with pytest.raises(ValidationError) as refused:
        PlanDeclarationSerializer.validated(body)

    assert refused.value.detail == {"ttl": ["must be between 60 and 600"]}
