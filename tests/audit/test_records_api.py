"""GET /v1/audit/records with an audit token: the team's sealed records in chain order."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import secrets

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from rest_framework.test import APIClient

from audit.api import AuditRecordSerializer
from audit.models import AuditRecord, AuditToken
from audit.services import records_seal
from audit.tokens import audit_token_create, audit_token_revoke
from guard.canonical import canonical_json
from kernel.problems import Code
from tests.plans.helpers import assert_problem

from .helpers import append, emptied_by_retention

URL = "/v1/audit/records"


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def token(team) -> str:
    return audit_token_create(team=team, name="SIEM", created_by="root")[1]


@pytest.fixture
def trail(team, other_team):
    """Both teams' trails sealed, then two more of the team's records not sealed yet."""
    append(team, 5)
    append(other_team, 4)
    records_seal()
    append(team, 2)
    return team


def hash_recomputed(record: dict) -> str:
    """The hash of an API record as an auditor recomputes it, without the server."""
    hashed = {k: v for k, v in record.items() if k not in {"id", "team", "hash", "redacted"}}
    if record["format"] == 1:  # written before the format was kept: not in its hash
        del hashed["format"]
    return hashlib.sha256(canonical_json(hashed)).hexdigest()


def page(client: APIClient, **params) -> dict:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return response.json()


def test_the_command_prints_a_token_once_and_stores_only_its_keyed_hash(team):
    out = io.StringIO()
    call_command("create_audit_token", "--team", team.slug, "--name", "SIEM", stdout=out)
    plaintext = json.loads(out.getvalue().strip().splitlines()[-1])["token"]
    assert plaintext.startswith("pga_")
    stored = AuditToken.objects.get()
    assert (stored.team, stored.name, stored.created_by) == (
        team,
        "SIEM",
        "manage.py create_audit_token",
    )
    assert plaintext.startswith(stored.prefix + "_")
    secret = plaintext.removeprefix(stored.prefix + "_")
    assert secret not in {stored.secret_hash, stored.lookup_id, stored.name}
    assert len(stored.secret_hash) == 64
    # Its creation is in the team's activity log, named by prefix, never by secret.
    created = AuditRecord.objects.filter(team=team, kind="change").order_by("id").last()
    assert created is not None and created.actor == "manage.py create_audit_token"
    assert created.details["object"] == "audit token"
    assert created.details["name"] == stored.prefix
    assert secret not in json.dumps(created.details)
    assert page(client_for(plaintext))["next"] == 0


def test_the_command_refuses_an_unknown_team(db):
    with pytest.raises(CommandError, match="no team 'nope'"):
        call_command("create_audit_token", "--team", "nope", stdout=io.StringIO())
    assert not AuditToken.objects.exists()


def test_only_the_tokens_teams_sealed_records_come_in_seq_order(trail, token):
    body = page(client_for(token))
    sealed = list(AuditRecord.objects.sealed().filter(team=trail).order_by("seq"))
    assert [r["seq"] for r in body["records"]] == [r.seq for r in sealed]
    assert [r["id"] for r in body["records"]] == [r.pk for r in sealed]
    assert {r["team"] for r in body["records"]} == {trail.slug}
    assert body["next"] == sealed[-1].seq


def test_each_record_carries_what_an_auditor_reads_and_its_hash_can_be_recomputed(trail, token):
    (first, *_) = append(
        trail,
        1,
        kind=AuditRecord.Kind.PLAN_REFUSED,
        code="policy_denied",
        details={"errors": [{"path": "steps[0]", "detail": "denied by rule 1"}]},
    )
    records_seal()
    records = page(client_for(token), limit=1000)["records"]
    record = next(r for r in records if r["id"] == first.pk)
    stored = AuditRecord.objects.get(pk=first.pk)
    assert record == {
        "seq": stored.seq,
        "format": 2,
        "id": stored.pk,
        "at": stored.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "kind": "plan_refused",
        "team": trail.slug,
        "teamId": trail.pk,
        "actor": "agent:7",
        "agent": {"id": "01JAGENT000000000000000007", "name": "summariser"},
        "user": "alice@acme.dev",
        "planId": "01JABCDEFGHJKMNPQRSTVWXYZ0",
        "planHash": "ab" * 32,
        "policy": {"id": "default", "version": 3},
        "code": "policy_denied",
        "rule": {"index": 0, "description": "read issues"},
        "details": {"errors": [{"path": "steps[0]", "detail": "denied by rule 1"}]},
        "prevHash": stored.prev_hash,
        "hash": stored.hash,
        "redacted": False,
    }
    for each in records:
        assert hash_recomputed(each) == each["hash"]
        # The declared shape validates what the view wrote.
        assert AuditRecordSerializer(data=each).is_valid(), each
    # Chained: each record's prevHash is the hash before it.
    assert all(b["prevHash"] == a["hash"] for a, b in itertools.pairwise(records))


def test_a_record_of_format_1_is_recomputed_without_its_format(trail, token):
    (first, *_) = append(trail, 1)
    AuditRecord.objects.filter(pk=first.pk).update(format=1)
    records_seal()
    record = next(r for r in page(client_for(token), limit=1000)["records"] if r["id"] == first.pk)
    assert record["format"] == 1
    assert hash_recomputed(record) == record["hash"] == AuditRecord.objects.get(pk=first.pk).hash


def test_a_record_retention_emptied_is_marked_redacted_and_an_untouched_one_is_not(team, token):
    emptied, untouched = emptied_by_retention(team)
    records = {r["id"]: r for r in page(client_for(token), limit=1000)["records"]}

    assert emptied.is_redacted() and not untouched.is_redacted()
    assert records[emptied.pk]["redacted"] is True
    assert records[untouched.pk]["redacted"] is False
    # Only the emptied one: retention's own change record is whole too.
    assert [r["id"] for r in records.values() if r["redacted"]] == [emptied.pk]
    # The marked record keeps its place and stored hash, and nothing an auditor reads...
    marked = records[emptied.pk]
    assert (marked["seq"], marked["kind"], marked["hash"]) == (
        emptied.seq,
        "plan_refused",
        emptied.hash,
    )
    assert (marked["user"], marked["code"], marked["agent"], marked["details"]) == (
        "",
        "",
        None,
        {},
    )
    # ...so its hash cannot be recomputed, while the untouched one's can.
    assert hash_recomputed(marked) != marked["hash"]
    assert hash_recomputed(records[untouched.pk]) == untouched.hash
    assert records[untouched.pk]["code"] == "policy_denied"
    for each in records.values():
        assert AuditRecordSerializer(data=each).is_valid(), each


def test_a_record_with_no_agent_or_policy_has_nulls(team, token):
    (record,) = append(team, 1, agent_id=None, agent_name="", policy="", policy_version=None)
    records_seal()
    found = next(r for r in page(client_for(token))["records"] if r["id"] == record.pk)
    assert (found["agent"], found["policy"]) == (None, None)


def test_paging_by_next_reads_every_record_once_and_stays_put_at_the_end(trail, token):
    client = client_for(token)
    seen, after = [], 0
    for _ in range(100):
        body = page(client, after=after, limit=2)
        assert len(body["records"]) <= 2
        seen += [r["seq"] for r in body["records"]]
        if not body["records"]:
            assert body["next"] == after  # nothing new: ask again from the same place
            break
        after = body["next"]
    total_sealed = AuditRecord.objects.sealed().filter(team=trail).count()
    assert seen == list(range(1, total_sealed + 1))
    # Records sealed later come after the same cursor.
    records_seal()
    more = page(client, after=after)
    assert [r["seq"] for r in more["records"]] == list(
        range(total_sealed + 1, AuditRecord.objects.filter(team=trail).count() + 1)
    )


def test_another_teams_token_sees_only_its_own_team(trail, other_team):
    theirs = audit_token_create(team=other_team)[1]
    body = page(client_for(theirs), limit=1000)
    assert {r["team"] for r in body["records"]} == {other_team.slug}
    assert {r["id"] for r in body["records"]} == set(
        AuditRecord.objects.sealed().filter(team=other_team).values_list("pk", flat=True)
    )


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "Bearer pga_nothexnothe_" + "x" * 43,
        "Bearer pga_0123456789ab_" + "x" * 43,
        "Bearer pg_0123456789ab_" + "x" * 43,
        "Bearer pga_0123456789ab",
    ],
)
def test_a_missing_malformed_or_unknown_token_is_refused(trail, header):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(URL)
    assert_problem(response, 401, Code.INVALID_AUDIT_TOKEN)
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_token_with_the_right_id_and_a_wrong_secret_is_refused(team, token):
    prefix = token.rsplit("_", 1)[0]
    response = client_for(f"{prefix}_{secrets.token_urlsafe(32)}").get(URL)
    assert_problem(response, 401, Code.INVALID_AUDIT_TOKEN)


def test_an_agents_api_key_is_not_an_audit_token(trail, agent):
    response = client_for(agent.api_key).get(URL)
    assert_problem(response, 401, Code.INVALID_AUDIT_TOKEN)


def test_a_revoked_token_is_refused_and_its_revocation_is_recorded(team, token):
    stored = AuditToken.objects.get()
    assert audit_token_revoke(token=stored) is True
    assert audit_token_revoke(token=stored) is False
    assert_problem(client_for(token).get(URL), 401, Code.INVALID_AUDIT_TOKEN)
    revocations = AuditRecord.objects.filter(
        team=team, kind="change", details__action="revoked", details__object="audit token"
    )
    assert revocations.count() == 1


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"after": "-1"}, "after"),
        ({"after": "abc"}, "after"),
        ({"after": str(2**63)}, "after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "5"}, "cursor"),
    ],
)
def test_a_bad_cursor_or_limit_is_invalid_request_naming_it(trail, token, params, path):
    body = assert_problem(client_for(token).get(URL, params), 400, Code.INVALID_REQUEST)
    assert [error["path"] for error in body["errors"]] == [path]


def test_limit_defaults_to_100_and_goes_up_to_1000(team, token):
    append(team, 120)
    records_seal()
    client = client_for(token)
    assert len(page(client)["records"]) == 100
    assert len(page(client, limit=1000)["records"]) == AuditRecord.objects.filter(team=team).count()


@override_settings(PLANGATE_RATE_LIMIT="2/min")
def test_the_token_is_rate_limited_like_an_api_key(trail, token):
    client = client_for(token)
    assert client.get(URL).status_code == 200
    assert client.get(URL).status_code == 200
    response = client.get(URL)
    assert_problem(response, 429, Code.THROTTLED)
    assert int(response["Retry-After"]) >= 1


@override_settings(PLANGATE_AUTH_FAILURE_LIMIT="2/min")
def test_failed_attempts_count_per_address_and_then_even_a_good_token_waits(trail, token):
    wrong = client_for("pga_0123456789ab_" + "x" * 43)
    assert wrong.get(URL).status_code == 401
    assert wrong.get(URL).status_code == 401
    assert_problem(wrong.get(URL), 429, Code.THROTTLED)
    assert_problem(client_for(token).get(URL), 429, Code.THROTTLED)


def test_the_token_records_its_last_use(trail, token):
    assert AuditToken.objects.get().last_used_at is None
    page(client_for(token))
    assert AuditToken.objects.get().last_used_at is not None


def test_the_openapi_schema_documents_the_endpoint(client):
    schema = client.get("/v1/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/v1/audit/records"]["get"]
    assert operation["operationId"] == "audit_records_list"
    assert {p["name"] for p in operation["parameters"]} == {"after", "limit", "format"}
    assert operation["security"] == [{"auditTokenAuth": []}]
    assert {"200", "400", "401", "429"} <= set(operation["responses"])
    page_schema = schema["components"]["schemas"]["AuditRecordsPage"]
    assert set(page_schema["properties"]) == {"records", "next"}
    either = schema["components"]["schemas"]["AuditRecordInEitherFormat"]
    assert {"$ref": "#/components/schemas/OcsfEvent"} in either["oneOf"]
    record = schema["components"]["schemas"]["AuditRecord"]
    assert {"seq", "at", "kind", "team", "agent", "policy", "prevHash", "hash"} <= set(
        record["properties"]
    )
    assert record["properties"]["redacted"]["type"] == "boolean"
    assert "retention" in record["properties"]["redacted"]["description"]
    assert "redacted" in record["required"]
    assert schema["components"]["securitySchemes"]["auditTokenAuth"]["scheme"] == "bearer"
