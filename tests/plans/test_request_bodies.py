"""RequestBodySerializer.validated answers a body its fields would pass unchanged without
binding them: the answer (or the refusal) is always the one DRF's fields give."""

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


def _same_answer(serializer, data) -> None:
    assert _answer(serializer.validated, data) == _answer(serializer.validated_by_fields, data)


@settings(max_examples=400, deadline=None)
@given(body=bodies, serializer=st.sampled_from(SERIALIZERS))
def test_the_shortcut_answers_as_the_fields_do(body, serializer):
    _same_answer(serializer, body)


@pytest.mark.parametrize(
    ("serializer", "body"),
    [
        (PlanDeclarationSerializer, {"plan": plan_document()}),
        (PlanDeclarationSerializer, {"plan": plan_document(), "ttl": 900}),
        (PlanDeclarationSerializer, {"plan": plan_document(), "ttl": None}),
        (PlanDeclarationSerializer, {"plan": None}),
        (PlanDeclarationSerializer, {"plan": plan_document(), "ttl": 59}),
        (PlanDeclarationSerializer, {"plan": plan_document(), "ttl": True}),
        (PlanDeclarationSerializer, {"plan": plan_document(), "ttl": "900"}),
        (PlanDeclarationSerializer, {"plan": plan_document(), "tll": 900}),
        (PlanDeclarationSerializer, {"ttl": 900}),
        (PlanDeclarationSerializer, {}),
        (PlanDeclarationSerializer, None),
        (PlanDeclarationSerializer, []),
        (PlanRefreshSerializer, {"token": "eyJhbGciOiJFZERTQSJ9.e30.sig"}),
        (PlanRefreshSerializer, {"token": "", "ttl": 3600}),
        (PlanRefreshSerializer, {"token": "   "}),
        (PlanRefreshSerializer, {"token": "a\ud800"}),
        (PlanRefreshSerializer, {"token": None}),
        (PlanRefreshSerializer, {"token": 5}),
        (PlanRefreshSerializer, {"tokens": "x"}),
        (PlanTokenRequestSerializer, {}),
        (PlanTokenRequestSerializer, {"ttl": 120}),
    ],
)
def test_known_bodies_answer_as_the_fields_do(serializer, body):
    _same_answer(serializer, body)


def test_the_ttl_bounds_are_read_at_each_call(settings):
    settings.PLANGATE_TOKEN_MAX_TTL = 600
    body = {"plan": plan_document(), "ttl": 900}

    _same_answer(PlanDeclarationSerializer, body)
    with pytest.raises(ValidationError):
        PlanDeclarationSerializer.validated(body)
