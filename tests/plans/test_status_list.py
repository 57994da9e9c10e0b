"""The token status list (draft-ietf-oauth-status-list), server side: each plan's index,
taken when it is first signed; the team's bits from the live rows; ``GET
/v1/status-lists/{team}`` signed, compressed and cacheable; and an independent
implementation of the draft (the OpenWallet Foundation's @sd-jwt/jwt-status-list, with
node's jose for the signature) reading a real server's list and agreeing on every token."""

from __future__ import annotations

import base64
import math
import threading
import time
import zlib
from datetime import timedelta

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from joserfc import jws as joserfc_jws
from joserfc.jwk import OKPKey

from members.models import ApiKey
from members.services import agent_update, api_key_revoke, member_disable
from plans.keys import signing_key_revoke
from plans.models import Plan, PlanToken, SigningKey
from plans.services import plan_revoke
from plans.status_list import (
    EXP_TTLS,
    status_idx_allocate,
    status_list_bytes,
    status_list_cache_clear,
    status_list_lst,
    team_status_bits,
)
from teams.models import Team
from tests.conftest import make_agent, plan_document
from tests.integration.processes import IS_POSTGRES, NEEDS_POSTGRES
from tests.node_packages import JOSE, STATUS_LIST, node_folder, node_run

from .helpers import assert_problem, claims_of, decode_segment, table_counts

MEDIA_TYPE = "application/statuslist+jwt"


@pytest.fixture(autouse=True)
def _fresh_lists():
    status_list_cache_clear()
    yield
    status_list_cache_clear()


def declare(persona, **overrides) -> dict:
    response = persona.client.post("/v1/plans", {"plan": plan_document(**overrides)}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def list_url(team: Team) -> str:
    return f"/v1/status-lists/{team.pk}"


def read_bits(token: str) -> tuple[bytes, dict]:
    claims = decode_segment(token.split(".")[1])
    lst = claims["status_list"]["lst"]
    return zlib.decompress(base64.urlsafe_b64decode(lst + "=" * (-len(lst) % 4))), claims


def bit(data: bytes, idx: int) -> int:
    return (data[idx // 8] >> (idx % 8)) & 1


def no_writes(queries: CaptureQueriesContext) -> bool:
    verbs = ("INSERT", "UPDATE", "DELETE")
    return not any(query["sql"].lstrip().upper().startswith(verbs) for query in queries)


# --- the index of each plan ----------------------------------------------------------------


def test_each_issued_plan_takes_its_teams_next_index(agent, other_agent):
    first, second = declare(agent), declare(agent)
    elsewhere = other_agent.client.post(
        "/v1/plans", {"plan": plan_document(user="olga@globex.test")}, format="json"
    )
    assert elsewhere.status_code == 201, elsewhere.content

    statuses = [claims_of(body["token"])["status"]["status_list"] for body in (first, second)]
    assert statuses == [
        {"idx": 0, "uri": f"{django_settings.PLANGATE_ISSUER}/v1/status-lists/{agent.team.pk}"},
        {"idx": 1, "uri": f"{django_settings.PLANGATE_ISSUER}/v1/status-lists/{agent.team.pk}"},
    ]
    assert claims_of(elsewhere.json()["token"])["status"]["status_list"]["idx"] == 0
    assert [Plan.objects.get(pk=body["id"]).status_idx for body in (first, second)] == [0, 1]
    assert Team.objects.get(pk=agent.team.pk).status_list_next == 2
    assert Team.objects.get(pk=other_agent.team.pk).status_list_next == 1


def test_a_refresh_keeps_the_index(agent):
    issued = declare(agent)
    response = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert claims_of(response.json()["token"])["status"] == claims_of(issued["token"])["status"]
    assert Team.objects.get(pk=agent.team.pk).status_list_next == 1


def test_a_plan_older_than_lists_takes_an_index_at_its_refresh(agent):
    issued = declare(agent)
    Plan.objects.filter(pk=issued["id"]).update(status_idx=None)
    response = agent.client.post(
        f"/v1/plans/{issued['id']}/refresh", {"token": issued["token"]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert claims_of(response.json()["token"])["status"]["status_list"]["idx"] == 1
    assert Plan.objects.get(pk=issued["id"]).status_idx == 1


def test_a_plan_awaiting_approval_takes_its_index_with_its_first_token(agent, team):
    from plans.approvals import plan_approval_decide
    from policies.services import policy_set

    from .approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for

    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    declared = agent.client.post(
        "/v1/plans", {"plan": plan_document(steps=REVIEWED_PLAN_STEPS)}, format="json"
    )
    assert declared.status_code == 202, declared.content
    plan_id = declared.json()["id"]
    pending = agent.client.post(f"/v1/plans/{plan_id}/token")
    assert pending.status_code == 409
    assert Plan.objects.get(pk=plan_id).status_idx is None
    assert Team.objects.get(pk=team.pk).status_list_next == 0

    plan = Plan.objects.get(pk=plan_id)
    plan_approval_decide(plan=plan, by_user=approver_for(team), approve=True)
    first = agent.client.post(f"/v1/plans/{plan_id}/token")
    again = agent.client.post(f"/v1/plans/{plan_id}/token")

    assert first.status_code == 200, first.content
    assert claims_of(first.json()["token"])["status"]["status_list"]["idx"] == 0
    assert Plan.objects.get(pk=plan_id).status_idx == 0
    if again.status_code == 200:
        assert claims_of(again.json()["token"])["status"]["status_list"]["idx"] == 0
    assert Team.objects.get(pk=team.pk).status_list_next == 1


@pytest.mark.parametrize(
    "document",
    [
        {"goal": 5},  # invalid_plan
        {"user": "dora@acme.dev"},  # a disabled member
        {"user": "nobody@acme.dev"},  # unknown_user
    ],
)
def test_a_refused_issuance_takes_no_index(agent, disabled_member, document):
    before = table_counts()
    response = agent.client.post("/v1/plans", {"plan": plan_document(**document)}, format="json")
    assert 400 <= response.status_code < 500, response.content
    assert table_counts() == before
    assert Team.objects.get(pk=agent.team.pk).status_list_next == 0


def test_status_idx_allocate_counts_up_per_team(team, other_team):
    assert [status_idx_allocate(team=team) for _ in range(3)] == [0, 1, 2]
    assert status_idx_allocate(team=other_team) == 0
    assert Team.objects.get(pk=team.pk).status_list_next == 3


# --- the bits --------------------------------------------------------------------------------


def test_status_list_bytes_is_the_drafts_layout():
    # Bit i is bit i % 8 of byte i // 8, least significant first; 1 is INVALID.
    invalid = {0, 3, 4, 5, 7, 8, 9, 10, 14}
    data = status_list_bytes(16, invalid)
    assert data == bytes([0xB9, 0x47])
    assert status_list_bytes(0, []) == b"\x00"
    assert status_list_bytes(9, range(9)) == bytes([0xFF, 0x01])  # past the size: 0
    assert status_list_bytes(9, [9, 15, -1]) == bytes([0x00, 0x00])
    assert zlib.decompress(base64.urlsafe_b64decode(status_list_lst(b"\x00\x01") + "==")) == (
        b"\x00\x01"
    )


def test_every_way_a_plan_stops_flips_its_bit_and_nothing_else(
    agent, team, policy_version, sre_member
):
    keyless = make_agent(team, "keyless", policy_version)
    disabled = make_agent(team, "disabled", policy_version)
    plans = {
        "valid": declare(agent),
        "revoked": declare(agent),
        "member_disabled": declare(agent, user="sam@acme.dev"),
        "key_revoked": declare(keyless),
        "agent_disabled": declare(disabled),
        "expired": declare(agent),
        "ended": declare(agent),
    }
    idx = {name: Plan.objects.get(pk=body["id"]).status_idx for name, body in plans.items()}
    assert sorted(idx.values()) == list(range(7))
    unsaved = status_idx_allocate(team=team)  # its plan not saved (yet, or ever)

    plan_revoke(plan=Plan.objects.get(pk=plans["revoked"]["id"]), by="admin", reason="x")
    member_disable(team=team, email="sam@acme.dev")
    api_key_revoke(api_key=ApiKey.objects.get(agent=keyless.agent))
    agent_update(agent=disabled.agent, is_active=False)
    Plan.objects.filter(pk=plans["expired"]["id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    Plan.objects.filter(pk=plans["ended"]["id"]).update(status=Plan.Status.ENDED)

    bits = team_status_bits(team.pk)
    assert bits.size == 8
    assert {name: bit(bits.data, i) for name, i in idx.items()} == {
        "valid": 0,
        "revoked": 1,
        "member_disabled": 1,
        "key_revoked": 1,
        "agent_disabled": 1,
        "expired": 1,
        "ended": 1,
    }
    # No token holds it yet: a plan saved after the list was built must not read stopped.
    assert bit(bits.data, unsaved) == 0
    assert len(bits.data) == 1


def test_a_revoked_signing_key_flips_the_bits_of_the_plans_it_last_signed(agent, team):
    old = declare(agent)
    kid = PlanToken.objects.get(plan_id=old["id"]).kid
    signing_key_revoke(kid=kid)
    new = declare(agent)  # signed by the key that took over
    refreshed_elsewhere = declare(agent)
    assert PlanToken.objects.get(plan_id=new["id"]).kid != kid

    bits = team_status_bits(team.pk)
    assert [bit(bits.data, i) for i in range(3)] == [1, 0, 0]
    assert refreshed_elsewhere


# --- the view ------------------------------------------------------------------------------


def test_the_list_is_a_signed_statuslist_jwt(agent, team, anonymous_client):
    issued = [declare(agent) for _ in range(3)]
    plan_revoke(plan=Plan.objects.get(pk=issued[1]["id"]), by="admin", reason="x")
    jwks = anonymous_client.get("/v1/keys/jwks").json()["keys"]

    with CaptureQueriesContext(connection) as queries:
        response = anonymous_client.get(list_url(team))

    assert response.status_code == 200
    assert response["Content-Type"] == MEDIA_TYPE
    ttl = math.ceil(team.revocation_bound_seconds / 2)
    assert response["Cache-Control"] == f"public, max-age={ttl}"
    assert response["ETag"].startswith('"')
    token = response.content.decode()
    header = decode_segment(token.split(".")[0])
    assert header == {"alg": "EdDSA", "kid": jwks[0]["kid"], "typ": "statuslist+jwt"}
    key = OKPKey.import_key(next(k for k in jwks if k["kid"] == header["kid"]))
    joserfc_jws.deserialize_compact(token, key, algorithms=["EdDSA"])
    data, claims = read_bits(token)
    assert claims["sub"] == f"{django_settings.PLANGATE_ISSUER}/v1/status-lists/{team.pk}"
    assert claims["ttl"] == ttl
    assert claims["exp"] == claims["iat"] + EXP_TTLS * ttl
    assert abs(claims["iat"] - time.time()) < 5
    assert claims["status_list"]["bits"] == 1
    assert [bit(data, i) for i in range(3)] == [0, 1, 0]
    assert no_writes(queries)


def test_the_list_is_signed_under_the_alg_setting(settings, agent, team, anonymous_client):
    settings.PLANGATE_SIGNING_ALG = "Ed25519"
    declare(agent)
    token = anonymous_client.get(list_url(team)).content.decode()
    assert decode_segment(token.split(".")[0])["alg"] == "Ed25519"


def test_an_etag_sent_back_is_a_304_and_head_answers_the_headers(agent, team, anonymous_client):
    declare(agent)
    first = anonymous_client.get(list_url(team))

    again = anonymous_client.get(list_url(team), HTTP_IF_NONE_MATCH=first["ETag"])
    head = anonymous_client.head(list_url(team))

    assert again.status_code == 304
    assert again["ETag"] == first["ETag"]
    assert again.content == b""
    assert head.status_code == 200
    assert head["ETag"] == first["ETag"]
    assert head["Content-Length"] == str(len(first.content))
    assert head.content == b""


def test_a_process_serves_its_copy_without_a_query_then_rebuilds(agent, team, anonymous_client):
    issued = declare(agent)
    first = anonymous_client.get(list_url(team))
    plan_revoke(plan=Plan.objects.get(pk=issued["id"]), by="admin", reason="x")

    with CaptureQueriesContext(connection) as queries:
        cached = anonymous_client.get(list_url(team))
    status_list_cache_clear()  # as a quarter ttl passing does
    rebuilt = anonymous_client.get(list_url(team))

    assert [query["sql"] for query in queries] == []
    assert cached.content == first.content
    assert bit(read_bits(rebuilt.content.decode())[0], 0) == 1
    assert rebuilt["ETag"] != first["ETag"]


def test_a_rebuild_finding_the_same_bits_keeps_the_token_and_etag(
    agent, team, anonymous_client, monkeypatch
):
    monkeypatch.setattr("plans.status_list._fresh_seconds", lambda signed: 0.0)  # rebuilds
    issued = declare(agent)
    first = anonymous_client.get(list_url(team))
    second = anonymous_client.get(list_url(team), HTTP_IF_NONE_MATCH=first["ETag"])
    plan_revoke(plan=Plan.objects.get(pk=issued["id"]), by="admin", reason="x")
    third = anonymous_client.get(list_url(team), HTTP_IF_NONE_MATCH=first["ETag"])

    assert second.status_code == 304
    assert third.status_code == 200
    assert third["ETag"] != first["ETag"]
    assert bit(read_bits(third.content.decode())[0], 0) == 1


@pytest.mark.parametrize("team_id", ["999999", "abc", "-1", "1.0", "99999999999999999999999"])
def test_an_unknown_team_is_a_404_problem(db, anonymous_client, team_id):
    assert_problem(anonymous_client.get(f"/v1/status-lists/{team_id}"), 404, "not_found")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_other_methods_are_405_and_write_nothing(agent, team, anonymous_client, method):
    declare(agent)
    before = (table_counts(), Team.objects.get(pk=team.pk).status_list_next)
    with CaptureQueriesContext(connection) as queries:
        response = getattr(anonymous_client, method)(list_url(team))
    body = assert_problem(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD"
    assert body["instance"] == list_url(team)
    assert (table_counts(), Team.objects.get(pk=team.pk).status_list_next) == before
    assert no_writes(queries)


def test_without_a_signing_key_the_list_is_refused_and_no_key_is_created(team, anonymous_client):
    # Nothing signed yet: no token names the list.
    assert_problem(anonymous_client.get(list_url(team)), 404, "not_found")
    status_idx_allocate(team=team)  # an index, but no key to sign the list with
    assert_problem(anonymous_client.get(list_url(team)), 503, "no_signing_key")
    assert not SigningKey.objects.exists()


def test_the_list_is_in_the_openapi_schema(anonymous_client):
    schema = anonymous_client.get("/v1/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/v1/status-lists/{team_id}"]["get"]
    assert MEDIA_TYPE in operation["responses"]["200"]["content"]
    assert {"304", "404"} <= set(operation["responses"])


def test_a_million_statuses_build_quickly_and_compress_small():
    started = time.perf_counter()
    data = status_list_bytes(1_000_000, range(0, 1_000_000, 10))
    lst = status_list_lst(data)
    elapsed = time.perf_counter() - started
    assert len(data) == 125_000
    assert len(lst) < 2_000  # a regular pattern; bench/ measures realistic ones
    assert elapsed < 5


# --- an independent implementation, against a real server ----------------------------------

NODE_READ = """
import * as jose from "jose";
import { getListFromStatusListJWT, getStatusListFromJWT } from "@sd-jwt/jwt-status-list";
const [base, issuer, ...tokens] = process.argv.slice(2);
const keys = jose.createRemoteJWKSet(new URL(`${base}/v1/keys/jwks`));
const lists = {};
const out = [];
for (const token of tokens) {
  const { idx, uri } = getStatusListFromJWT(token);
  if (!uri.startsWith(issuer)) throw new Error(`list outside the issuer: ${uri}`);
  if (!(uri in lists)) {
    const response = await fetch(base + uri.slice(issuer.length));
    if (response.headers.get("content-type") !== "application/statuslist+jwt") {
      throw new Error(`content type ${response.headers.get("content-type")}`);
    }
    const jwt = await response.text();
    const { payload } = await jose.jwtVerify(jwt, keys, { typ: "statuslist+jwt", subject: uri });
    if (!(payload.exp > payload.iat && payload.ttl > 0)) throw new Error("exp or ttl missing");
    lists[uri] = getListFromStatusListJWT(jwt);
  }
  out.push({ idx, status: lists[uri].getStatus(idx) });
}
console.log(JSON.stringify(out));
"""


@pytest.mark.slow
def test_an_independent_implementation_agrees_on_every_tokens_status(
    live_server, agent, team, policy_version, sre_member
):
    folder = node_folder(JOSE, STATUS_LIST)
    keyless = make_agent(team, "keyless", policy_version)

    def issue(persona, **overrides) -> dict:
        response = httpx.post(
            f"{live_server.url}/v1/plans",
            json={"plan": plan_document(**overrides)},
            headers={"Authorization": f"Bearer {persona.api_key}"},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        return response.json()

    issued = {
        "valid": issue(agent),
        "revoked": issue(agent),
        "member_disabled": issue(agent, user="sam@acme.dev"),
        "key_revoked": issue(keyless),
        "also_valid": issue(agent),
    }
    plan_revoke(plan=Plan.objects.get(pk=issued["revoked"]["id"]), by="admin", reason="x")
    member_disable(team=team, email="sam@acme.dev")
    api_key_revoke(api_key=ApiKey.objects.get(agent=keyless.agent))
    status_list_cache_clear()  # the server's copy is a quarter ttl old at most; not wait

    answer = node_run(
        folder,
        NODE_READ,
        live_server.url,
        django_settings.PLANGATE_ISSUER,
        *(body["token"] for body in issued.values()),
    )

    expected = {"valid": 0, "revoked": 1, "member_disabled": 1, "key_revoked": 1, "also_valid": 0}
    assert {name: entry["status"] for name, entry in zip(issued, answer, strict=True)} == expected
    assert [entry["idx"] for entry in answer] == [
        Plan.objects.get(pk=body["id"]).status_idx for body in issued.values()
    ]


@pytest.mark.parametrize(
    ("ttl", "build_seconds", "fresh"),
    [(8, 0.01, 2.0), (8, 1.0, 4.0), (8, 0.75, 3.0), (30, 0.5, 7.5)],
)
def test_a_slow_list_is_kept_longer_but_never_past_half_its_ttl(ttl, build_seconds, fresh):
    from plans.status_list import SignedList, _fresh_seconds

    signed = SignedList(
        token="",
        etag="",
        ttl=ttl,
        iat=0,
        digest="",
        kid="",
        alg="EdDSA",
        built_at=0.0,
        build_seconds=build_seconds,
    )
    assert _fresh_seconds(signed) == pytest.approx(fresh)


@pytest.mark.postgres
@pytest.mark.skipif(not IS_POSTGRES, reason=NEEDS_POSTGRES)
@pytest.mark.django_db(transaction=True)
def test_indices_taken_at_once_by_many_connections_are_distinct():
    """Real commits, eight connections: each UPDATE ... RETURNING waits for the team row."""
    team = Team.objects.create(slug="racing", name="Racing")
    taken: list[object] = []

    def allocate() -> None:
        try:
            taken.extend(status_idx_allocate(team=team) for _ in range(25))
        except BaseException as exc:  # reported by the test, not lost in the thread
            taken.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=allocate, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(taken) == list(range(200))  # type: ignore[type-var]
    assert Team.objects.get(pk=team.pk).status_list_next == 200
