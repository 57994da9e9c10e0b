"""POST /v1/plans: a plan checked against the team and the policy, signed, and every refusal."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
import rfc8785
from django.test import override_settings
from django.utils import timezone
from joserfc import jws
from joserfc.jwk import KeySet as JoseKeySet
from rest_framework.test import APIClient

from kernel.problems import Code
from members.models import ApiKey, Member
from members.services import api_key_revoke
from plans.models import Plan, PlanToken, SigningKey
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

from .helpers import assert_problem, claims_of, table_counts

URL = "/v1/plans"


def declare(client: APIClient, plan: object, **extra):
    return client.post(URL, {"plan": plan, **extra}, format="json")


def test_declare_returns_a_token_any_jose_library_verifies(agent, anonymous_client):
    response = declare(agent.client, plan_document())

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "id",
        "token",
        "planHash",
        "expiresAt",
        "policy",
        "reportArguments",
        "warnings",
    }
    jwks = anonymous_client.get("/v1/keys/jwks").json()
    verified = jws.deserialize_compact(
        body["token"], JoseKeySet.import_key_set(jwks), algorithms=["EdDSA"]
    )
    assert verified.headers()["alg"] == "EdDSA"
    claims = claims_of(body["token"])
    assert claims["jti"] == body["id"]
    assert claims["sub"] == "alice@acme.dev"
    assert claims["agent"] == agent.agent.id
    assert claims["iss"] == "https://plangate.test"
    assert claims["exp"] - claims["iat"] == 900
    assert claims["role"] == "engineer"
    assert claims["groups"] == ["platform"]
    assert claims["polv"] == body["policy"]["version"] == 1
    assert claims["pol"]["rules"][0]["tools"] == ["github_*"]


def test_plan_hash_is_sha256_of_rfc8785_plan_with_defaults(agent):
    response = declare(agent.client, plan_document())

    body = response.json()
    claims = claims_of(body["token"])
    expected = hashlib.sha256(rfc8785.dumps(claims["plan"])).hexdigest()
    assert body["planHash"] == claims["ph"] == expected
    assert claims["plan"]["steps"][1] == {
        "tool": "github_get_issue",
        "args": {"repo": {"eq": "acme/public-app"}},
        "maxCalls": 20,
        "required": False,
    }
    assert hashlib.sha256(rfc8785.dumps(POLICY_NORMALIZED())).hexdigest() == claims["polh"]


def POLICY_NORMALIZED() -> dict:
    from guard.policy import validate_policy

    return validate_policy(POLICY)


def test_declare_records_the_plan_and_one_token_row(agent, member, policy_version):
    response = declare(agent.client, plan_document(), ttl=120)

    plan = Plan.objects.get(pk=response.json()["id"])
    assert plan.member == member
    assert plan.agent == agent.agent
    assert plan.policy_version == policy_version
    assert plan.status == Plan.Status.ACTIVE
    token = plan.tokens.get()
    assert token.kind == PlanToken.Kind.ISSUE
    assert token.kid == SigningKey.objects.get(state="active").kid
    assert (token.expires_at - token.issued_at).total_seconds() == 120
    assert token.role == "engineer"


def test_user_is_matched_case_insensitively(agent):
    response = declare(agent.client, plan_document(user="Alice@ACME.dev"))

    assert response.status_code == 201
    assert claims_of(response.json()["token"])["sub"] == "alice@acme.dev"


def test_user_matches_a_member_stored_with_capitals(agent, member):
    Member.objects.filter(pk=member.pk).update(email="Alice@Acme.DEV")  # an old row

    response = declare(agent.client, plan_document(user="alice@ACME.dev"))

    assert response.status_code == 201, response.content
    assert claims_of(response.json()["token"])["sub"] == "Alice@Acme.DEV"


def test_api_key_last_use_is_recorded(agent):
    declare(agent.client, plan_document())

    assert ApiKey.objects.get(agent=agent.agent).last_used_at is not None


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ([1, 2], ""),
        ({}, "plan"),
        ({"plan": {}, "tll": 60}, "tll"),
        ({"plan": {}, "ttl": 30}, "ttl"),
        ({"plan": {}, "ttl": 3601}, "ttl"),
        ({"plan": {}, "ttl": "900"}, "ttl"),
        ({"plan": {}, "ttl": True}, "ttl"),
    ],
)
def test_malformed_body_is_invalid_request(agent, body, path):
    before = table_counts()

    response = agent.client.post(URL, body, format="json")

    problem = assert_problem(response, 400, Code.INVALID_REQUEST)
    assert path in [error["path"] for error in problem["errors"]]
    assert table_counts() == before


def test_body_that_is_not_json_is_invalid_request(agent):
    response = agent.client.post(URL, "{not json", content_type="application/json")

    assert_problem(response, 400, Code.INVALID_REQUEST)


def test_text_with_nul_is_invalid_request_naming_each_path(agent):
    # PostgreSQL cannot store NUL in text or jsonb: found by tests/api_fuzz (a 500 there).
    plan = plan_document(goal="a\x00b")
    plan["steps"][0]["args"]["repo\x00"] = {"eq": "x"}
    before = table_counts()

    response = declare(agent.client, plan)

    problem = assert_problem(response, 400, Code.INVALID_REQUEST)
    assert [error["path"] for error in problem["errors"]] == [
        "plan.goal",
        'plan.steps[0].args["repo\\u0000"]',
    ]
    assert table_counts() == before


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_body_nested_too_deeply_is_invalid_request_not_a_server_error(agent, depth):
    # Past the interpreter's recursion limit the JSON decoder raises RecursionError, which
    # is not a ValueError: found by tests/api_fuzz.
    body = '{"plan": ' + "[" * depth + "]" * depth + "}"
    before = table_counts()

    response = agent.client.post(URL, body, content_type="application/json")

    assert_problem(response, 400, Code.INVALID_REQUEST)
    assert table_counts() == before


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda p: p["steps"][0]["args"]["repo"].update({"regx": "x"}), "plan.steps[0].args.repo"),
        (
            lambda p: p["steps"][0]["args"].update({"repo": {"regx": "x"}}),
            "plan.steps[0].args.repo",
        ),
        (lambda p: p["steps"][0].update({"tool": "github_*"}), "plan.steps[0].tool"),
        (lambda p: p.update({"steps": [{"tool": "t"}] * 51}), "plan.steps"),
        (lambda p: p.update({"goal": ""}), "plan.goal"),
        (lambda p: p.update({"version": 3}), "plan.version"),
        (lambda p: p["steps"][1].update({"maxCalls": 0}), "plan.steps[1].maxCalls"),
        (lambda p: p.update({"extra": 1}), "plan.extra"),
    ],
)
def test_invalid_plan_names_the_bad_path_and_writes_nothing(agent, mutate, path):
    document = plan_document()
    mutate(document)
    before = table_counts()

    response = declare(agent.client, document)

    problem = assert_problem(response, 400, Code.INVALID_PLAN)
    assert any(error["path"].startswith(path) for error in problem["errors"]), problem
    assert table_counts() == before


def test_every_bad_field_is_reported_at_once(agent):
    document = plan_document(goal="", version=3)
    document["steps"][0]["tool"] = "no spaces allowed"

    problem = declare(agent.client, document).json()

    paths = {error["path"] for error in problem["errors"]}
    assert {"plan.goal", "plan.version", "plan.steps[0].tool"} <= paths


@pytest.mark.parametrize("header", [None, "Bearer pg_unknown_key", "Token abc", "Bearer "])
def test_missing_or_unknown_key_is_invalid_api_key(db, header):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)

    response = declare(client, plan_document())

    assert_problem(response, 401, Code.INVALID_API_KEY)
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_key_with_right_lookup_but_wrong_secret_is_refused(agent):
    prefix = agent.api_key.rsplit("_", 1)[0]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {prefix}_{'x' * 43}")

    assert_problem(declare(client, plan_document()), 401, Code.INVALID_API_KEY)


def test_revoked_key_is_invalid_api_key(agent):
    api_key_revoke(api_key=ApiKey.objects.get(agent=agent.agent))
    before = table_counts()

    assert_problem(declare(agent.client, plan_document()), 401, Code.INVALID_API_KEY)
    assert table_counts() == before


def test_expired_key_is_invalid_api_key(agent):
    ApiKey.objects.filter(agent=agent.agent).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert_problem(declare(agent.client, plan_document()), 401, Code.INVALID_API_KEY)


def test_disabled_agent_is_refused(agent):
    agent.agent.is_active = False
    agent.agent.save()
    before = table_counts()

    assert_problem(declare(agent.client, plan_document()), 403, Code.AGENT_DISABLED)
    assert table_counts() == before


def test_user_outside_the_team_is_unknown_user(agent, outsider):
    before = table_counts()

    response = declare(agent.client, plan_document(user=outsider.email))

    assert_problem(response, 403, Code.UNKNOWN_USER)
    assert table_counts() == before


def test_disabled_user_is_refused(agent, disabled_member):
    before = table_counts()

    response = declare(agent.client, plan_document(user=disabled_member.email))

    assert_problem(response, 403, Code.USER_DISABLED)
    assert table_counts() == before


def test_policy_denial_names_each_step_and_rule(agent):
    document = plan_document()
    document["steps"].append({"tool": "github_delete_repo"})
    document["steps"].append({"tool": "deploy", "maxCalls": 1})
    before = table_counts()

    response = declare(agent.client, document)

    problem = assert_problem(response, 403, Code.POLICY_DENIED)
    errors = {error["path"]: error["detail"] for error in problem["errors"]}
    assert set(errors) == {"plan.steps[2]", "plan.steps[3]"}
    # The path is the index (from 0); the text counts the step as people do, from 1.
    assert errors["plan.steps[2]"].startswith("step 3 (github_delete_repo): ")
    assert errors["plan.steps[3]"].startswith("step 4 (deploy): ")
    assert "rules[1]" in errors["plan.steps[2]"]
    assert "default" in errors["plan.steps[3]"]
    assert table_counts() == before


def test_role_and_group_scoped_rule_admits_the_sre(agent, sre_member):
    document = plan_document(user=sre_member.email, steps=[{"tool": "deploy", "maxCalls": 2}])

    response = declare(agent.client, document)

    assert response.status_code == 201, response.content
    assert claims_of(response.json()["token"])["groups"] == ["oncall", "platform"]


def test_step_over_the_rules_call_limit_is_denied(agent, sre_member):
    document = plan_document(user=sre_member.email, steps=[{"tool": "deploy"}])

    problem = assert_problem(declare(agent.client, document), 403, Code.POLICY_DENIED)

    assert problem["errors"][0]["path"] == "plan.steps[0]"


def test_new_policy_version_is_carried_by_the_next_plan(agent, team):
    relaxed = {**POLICY, "default": "allow"}
    version = policy_set(team=team, slug="default", document=relaxed)

    response = declare(agent.client, plan_document(steps=[{"tool": "anything"}]))

    assert response.status_code == 201
    assert response.json()["policy"] == {"id": "default", "version": 2, "hash": version.hash}


def test_no_active_signing_key_is_503_and_writes_nothing(agent):
    declare(agent.client, plan_document())  # bootstraps the keys
    SigningKey.objects.update(state=SigningKey.State.RETIRED, retired_at=timezone.now())
    before = table_counts()

    response = declare(agent.client, plan_document())

    assert_problem(response, 503, Code.NO_SIGNING_KEY)
    assert table_counts() == before


def test_undecryptable_key_refuses_to_sign_and_creates_no_key(agent):
    declare(agent.client, plan_document())
    keys_before = set(SigningKey.objects.values_list("kid", flat=True))
    from plans.keys import clear_private_key_cache

    clear_private_key_cache()
    other_key = "b3RoZXIta2V5LWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM="
    with override_settings(KEY_ENCRYPTION_KEY=other_key):
        response = declare(agent.client, plan_document())

    assert_problem(response, 503, Code.NO_SIGNING_KEY)
    assert set(SigningKey.objects.values_list("kid", flat=True)) == keys_before


@override_settings(PLANGATE_RATE_LIMIT="2/day")  # a day: no window ends during the test
def test_rate_limit_answers_429_with_retry_after(agent):
    statuses = [declare(agent.client, plan_document()).status_code for _ in range(3)]
    response = declare(agent.client, plan_document())

    assert statuses == [201, 201, 429]
    assert_problem(response, 429, Code.THROTTLED)
    assert int(response["Retry-After"]) >= 1


@pytest.mark.parametrize("ttl", [900.0, 1e3, [900], {"seconds": 900}])
def test_ttl_that_is_not_a_json_integer_is_invalid_request(agent, ttl):
    before = table_counts()

    problem = assert_problem(
        declare(agent.client, plan_document(), ttl=ttl), 400, "invalid_request"
    )

    assert [error["path"] for error in problem["errors"]] == ["ttl"]
    assert table_counts() == before


def test_a_null_ttl_is_the_default_lifetime(agent):
    response = declare(agent.client, plan_document(), ttl=None)

    assert response.status_code == 201, response.content
    claims = claims_of(response.json()["token"])
    assert claims["exp"] - claims["iat"] == 900


def test_a_null_plan_is_an_invalid_plan(agent):
    problem = assert_problem(declare(agent.client, None), 400, "invalid_plan")

    assert [error["path"] for error in problem["errors"]] == ["plan"]


@override_settings(PLANGATE_TOKEN_MIN_TTL=10, PLANGATE_TOKEN_MAX_TTL=20)
def test_the_ttl_bounds_are_the_settings_when_the_body_is_checked(agent):
    problem = assert_problem(declare(agent.client, plan_document(), ttl=30), 400, "invalid_request")
    response = declare(agent.client, plan_document(), ttl=20)

    assert problem["errors"] == [{"path": "ttl", "detail": "must be between 10 and 20"}]
    assert response.status_code == 201, response.content
    claims = claims_of(response.json()["token"])
    assert claims["exp"] - claims["iat"] == 20


def test_the_schema_says_a_body_has_no_other_keys(client):
    schemas = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()[
        "components"
    ]["schemas"]

    for name, required in (("PlanDeclarationRequest", ["plan"]), ("PlanRefreshRequest", ["token"])):
        assert schemas[name]["additionalProperties"] is False, name
        assert schemas[name]["required"] == required, name
