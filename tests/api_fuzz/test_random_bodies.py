"""Random JSON at the two endpoints that sign: never a 5xx, every refusal is problem+json
with a `code`, and a refused request writes nothing (plans, tokens, the key's last use)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.core.cache import cache
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from members.models import ApiKey
from plans.models import Plan, PlanEvent, PlanToken
from tests.conftest import plan_document

# Not the profile's: a fixed, derandomized run, so a fuzzing failure repeats exactly; each
# example is a whole request (too_slow, large data) against function-scoped personas.
FUZZ_SETTINGS = settings(
    max_examples=200,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

# Any JSON document, a few levels deep, with the awkward values JSON allows: huge and
# negative integers, floats, empty containers, unicode keys.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**53 - 2, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def mostly(good: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """`good` three times in four: deep paths need most fields to be right. (one_of would
    pick each half as often, and drops repeated strategies.)"""
    return st.integers(min_value=0, max_value=3).flatmap(lambda n: odd if n == 3 else good)


# Values shaped like the real thing, so that a good share gets past the first check and
# into members, policies and signing: real and near-miss users, tools and constraints.
users = mostly(
    st.sampled_from(["alice@acme.dev", "ALICE@Acme.Dev", " alice@acme.dev ", "sam@acme.dev"]),
    st.sampled_from(
        ["dora@acme.dev", "olga@globex.test", "nobody@acme.dev", "alice@acme", "",
         "alice@acme.dev\n", "alice%@acme.dev", "_lice@acme.dev", "alice\x00@acme.dev"]
    ) | st.text(max_size=20) | json_values,
)  # fmt: skip
tools = mostly(
    st.sampled_from(["github_list_issues", "github_get_issue", "send_email", "deploy"]),
    st.sampled_from(["github_delete_repo", "github_*", "unknown_tool", "", "a" * 65, "a\x00"])
    | st.text(max_size=10)
    | json_values,
)
constraints = mostly(
    st.sampled_from(
        [{"eq": "acme/public-app"}, {"glob": "acme/*"}, {"regex": "acme/.*"},
         {"in": ["acme/a", "acme/b"]}, {"lte": 5}, {"gte": -1.5}, {"eq": {"nested": [1, None]}}]
    ),
    st.dictionaries(
        st.sampled_from(["eq", "in", "glob", "regex", "lte", "gte", "regx"]),
        json_values,
        min_size=1,
        max_size=2,
    )
    | st.fixed_dictionaries({"regex": st.sampled_from(["(a+)+$", "(?P<x", "[", "\\", "\\C"])})
    | st.fixed_dictionaries({"glob": st.sampled_from(["[!a-", "**", "[]]", "[z-a]"])})
    | json_values,
)  # fmt: skip
steps = mostly(
    st.fixed_dictionaries(
        {"tool": tools},
        optional={
            "args": st.dictionaries(st.sampled_from(["repo", "to", "n"]), constraints, max_size=2),
            "maxCalls": mostly(st.integers(min_value=1, max_value=30), st.integers() | json_values),
            "required": mostly(st.booleans(), json_values),
        },
    ),
    st.dictionaries(st.sampled_from(["tool", "args", "maxCalls", "extra"]), json_values)
    | json_values,
)
plans = mostly(
    st.fixed_dictionaries(
        {
            "version": mostly(st.just(1), st.sampled_from([1.0, 2, 0, "1", True, None])),
            "goal": mostly(st.text(min_size=1, max_size=40), json_values),
            "user": users,
            "steps": mostly(
                st.lists(steps, min_size=1, max_size=4),
                st.lists(steps, min_size=49, max_size=52) | json_values,
            ),
        }
    ),
    st.dictionaries(st.sampled_from(["version", "goal", "user", "steps", "goals"]), json_values)
    | json_values,
)
ttls = mostly(
    st.sampled_from([60, 900, 3600]),
    st.sampled_from([None, 59, 3601, 0, -1, 900.0, "900", True, 2**64]) | json_values,
)


def declarations() -> st.SearchStrategy[object]:
    """Bodies for POST /v1/plans: mostly envelopes around plan-ish documents."""
    return mostly(
        st.fixed_dictionaries({"plan": plans}, optional={"ttl": ttls}),
        st.dictionaries(st.sampled_from(["plan", "ttl", "token", "extra"]), json_values)
        | json_values,
    )


def encode(body: object) -> bytes:
    return json.dumps(body).encode()


raw_bodies = st.sampled_from(
    [b"", b"{", b"null", b"[]", b'"plan"', b"NaN", b'{"plan": NaN}', b'{"plan": Infinity}',
     b"\xff\xfe", b'{"plan": 1e999}', b'{"plan": {}, "plan": {}}',
     b"[" * 5000 + b"]" * 5000, b'{"plan": ' + b"[" * 5000 + b"]" * 5000 + b"}"]
)  # fmt: skip


@pytest.fixture(autouse=True)
def _no_rate_limit():
    """Every example starts with a fresh rate-limit window (the limit is tested elsewhere)."""
    cache.clear()
    yield
    cache.clear()


def written_state(api_key: str) -> tuple:
    lookup_id = api_key.removeprefix("pg_").split("_", 1)[0]
    return (
        Plan.objects.count(),
        PlanToken.objects.count(),
        PlanEvent.objects.count(),
        ApiKey.objects.get(lookup_id=lookup_id).last_used_at,
    )


def assert_well_formed(response, before: tuple, after: tuple) -> None:
    assert response.status_code < 500, response.content[:2000]
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/problem+json"), response.content
        problem = response.json()
        assert isinstance(problem.get("code"), str), problem
        assert problem["status"] == response.status_code, problem
        assert after == before, f"a refused request wrote something: {problem}"


def post(persona, path: str, body: bytes):
    cache.clear()
    before = written_state(persona.api_key)
    response = persona.client.generic("POST", path, body, content_type="application/json")
    assert_well_formed(response, before, written_state(persona.api_key))
    # Seen with --hypothesis-show-statistics: how deep the examples got.
    code = response.json().get("code", "") if response.status_code >= 400 else ""
    event(f"{response.status_code} {code}".strip())
    return response


@FUZZ_SETTINGS
@given(body=mostly(declarations().map(encode), raw_bodies))
def test_declare_never_fails_on_any_body(agent, sre_member, disabled_member, outsider, body):
    response = post(agent, "/v1/plans", body)
    if response.status_code == 201:
        assert set(response.json()) >= {"id", "token", "planHash", "expiresAt", "policy"}


@pytest.fixture
def issued(agent) -> dict:
    """A plan of `agent`'s with its token, and a token of another of its plans."""
    first = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    second = agent.client.post(
        "/v1/plans", {"plan": plan_document(goal="another")}, format="json"
    ).json()
    return {"id": first["id"], "token": first["token"], "other_token": second["token"]}


def tampered(token: str) -> st.SearchStrategy[str]:
    """The token with one character changed, a segment dropped, or its header swapped."""
    header, payload, signature = token.split(".")
    return st.one_of(
        st.integers(min_value=0, max_value=len(token) - 1).map(
            lambda index: token[:index] + ("A" if token[index] != "A" else "B") + token[index + 1 :]
        ),
        st.just(f"{header}.{payload}"),
        st.just(f"{header}.{payload}."),
        st.just(f"eyJhbGciOiJub25lIn0.{payload}."),  # alg none
        st.just(f"eyJhbGciOiJIUzI1NiJ9.{payload}.{signature}"),  # HS256
        st.just(token + "."),
    )


@FUZZ_SETTINGS
@given(data=st.data())
def test_refresh_never_fails_on_any_body(agent, other_agent, issued, data):
    plan_id = data.draw(
        mostly(
            st.just(issued["id"]),
            st.sampled_from([issued["id"].lower(), "0" * 26, "%2E%2E", "a%20b"])
            | st.text(min_size=1, max_size=30).map(lambda text: quote(text, safe="")),
        ),
        label="plan id",
    )
    token = data.draw(
        mostly(
            st.sampled_from([issued["token"], issued["other_token"]]) | tampered(issued["token"]),
            st.sampled_from(["", "x.y.z", "\x00"]) | st.text(max_size=40) | json_values,
        ),
        label="token",
    )
    body = data.draw(
        mostly(
            st.fixed_dictionaries({"token": st.just(token)}, optional={"ttl": ttls}),
            st.fixed_dictionaries({"token": st.just(token), "plan": json_values}) | json_values,
        ).map(encode)
        | raw_bodies,
        label="body",
    )
    persona = data.draw(mostly(st.just(agent), st.just(other_agent)), label="caller")
    response = post(persona, f"/v1/plans/{plan_id}/refresh", body)
    if response.status_code == 200:
        assert response.json()["id"] == issued["id"]
