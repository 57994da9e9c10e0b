"""POST /v1/plans/{id}/refresh: the same plan, the current policy, and every refusal."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import timedelta

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.utils import timezone

from kernel.problems import Code
from members.models import Member
from members.services import member_disable, member_upsert
from plans.keys import active_signer
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

from .helpers import assert_problem, b64url, b64url_json, claims_of, decode_segment, table_counts


def declare(persona, document=None):
    response = persona.client.post(
        "/v1/plans", {"plan": document or plan_document()}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def refresh(persona, plan_id, token, **extra):
    return persona.client.post(
        f"/v1/plans/{plan_id}/refresh", {"token": token, **extra}, format="json"
    )


def test_refresh_keeps_jti_and_hash_and_carries_the_current_policy(agent, team):
    issued = declare(agent)
    newer = policy_set(team=team, slug="default", document={**POLICY, "default": "allow"})

    response = refresh(agent, issued["id"], issued["token"])

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == issued["id"]
    assert body["planHash"] == issued["planHash"]
    claims, old_claims = claims_of(body["token"]), claims_of(issued["token"])
    assert claims["jti"] == old_claims["jti"]
    assert claims["plan"] == old_claims["plan"]
    assert claims["polv"] == 2 and claims["polh"] == newer.hash
    assert body["policy"]["version"] == 2
    kinds = list(PlanToken.objects.filter(plan_id=issued["id"]).values_list("kind", flat=True))
    assert kinds == ["issue", "refresh"]


def test_refresh_carries_the_members_current_role_and_groups(agent, team):
    issued = declare(agent)
    member_upsert(team=team, email="alice@acme.dev", role="lead", groups=["reviewers", "apps"])

    claims = claims_of(refresh(agent, issued["id"], issued["token"]).json()["token"])

    assert claims["role"] == "lead"
    assert claims["groups"] == ["apps", "reviewers"]


def test_an_expired_token_still_refreshes(agent):
    issued = declare(agent)
    signer = active_signer()
    claims = claims_of(issued["token"])
    expired = signer.sign({**claims, "iat": claims["iat"] - 7200, "exp": claims["iat"] - 3600})

    assert refresh(agent, issued["id"], expired).status_code == 200


def test_a_policy_that_now_denies_a_step_refuses_the_refresh(agent, team):
    issued = declare(agent)
    policy_set(
        team=team,
        slug="default",
        document={
            **POLICY,
            "rules": [{"effect": "deny", "tools": ["github_get_*"]}, *POLICY["rules"]],
        },
    )
    before = table_counts()

    problem = assert_problem(refresh(agent, issued["id"], issued["token"]), 403, Code.POLICY_DENIED)

    assert problem["errors"][0]["path"] == "plan.steps[1]"
    assert table_counts() == before


def test_token_of_another_plan_is_a_mismatch(agent):
    first, second = declare(agent), declare(agent)
    before = table_counts()

    response = refresh(agent, first["id"], second["token"])

    assert_problem(response, 409, Code.PLAN_MISMATCH)
    assert table_counts() == before


def test_token_with_another_agent_or_hash_is_a_mismatch(agent):
    issued = declare(agent)
    claims = claims_of(issued["token"])
    signer = active_signer()

    other_agent = signer.sign({**claims, "agent": "01HZZZZZZZZZZZZZZZZZZZZZZZ"})
    other_hash = signer.sign({**claims, "ph": "0" * 64})

    assert_problem(refresh(agent, issued["id"], other_agent), 409, Code.PLAN_MISMATCH)
    assert_problem(refresh(agent, issued["id"], other_hash), 409, Code.PLAN_MISMATCH)


def tampered_payload(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = decode_segment(payload)
    claims["plan"]["steps"][0]["maxCalls"] = 1000
    return f"{header}.{b64url_json(claims)}.{signature}"


def alg_none(token: str) -> str:
    header, payload, _ = token.split(".")
    return f"{b64url_json({**decode_segment(header), 'alg': 'none'})}.{payload}."


def hmac_with_public_key(token: str) -> str:
    """The classic confusion: HS256 keyed with the public key everyone can fetch."""
    from plans.keys import signing_key_public
    from plans.models import SigningKey

    header, payload, _ = token.split(".")
    kid = decode_segment(header)["kid"]
    public = signing_key_public(SigningKey.objects.get(kid=kid))
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    secret = public.public_bytes(Encoding.Raw, PublicFormat.Raw)
    new_header = b64url_json({"alg": "HS256", "kid": kid, "typ": "JWT"})
    signing_input = f"{new_header}.{payload}".encode()
    signature = hmac.new(secret, signing_input, hashlib.sha256).digest()
    return f"{new_header}.{payload}.{b64url(signature)}"


def signed_by_a_stranger(token: str) -> str:
    claims = claims_of(token)
    kid = decode_segment(token.split(".")[0])["kid"]
    return jwt.encode(claims, Ed25519PrivateKey.generate(), algorithm="EdDSA", headers={"kid": kid})


def flipped_signature(token: str) -> str:
    header, payload, signature = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=="))
    raw[0] ^= 0x01
    return f"{header}.{payload}.{b64url(bytes(raw))}"


def with_kid(token: str, kid: object) -> str:
    _, payload, signature = token.split(".")
    return f"{b64url_json({'alg': 'EdDSA', 'kid': kid, 'typ': 'JWT'})}.{payload}.{signature}"


@pytest.mark.parametrize(
    "forge",
    [
        tampered_payload,
        alg_none,
        hmac_with_public_key,
        signed_by_a_stranger,
        flipped_signature,
        lambda token: "not-a-token",
        lambda token: token + "x",
        lambda token: "",
        lambda token: with_kid(token, "a\x00b"),
        lambda token: with_kid(token, {"kid": 1}),
    ],
    ids=[
        "tampered",
        "alg-none",
        "hs256",
        "stranger",
        "flipped",
        "garbage",
        "suffix",
        "empty",
        "kid-with-nul",  # found by tests/api_fuzz: PostgreSQL cannot compare it (500)
        "kid-not-a-string",
    ],
)
def test_forged_token_is_invalid_token_and_writes_nothing(agent, forge):
    issued = declare(agent)
    before = table_counts()

    response = refresh(agent, issued["id"], forge(issued["token"]))

    assert_problem(response, 401, Code.INVALID_TOKEN)
    assert table_counts() == before


def test_revoked_plan_refuses_refresh(agent):
    issued = declare(agent)
    plan_revoke(plan=Plan.objects.get(pk=issued["id"]))

    assert_problem(refresh(agent, issued["id"], issued["token"]), 410, Code.PLAN_REVOKED)


def test_plan_past_its_absolute_lifetime_is_expired(agent):
    issued = declare(agent)
    Plan.objects.filter(pk=issued["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    before = table_counts()

    assert_problem(refresh(agent, issued["id"], issued["token"]), 410, Code.PLAN_EXPIRED)
    assert table_counts() == before


def test_token_never_outlives_the_plan(agent):
    issued = declare(agent)
    end = timezone.now() + timedelta(seconds=100)
    Plan.objects.filter(pk=issued["id"]).update(expires_at=end)

    claims = claims_of(refresh(agent, issued["id"], issued["token"]).json()["token"])

    assert claims["exp"] <= int(end.timestamp())


def test_disabled_member_refuses_refresh(agent, team):
    issued = declare(agent)
    member_disable(team=team, email="alice@acme.dev")

    assert_problem(refresh(agent, issued["id"], issued["token"]), 403, Code.USER_DISABLED)


def test_refresh_finds_the_plans_member_by_id_after_an_e_mail_edit(agent, member):
    issued = declare(agent)
    Member.objects.filter(pk=member.pk).update(email="alice.new@acme.dev")

    response = refresh(agent, issued["id"], issued["token"])

    assert response.status_code == 200, response.content
    assert claims_of(response.json()["token"])["sub"] == "alice.new@acme.dev"
    assert Plan.objects.get(pk=issued["id"]).member_id == member.pk


def test_a_disabled_member_refuses_refresh_after_an_e_mail_edit_too(agent, member):
    issued = declare(agent)
    Member.objects.filter(pk=member.pk).update(email="alice.new@acme.dev", is_active=False)

    assert_problem(refresh(agent, issued["id"], issued["token"]), 403, Code.USER_DISABLED)


def test_disabled_agent_refuses_refresh(agent):
    issued = declare(agent)
    agent.agent.is_active = False
    agent.agent.save()

    assert_problem(refresh(agent, issued["id"], issued["token"]), 403, Code.AGENT_DISABLED)


def test_another_teams_agent_cannot_refresh_or_see_the_plan(agent, other_agent):
    issued = declare(agent)

    assert_problem(refresh(other_agent, issued["id"], issued["token"]), 404, Code.PLAN_NOT_FOUND)
    assert_problem(other_agent.client.get(f"/v1/plans/{issued['id']}"), 404, Code.PLAN_NOT_FOUND)


def test_unknown_plan_is_not_found(agent):
    issued = declare(agent)

    assert_problem(
        refresh(agent, "01ARZ3NDEKTSV4RRFFQ69G5FAV", issued["token"]), 404, Code.PLAN_NOT_FOUND
    )


@pytest.mark.parametrize("plan_id", ["01arz3ndektsv4rrffq69g5fav", "x" * 26, "01ARZ3NDEK"])
def test_plan_id_that_is_not_a_ulid_is_not_found(agent, plan_id):
    issued = declare(agent)

    assert_problem(refresh(agent, plan_id, issued["token"]), 404, Code.PLAN_NOT_FOUND)
    response = agent.client.get(f"/v1/plans/{plan_id}")
    assert_problem(response, 404, Code.PLAN_NOT_FOUND)


@pytest.mark.parametrize("plan_id", ["%00", "a%00b"])
def test_plan_id_holding_nul_is_bad_input(agent, plan_id):
    # "%00" once reached PostgreSQL, which refuses NUL in text: found by tests/api_fuzz.
    issued = declare(agent)

    assert_problem(refresh(agent, plan_id, issued["token"]), 400, Code.INVALID_REQUEST)
    assert_problem(agent.client.get(f"/v1/plans/{plan_id}"), 400, Code.INVALID_REQUEST)
    assert PlanToken.objects.count() == 1


def test_refresh_body_must_carry_a_string_token(agent):
    issued = declare(agent)

    for body in ({}, {"token": 5}, {"token": issued["token"], "extra": 1}):
        response = agent.client.post(f"/v1/plans/{issued['id']}/refresh", body, format="json")
        assert_problem(response, 400, Code.INVALID_REQUEST)


def test_plan_detail_shows_status_steps_and_token_history(agent):
    issued = declare(agent)
    refresh(agent, issued["id"], issued["token"])

    response = agent.client.get(f"/v1/plans/{issued['id']}")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "active"
    assert body["planHash"] == issued["planHash"]
    assert [step["tool"] for step in body["steps"]] == ["github_list_issues", "github_get_issue"]
    assert [token["kind"] for token in body["tokens"]] == ["issue", "refresh"]
    assert "token" not in body["tokens"][0]


def test_another_agent_of_the_same_team_cannot_refresh_or_see_the_plan(agent, team):
    from tests.conftest import make_agent

    sibling = make_agent(team, "sibling", agent.agent.policy.versions.get())
    issued = declare(agent)

    assert_problem(refresh(sibling, issued["id"], issued["token"]), 404, Code.PLAN_NOT_FOUND)
    assert_problem(sibling.client.get(f"/v1/plans/{issued['id']}"), 404, Code.PLAN_NOT_FOUND)
    assert PlanToken.objects.filter(plan_id=issued["id"]).count() == 1


def test_plan_detail_is_rendered_by_the_serializer_the_schema_documents(agent, client):
    issued = declare(agent)

    body = agent.client.get(f"/v1/plans/{issued['id']}").json()
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    detail = schema["components"]["schemas"]["PlanDetail"]
    assert set(body) == set(detail["properties"]) == set(detail["required"])
    assert (body["revokedAt"], body["revokeReason"], body["endedAt"], body["endReason"]) == (
        None,
        None,
        None,
        None,
    )
    statuses = schema["components"]["schemas"]["StatusEnum"]["enum"]
    assert set(statuses) == set(Plan.Status.values)
