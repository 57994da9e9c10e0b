"""GET /v1/plans/{id}/status: the feed running guards poll to learn that their plan was
revoked, their member or agent disabled, or their token's signing key revoked."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from members.models import API_KEY_FORMAT, ApiKey
from members.services import agent_update, api_key_revoke, member_disable
from plans.keys import signing_key_revoke
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from plans.status_feed import FEED_STOP_CODES, _status_row, plan_status_for_key, status_queryset
from tests.conftest import plan_document

from .helpers import assert_problem

# The failed-attempts peek (kernel/ratelimit.py, counters in the database here) and the one
# query that reads the key, plan, member, agent, team bound and signing key together.
FEED_QUERIES = 2


@pytest.fixture
def declared(agent):
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    plan_id = response.json()["id"]
    return plan_id, PlanToken.objects.get(plan_id=plan_id).kid


def feed(api_key: str, plan_id: str, *, kid: str | None = None, etag: str | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {api_key}"}
    if etag is not None:
        headers["HTTP_IF_NONE_MATCH"] = etag
    query = {"kid": kid} if kid is not None else {}
    return Client().get(f"/v1/plans/{plan_id}/status", query, **headers)


def test_an_active_plan_may_go_on_and_says_how_often_to_poll(agent, team, declared):
    plan_id, kid = declared

    response = feed(agent.api_key, plan_id, kid=kid)

    assert response.status_code == 200
    assert response.json() == {
        "plan": plan_id,
        "status": "active",
        "code": None,
        "reason": "",
        "boundSeconds": 15,
        "pollInterval": 7.5,
    }
    assert response["ETag"].startswith('"')
    assert "no-cache" in response["Cache-Control"]


def test_nothing_changed_answers_304_and_a_change_answers_the_news(agent, declared):
    plan_id, kid = declared
    etag = feed(agent.api_key, plan_id, kid=kid)["ETag"]

    unchanged = feed(agent.api_key, plan_id, kid=kid, etag=etag)
    plan_revoke(plan=Plan.objects.get(pk=plan_id), by="admin", reason="stop")
    changed = feed(agent.api_key, plan_id, kid=kid, etag=etag)

    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert unchanged["ETag"] == etag
    assert changed.status_code == 200
    assert changed["ETag"] != etag
    assert (changed.json()["status"], changed.json()["code"]) == ("revoked", "plan_revoked")


def test_a_disabled_member_is_user_disabled(agent, team, member, declared):
    plan_id, _ = declared
    member_disable(team=team, email=member.email)

    assert feed(agent.api_key, plan_id).json()["code"] == "user_disabled"


def test_a_disabled_agent_is_told_agent_disabled_not_refused(agent, declared):
    plan_id, _ = declared
    agent_update(agent=agent.agent, is_active=False)

    response = feed(agent.api_key, plan_id)

    assert response.status_code == 200
    assert response.json()["code"] == "agent_disabled"


def test_a_revoked_signing_key_is_token_invalid_for_tokens_it_signed(agent, declared):
    plan_id, kid = declared
    signing_key_revoke(kid=kid)

    body = feed(agent.api_key, plan_id, kid=kid).json()

    assert body["code"] == "token_invalid"
    assert kid in body["reason"]
    assert feed(agent.api_key, plan_id, kid="another-key").json()["code"] is None


def test_the_team_bound_sets_the_poll_interval(agent, team, declared):
    plan_id, _ = declared
    team.revocation_bound_seconds = 4
    team.save(update_fields=["revocation_bound_seconds"])

    body = feed(agent.api_key, plan_id).json()

    assert (body["boundSeconds"], body["pollInterval"]) == (4, 2.0)


def test_another_agents_plan_is_not_found(other_agent, declared):
    plan_id, _ = declared

    assert_problem(feed(other_agent.api_key, plan_id), 404, "plan_not_found")


def test_another_teams_plan_is_not_found_and_says_nothing_of_it(agent, other_agent):
    theirs = other_agent.client.post(
        "/v1/plans", {"plan": plan_document(user="olga@globex.test")}, format="json"
    )
    assert theirs.status_code == 201, theirs.content

    body = assert_problem(feed(agent.api_key, theirs.json()["id"]), 404, "plan_not_found")

    assert "revoked" not in body["detail"] and "active" not in body["detail"]


@pytest.mark.parametrize(
    "api_key",
    ["", "pg_nothex00000_secret", "pg_0123456789ab_unknown", "Basic dXNlcjpwYXNz"],
)
def test_a_bad_key_is_401_problem_json(declared, api_key):
    plan_id, _ = declared

    response = Client().get(
        f"/v1/plans/{plan_id}/status", HTTP_AUTHORIZATION=f"Bearer {api_key}".strip()
    )

    assert_problem(response, 401, "invalid_api_key")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_wrong_secret_for_a_real_key_is_401(agent, declared):
    plan_id, _ = declared
    lookup = agent.api_key.rsplit("_", 1)[0]

    assert_problem(feed(f"{lookup}_not-the-secret", plan_id), 401, "invalid_api_key")


def test_a_revoked_api_key_is_401(agent, declared):
    plan_id, _ = declared
    api_key_revoke(api_key=agent.agent.api_keys.get())

    assert_problem(feed(agent.api_key, plan_id), 401, "invalid_api_key")


def test_a_malformed_kid_names_its_parameter(agent, declared):
    plan_id, _ = declared

    body = assert_problem(feed(agent.api_key, plan_id, kid="not a kid!"), 400, "invalid_request")

    assert [error["path"] for error in body["errors"]] == ["kid"]


def test_a_malformed_plan_id_is_not_found(agent):
    assert_problem(feed(agent.api_key, "not-a-plan-id"), 404, "plan_not_found")


def test_only_get_is_allowed_and_nothing_is_written(agent, declared):
    plan_id, _ = declared
    before = Plan.objects.get(pk=plan_id).status

    response = Client().post(
        f"/v1/plans/{plan_id}/status", HTTP_AUTHORIZATION=f"Bearer {agent.api_key}"
    )

    assert_problem(response, 405, "method_not_allowed")
    assert Plan.objects.get(pk=plan_id).status == before


def test_failed_keys_are_throttled_then_even_a_good_key_is(settings, agent, declared):
    settings.PLANGATE_AUTH_FAILURE_LIMIT = "2/min"
    plan_id, _ = declared
    cache.clear()

    statuses = [feed("pg_0123456789ab_wrong", plan_id).status_code for _ in range(3)]
    good = feed(agent.api_key, plan_id)

    assert statuses == [401, 401, 429]
    assert_problem(good, 429, "throttled")
    assert int(good["Retry-After"]) >= 1


def test_a_poll_costs_two_queries(agent, declared, django_assert_num_queries):
    plan_id, kid = declared
    feed(agent.api_key, plan_id, kid=kid)  # the key's last use and the like, out of the way

    with django_assert_num_queries(FEED_QUERIES):
        response = feed(agent.api_key, plan_id, kid=kid)

    assert response.status_code == 200


def test_the_selector_reads_the_plan_for_its_key(agent, declared):
    plan_id, kid = declared

    status = plan_status_for_key(plan_id=plan_id, api_key=agent.api_key, kid=kid)

    assert (status.plan_id, status.status, status.code, status.bound_seconds) == (
        plan_id,
        "active",
        None,
        15,
    )


def test_a_plan_past_its_lifetime_is_plan_expired(agent, declared):
    plan_id, _ = declared
    Plan.objects.filter(pk=plan_id).update(expires_at=timezone.now() - timedelta(seconds=1))

    body = feed(agent.api_key, plan_id).json()

    assert (body["status"], body["code"]) == ("active", "plan_expired")


def test_the_openapi_schema_documents_the_feed_and_its_refusals():
    schema = Client().get("/v1/schema", HTTP_ACCEPT="application/json").json()

    operation = schema["paths"]["/v1/plans/{plan_id}/status"]["get"]
    assert {"200", "304", "400", "401", "404", "429", "503"} <= set(operation["responses"])
    problem = operation["responses"]["401"]["content"]["application/problem+json"]
    assert problem["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert schema["components"]["schemas"]["PlanStatus"]["properties"]["code"]["enum"][:-1] == (
        sorted(FEED_STOP_CODES)
    )


def test_the_hand_built_poll_reads_what_the_orm_reads(agent, other_agent, team, declared):
    """The poll's statement (plans.status_feed._status_row, decision 0061) answers the row
    status_queryset answers, in every state a poll can find, on SQLite and PostgreSQL."""
    plan_id, kid = declared
    lookup_id = API_KEY_FORMAT.parse(agent.api_key)[0]
    other_lookup_id = API_KEY_FORMAT.parse(other_agent.api_key)[0]

    def both(*, plan: str = plan_id, lookup: str = lookup_id, key_id: str = kid):
        now = timezone.now()
        values = {"plan_id": plan, "lookup_id": lookup, "kid": key_id, "now": now}
        orm = next(iter(status_queryset(**values)), None)
        assert _status_row(**values) == orm
        return orm

    assert both() is not None and both()[0] is not None
    assert both(plan="0" * 26) is None
    assert both(lookup="0" * 12)[0] is None
    assert both(lookup=other_lookup_id)[0] is None  # another agent's key
    assert both(key_id="x" * 43)[6] is None
    ApiKey.objects.filter(lookup_id=lookup_id).update(expires_at=timezone.now())
    assert both()[0] is None
    ApiKey.objects.filter(lookup_id=lookup_id).update(expires_at=timezone.now() + timedelta(days=1))
    assert both()[0] is not None
    member_disable(team=team, email="alice@acme.dev")
    agent_update(agent=agent.agent, is_active=False)
    Plan.objects.filter(pk=plan_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    signing_key_revoke(kid=kid)
    assert both()[2:5] == (True, False, False) and both()[6] == "revoked"
    plan_revoke(plan=Plan.objects.get(pk=plan_id), by="test")
    assert both()[1] == "revoked"
    api_key_revoke(api_key=ApiKey.objects.get(lookup_id=lookup_id))
    assert both()[0] is None
