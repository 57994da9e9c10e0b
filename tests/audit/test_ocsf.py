"""Every audit record as an OCSF event (audit.ocsf), validated against the OCSF 1.8.0 schema
as the schema package publishes it (ocsf-json-schema turns a class into JSON Schema, with
the profiles the event names; jsonschema checks it)."""

from __future__ import annotations

import json
from datetime import timedelta
from functools import cache
from typing import Any

import jsonschema
import pytest
from django.utils import timezone
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema
from rest_framework.test import APIClient

from audit.models import AuditRecord
from audit.ocsf import MAPPINGS, OCSF_VERSION, ocsf_event
from audit.services import records_seal
from audit.tokens import audit_token_create
from plans.models import Plan
from plans.services import plan_revoke
from tests.audit.helpers import append, emptied_by_retention
from tests.conftest import plan_document

_CLASS_NAMES = {6003: "api_activity", 3001: "account_change", 3004: "entity_management"}


@cache
def _schemas() -> OcsfJsonSchemaEmbedded:
    return OcsfJsonSchemaEmbedded(get_ocsf_schema(OCSF_VERSION))


def assert_valid(event: dict[str, Any]) -> None:
    """The event validates against its class in OCSF 1.8.0, with the profiles it names."""
    schema = _schemas().get_class_schema(
        _CLASS_NAMES[event["class_uid"]], profiles=event["metadata"]["profiles"]
    )
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(event), key=lambda error: list(error.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


#: a record of each kind as its writer fills it in (details included)
EXAMPLES: dict[AuditRecord.Kind, dict[str, Any]] = {
    AuditRecord.Kind.PLAN_ISSUED: {
        "code": "",
        "rule": None,
        "details": {"goal": "g", "steps": 2, "kid": "k", "iat": 1, "exp": 2, "ttl": 900},
    },
    AuditRecord.Kind.PLAN_REFUSED: {"code": "policy_denied", "details": {"errors": []}},
    AuditRecord.Kind.TOKEN_REFRESHED: {"code": "", "details": {"kid": "k", "policyVersion": 3}},
    AuditRecord.Kind.REFRESH_REFUSED: {"code": "plan_revoked", "details": {}},
    AuditRecord.Kind.DECISION: {
        "code": "policy_denied",
        "details": {"tool": "github_delete_repo", "step": 0, "reason": "r", "argsDigest": ""},
    },
    AuditRecord.Kind.DECISIONS_LOST: {"code": "", "rule": None, "details": {"lost": 3}},
    AuditRecord.Kind.PLAN_ENDED: {"code": "completed", "rule": None, "details": {}},
    AuditRecord.Kind.PLAN_REVOKED: {
        "actor": "admin",
        "agent_id": None,
        "rule": None,
        "code": "",
        "details": {"reason": "leak"},
    },
    AuditRecord.Kind.CHANGE: {
        "actor": "admin",
        "agent_id": None,
        "user": "",
        "plan_id": "",
        "policy": "",
        "policy_version": None,
        "rule": None,
        "code": "",
        "details": {"object": "policy", "id": 4, "name": "default", "action": "published"},
    },
    AuditRecord.Kind.APPROVAL_REQUESTED: {"code": "approval_pending", "details": {}},
    AuditRecord.Kind.APPROVAL_DECIDED: {"actor": "bob", "code": "approved", "details": {}},
    AuditRecord.Kind.APPROVAL_EXPIRED: {"actor": "", "code": "approval_expired", "details": {}},
    AuditRecord.Kind.APPROVAL_NOTIFIED: {"actor": "", "code": "", "details": {"channel": "e-mail"}},
    AuditRecord.Kind.PLAN_DELEGATED: {"code": "", "details": {"child": "01J..."}},
}


def test_every_kind_has_a_mapping_and_an_example():
    """A kind added to the trail without its OCSF function fails here."""
    assert set(MAPPINGS) == set(AuditRecord.Kind)
    assert set(EXAMPLES) == set(AuditRecord.Kind)


@pytest.mark.parametrize("kind", list(AuditRecord.Kind), ids=str)
def test_each_kind_validates_against_the_ocsf_schema(team, kind):
    (record,) = append(team, kind=kind, **EXAMPLES[kind])
    records_seal()
    record.refresh_from_db()
    event = ocsf_event(record, team.slug)
    assert_valid(event)
    assert event["metadata"]["sequence"] == record.seq
    assert event["metadata"]["uid"] == f"{team.slug}:{record.seq}"
    assert event["unmapped"]["plangate"]["hash"] == record.hash
    assert event["time"] == int(record.at.timestamp() * 1000)


def test_a_blocked_decision_is_a_denied_api_activity_naming_the_tool_and_policy(team):
    (record,) = append(team, **EXAMPLES[AuditRecord.Kind.DECISION])
    records_seal()
    record.refresh_from_db()
    event = ocsf_event(record, team.slug)
    assert (event["class_uid"], event["type_uid"]) == (6003, 600399)
    assert event["api"]["operation"] == "github_delete_repo"
    assert (event["action_id"], event["disposition_id"], event["status_id"]) == (2, 2, 2)
    assert event["policy"] == {"name": "default", "uid": "default", "version": "3"}
    assert event["actor"]["app_uid"] == record.agent_id
    assert event["actor"]["authorizations"][0]["decision"] == "policy_denied"


def test_an_allowed_decision_is_an_allowed_api_activity(team):
    (record,) = append(team, code="allowed", details={"tool": "github_get_issue"})
    records_seal()
    record.refresh_from_db()
    event = ocsf_event(record, team.slug)
    assert (event["action_id"], event["disposition_id"], event["status_id"]) == (1, 1, 1)


def test_a_members_change_is_an_account_change(team):
    (record,) = append(
        team,
        kind=AuditRecord.Kind.CHANGE,
        actor="admin",
        agent_id=None,
        user="",
        details={"object": "member", "id": 3, "name": "dora@acme.dev", "action": "disabled"},
    )
    records_seal()
    record.refresh_from_db()
    event = ocsf_event(record, team.slug)
    assert_valid(event)
    assert (event["class_uid"], event["activity_id"]) == (3001, 5)
    assert event["user"]["email_addr"] == "dora@acme.dev"


def test_a_record_emptied_by_retention_keeps_its_place_and_validates(team):
    old, _ = emptied_by_retention(team)
    event = ocsf_event(old, team.slug)
    assert_valid(event)
    assert event["unmapped"]["plangate"]["redacted"] is True
    assert "details" not in event["unmapped"]["plangate"]


def test_the_records_of_a_real_plan_validate(agent, member):
    """Records as the services write them: a declaration, a refused one, a refresh, guard
    decisions, a revocation and the console's changes."""
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    plan = response.json()
    refused = agent.client.post(
        "/v1/plans",
        {"plan": plan_document(steps=[{"tool": "github_delete_repo"}])},
        format="json",
    )
    assert refused.status_code == 403
    refreshed = agent.client.post(
        f"/v1/plans/{plan['id']}/refresh", {"token": plan["token"]}, format="json"
    )
    assert refreshed.status_code == 200, refreshed.content
    now = timezone.now()
    batch = {
        "events": [
            {
                "at": (now - timedelta(seconds=1)).isoformat(),
                "tool": "github_list_issues",
                "decision": "allowed",
                "step": 0,
                "argsDigest": "",
            },
            {"at": now.isoformat(), "tool": "send_email", "decision": "not_in_plan"},
        ]
    }
    events = agent.client.post(f"/v1/plans/{plan['id']}/events", batch, format="json")
    assert events.status_code == 202, events.content
    plan_revoke(plan=Plan.objects.get(pk=plan["id"]), by="admin", reason="test")
    records_seal()
    records = list(AuditRecord.objects.filter(team=agent.team).order_by("seq"))
    kinds = {record.kind for record in records}
    assert {"plan_issued", "plan_refused", "token_refreshed", "decision", "plan_revoked"} <= kinds
    for record in records:
        assert_valid(ocsf_event(record, agent.team.slug))


def test_the_records_api_answers_ocsf_events_on_the_same_pages(team):
    append(team, 3)
    records_seal()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {audit_token_create(team=team, name='siem')[1]}")
    plain = client.get("/v1/audit/records", {"limit": 2}).json()
    ocsf = client.get("/v1/audit/records", {"limit": 2, "format": "ocsf"}).json()
    assert ocsf["next"] == plain["next"]
    assert [event["metadata"]["sequence"] for event in ocsf["records"]] == [
        record["seq"] for record in plain["records"]
    ]
    for event in ocsf["records"]:
        assert_valid(event)
    refused = client.get("/v1/audit/records", {"format": "cef"})
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/problem+json"
    assert [error["path"] for error in refused.json()["errors"]] == ["format"]


def test_the_consoles_ocsf_export_holds_the_filtered_records_as_events(
    team, other_team, auditor_client
):
    append(team, 3, kind=AuditRecord.Kind.PLAN_REFUSED, code="policy_denied")
    append(team, 2)
    append(other_team, 2, kind=AuditRecord.Kind.PLAN_REFUSED, code="policy_denied")
    records_seal()
    page = auditor_client.get("/admin/audit/auditrecord/?kind=plan_refused").content.decode()
    assert 'href="/admin/audit/auditrecord/export/ocsf/?kind=plan_refused"' in page
    assert "Export OCSF (JSON Lines)" in page
    response = auditor_client.get("/admin/audit/auditrecord/export/ocsf/?kind=plan_refused")
    assert response.status_code == 200
    assert response["Content-Disposition"].endswith('.ocsf.jsonl"')
    events = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert len(events) == 3  # the auditor's team only, the filter applied
    for event in events:
        assert_valid(event)
        assert event["metadata"]["tenant_uid"] == team.slug
        assert event["status_code"] == "policy_denied"
