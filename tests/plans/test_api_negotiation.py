"""The agent endpoints' negotiation (plans.api.PlainJsonNegotiation) answers the common Accept
headers at once, with the renderer and media type DRF's negotiation picks; every other
request negotiates as DRF does."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from plans.api import AgentAPIView, PlainJsonNegotiation
from tests.conftest import plan_document
from tests.plans.helpers import assert_problem


def _request(accept: str | None, query: str = "") -> Request:
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    return Request(APIRequestFactory().post(f"/v1/plans{query}", **headers))


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_the_shortcut_answers_what_drf_negotiates(accept):
    renderers = [JSONRenderer()]
    drf_renderer, drf_media_type = DefaultContentNegotiation().select_renderer(
        _request(accept), renderers
    )

    renderer, media_type = PlainJsonNegotiation().select_renderer(_request(accept), renderers)

    assert renderer is drf_renderer and media_type == drf_media_type


@pytest.mark.parametrize(
    ("accept", "query", "format_kwarg", "renderers"),
    [
        ("application/json; indent=4", "", None, [JSONRenderer()]),
        ("application/*", "", None, [JSONRenderer()]),
        ("text/html", "", None, [JSONRenderer()]),
        ("", "", None, [JSONRenderer()]),
        ("*/*", "?format=json", None, [JSONRenderer()]),
        ("*/*", "", "json", [JSONRenderer()]),
        ("*/*", "", None, [JSONRenderer(), BrowsableAPIRenderer()]),
    ],
)
def test_any_other_request_is_left_to_drf(accept, query, format_kwarg, renderers):
    assert _negotiated(PlainJsonNegotiation(), accept, query, format_kwarg, renderers) == (
        _negotiated(DefaultContentNegotiation(), accept, query, format_kwarg, renderers)
    )


def _negotiated(negotiation, accept, query, format_kwarg, renderers):
    """The renderer's class and the media type chosen, or the refusal."""
    try:
        renderer, media_type = negotiation.select_renderer(
            _request(accept, query), renderers, format_kwarg
        )
    except NotAcceptable:
        return "not acceptable"
    return type(renderer), media_type


def test_the_agent_endpoints_use_it():
    assert AgentAPIView.content_negotiation_class is PlainJsonNegotiation


def test_a_declaration_accepting_only_html_is_still_refused(agent):
    response = agent.client.post(
        "/v1/plans", {"plan": plan_document()}, format="json", HTTP_ACCEPT="text/html"
    )

    assert_problem(response, 406, "not_acceptable")


def test_a_declaration_accepting_json_with_parameters_is_answered(agent):
    response = agent.client.post(
        "/v1/plans",
        {"plan": plan_document()},
        format="json",
        HTTP_ACCEPT="application/json; indent=4",
    )

    assert response.status_code == 201, response.content
