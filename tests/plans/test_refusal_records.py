"""The audit trail of declarations and refreshes: one record per refusal of a known agent
(what was asked, the code, each bad path, the policy version that refused), one per
success, and a per-day count of the refusals that name no agent."""

from __future__ import annotations

import hashlib
import logging

import pytest
import rfc8785
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditRecord, UnattributedRefusal
from guard.plan import validate_plan
from kernel.problems import Code
from members.models import ApiKey
from members.services import api_key_revoke
from plans.models import Plan
from plans.services import plan_revoke
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

from .helpers import assert_problem, claims_of, decode_segment

Kind = AuditRecord.Kind
# The kinds these requests append; the fixtures' own changes (kind ``change``) are not theirs.
PLAN_KINDS = (
    Kind.PLAN_ISSUED,
    Kind.PLAN_REFUSED,
    Kind.TOKEN_REFRESHED,
    Kind.REFRESH_REFUSED,
    Kind.PLAN_REVOKED,
)


def plan_records():
    return AuditRecord.objects.filter(kind__in=PLAN_KINDS)


def declare(client: APIClient, body: object):
    return client.post("/v1/plans", body, format="json")


def declared(persona, **plan_fields) -> dict:
    response = declare(persona.client, {"plan": plan_document(**plan_fields)})
    assert response.status_code == 201, response.content
    return response.json()


def refresh(persona, plan_id: str, token: object):
    return persona.client.post(f"/v1/plans/{plan_id}/refresh", {"token": token}, format="json")


def kid_of(token: str) -> str:
    return decode_segment(token.split(".")[0])["kid"]


def only_record(kind: AuditRecord.Kind) -> AuditRecord:
    records = list(AuditRecord.objects.filter(kind=kind))
    assert len(records) == 1, records
    return records[0]


def error_paths(record: AuditRecord) -> list[str]:
    return [error["path"] for error in record.details["errors"]]


def hash_of(document: dict) -> str:
    return hashlib.sha256(rfc8785.dumps(validate_plan(document))).hexdigest()


def assert_names_the_agent(record: AuditRecord, persona) -> None:
    assert record.team_id == persona.team.pk
    assert record.actor == f"agent:{persona.agent.pk}"
    assert record.agent_name == persona.agent.name


def unattributed() -> dict[str, int]:
    today = timezone.now().date()
    return dict(UnattributedRefusal.objects.filter(day=today).values_list("code", "count"))


# --- refused declarations -----------------------------------------------------------------


def test_a_malformed_body_is_recorded_with_its_paths_and_the_valid_plans_hash(agent):
    response = declare(agent.client, {"plan": plan_document(), "ttl": 30, "tll": 60})

    assert_problem(response, 400, Code.INVALID_REQUEST)
    record = only_record(Kind.PLAN_REFUSED)
    assert_names_the_agent(record, agent)
    assert record.code == Code.INVALID_REQUEST
    assert sorted(error_paths(record)) == ["tll", "ttl"]
    assert record.details["status"] == 400
    assert record.user == "alice@acme.dev"
    assert record.plan_hash == hash_of(plan_document())
    assert (record.policy, record.policy_version, record.plan_id) == ("", None, "")
    assert plan_records().count() == 1


def test_a_body_that_is_not_an_object_is_recorded_without_a_user(agent):
    assert_problem(declare(agent.client, [1, 2]), 400, Code.INVALID_REQUEST)

    record = only_record(Kind.PLAN_REFUSED)
    assert (record.user, record.plan_hash) == ("", "")
    assert error_paths(record) == [""]


def test_an_invalid_plan_is_recorded_with_each_path_and_the_user_as_given(agent):
    document = plan_document(user="not an e-mail", goal="")
    document["steps"][0]["tool"] = "github_*"

    assert_problem(declare(agent.client, {"plan": document}), 400, Code.INVALID_PLAN)

    record = only_record(Kind.PLAN_REFUSED)
    assert record.code == Code.INVALID_PLAN
    assert {"plan.goal", "plan.user", "plan.steps[0].tool"} <= set(error_paths(record))
    assert record.user == "not an e-mail"
    assert record.plan_hash == ""  # the plan was not valid: it has no hash


def test_an_unknown_user_is_recorded_as_given(agent, outsider):
    document = plan_document(user="Olga@Globex.test")

    assert_problem(declare(agent.client, {"plan": document}), 403, Code.UNKNOWN_USER)

    record = only_record(Kind.PLAN_REFUSED)
    assert_names_the_agent(record, agent)
    assert record.code == Code.UNKNOWN_USER
    assert record.user == "Olga@Globex.test"
    assert record.plan_hash == hash_of(document)
    assert record.details == {"status": 403, "errors": []}
    assert Plan.objects.count() == 0


def test_a_disabled_user_is_recorded(agent, disabled_member):
    document = plan_document(user=disabled_member.email)

    assert_problem(declare(agent.client, {"plan": document}), 403, Code.USER_DISABLED)

    record = only_record(Kind.PLAN_REFUSED)
    assert (record.code, record.user) == (Code.USER_DISABLED, "dora@acme.dev")


def test_a_policy_denial_is_recorded_with_the_version_and_the_rule_that_refused(
    agent, policy_version
):
    document = plan_document()
    document["steps"].append({"tool": "github_delete_repo"})
    document["steps"].append({"tool": "deploy", "maxCalls": 1})

    assert_problem(declare(agent.client, {"plan": document}), 403, Code.POLICY_DENIED)

    record = only_record(Kind.PLAN_REFUSED)
    assert record.code == Code.POLICY_DENIED
    assert (record.policy, record.policy_version) == ("default", policy_version.number)
    assert record.rule == {"index": 1, "description": "deny github_delete_* (rules[1])"}
    assert error_paths(record) == ["plan.steps[2]", "plan.steps[3]"]
    assert record.plan_hash == hash_of(document)


def test_a_denial_by_the_policys_default_names_no_rule(agent):
    document = plan_document(steps=[{"tool": "deploy"}])

    assert_problem(declare(agent.client, {"plan": document}), 403, Code.POLICY_DENIED)

    record = only_record(Kind.PLAN_REFUSED)
    assert record.rule == {"index": None, "description": "the policy default (deny)"}
    assert (record.policy, record.policy_version) == ("default", 1)


def test_a_disabled_agent_is_known_and_its_refusal_recorded(agent):
    agent.agent.is_active = False
    agent.agent.save()

    assert_problem(declare(agent.client, {"plan": plan_document()}), 403, Code.AGENT_DISABLED)

    record = only_record(Kind.PLAN_REFUSED)
    assert_names_the_agent(record, agent)
    assert (record.code, record.user) == (Code.AGENT_DISABLED, "alice@acme.dev")
    assert unattributed() == {}


def test_a_refusal_the_trail_cannot_take_is_still_answered_and_logged(agent, outsider, caplog):
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        if connection.vendor == "postgresql":  # it drops no table with foreign keys unchecked
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"DROP TABLE {connection.ops.quote_name(AuditRecord._meta.db_table)}")

    with caplog.at_level(logging.ERROR, logger="plans.records"):
        response = declare(agent.client, {"plan": plan_document(user=outsider.email)})

    assert_problem(response, 403, Code.UNKNOWN_USER)
    assert "could not record the plan_refused refusal (unknown_user)" in caplog.text


# --- refused refreshes --------------------------------------------------------------------


def test_a_token_of_another_plan_is_recorded_against_the_plan_named(agent):
    first, second = declared(agent), declared(agent)

    assert_problem(refresh(agent, first["id"], second["token"]), 409, Code.PLAN_MISMATCH)

    record = only_record(Kind.REFRESH_REFUSED)
    assert_names_the_agent(record, agent)
    assert record.code == Code.PLAN_MISMATCH
    assert (record.plan_id, record.plan_hash) == (first["id"], first["planHash"])
    assert record.user == "alice@acme.dev"
    assert record.details["status"] == 409


def test_a_revoked_plans_refresh_is_recorded(agent):
    issued = declared(agent)
    plan_revoke(plan=Plan.objects.get(pk=issued["id"]), by="test")

    assert_problem(refresh(agent, issued["id"], issued["token"]), 410, Code.PLAN_REVOKED)

    record = only_record(Kind.REFRESH_REFUSED)
    assert (record.code, record.plan_id) == (Code.PLAN_REVOKED, issued["id"])


def test_an_invalid_token_is_recorded(agent):
    issued = declared(agent)

    assert_problem(refresh(agent, issued["id"], "not-a-token"), 401, Code.INVALID_TOKEN)

    record = only_record(Kind.REFRESH_REFUSED)
    assert (record.code, record.plan_id) == (Code.INVALID_TOKEN, issued["id"])
    assert unattributed() == {}  # a 401 of a known agent: stored, not counted


def test_a_policy_that_now_denies_is_recorded_with_its_new_version(agent, team):
    issued = declared(agent)
    denying = {**POLICY, "rules": [{"effect": "deny", "tools": ["github_get_*"]}, *POLICY["rules"]]}
    version = policy_set(team=team, slug="default", document=denying)

    assert_problem(refresh(agent, issued["id"], issued["token"]), 403, Code.POLICY_DENIED)

    record = only_record(Kind.REFRESH_REFUSED)
    assert (record.policy, record.policy_version) == ("default", version.number)
    assert record.rule == {"index": 0, "description": "deny github_get_* (rules[0])"}
    assert error_paths(record) == ["plan.steps[1]"]


def test_a_malformed_refresh_body_is_recorded_against_the_plan_id_it_named(agent):
    issued = declared(agent)

    response = agent.client.post(f"/v1/plans/{issued['id']}/refresh", {"token": 5}, format="json")

    assert_problem(response, 400, Code.INVALID_REQUEST)
    record = only_record(Kind.REFRESH_REFUSED)
    assert (record.plan_id, error_paths(record)) == (issued["id"], ["token"])


def test_a_refresh_of_no_plan_keeps_no_plan_id_that_is_not_one(agent):
    issued = declared(agent)

    assert_problem(refresh(agent, "x" * 26, issued["token"]), 404, Code.PLAN_NOT_FOUND)

    record = only_record(Kind.REFRESH_REFUSED)
    assert record.plan_id == ""
    assert "planId" not in record.details


def test_a_refresh_of_another_teams_plan_names_it_only_in_the_details(agent, other_agent):
    theirs = declared(other_agent, user="olga@globex.test")
    ours = declared(agent)

    response = refresh(agent, theirs["id"], ours["token"])

    assert_problem(response, 404, Code.PLAN_NOT_FOUND)
    record = only_record(Kind.REFRESH_REFUSED)
    assert record.team_id == agent.team.pk
    # Their plan's timeline (records by plan id) must not show another team's attempt.
    assert (record.plan_id, record.plan_hash, record.user) == ("", "", "")
    assert record.details["planId"] == theirs["id"]


def test_a_refusal_before_the_service_names_the_agents_own_plan(agent, other_agent):
    theirs, ours = declared(other_agent, user="olga@globex.test"), declared(agent)
    for plan_id in (ours["id"], theirs["id"]):
        agent.client.post(f"/v1/plans/{plan_id}/refresh", {"tokn": "x"}, format="json")

    mine, other = AuditRecord.objects.filter(kind=Kind.REFRESH_REFUSED).order_by("id")
    assert (mine.plan_id, mine.plan_hash, mine.user) == (
        ours["id"],
        ours["planHash"],
        "alice@acme.dev",
    )
    assert "planId" not in mine.details
    assert (other.plan_id, other.details["planId"]) == ("", theirs["id"])


# --- successes ----------------------------------------------------------------------------


def test_a_declaration_appends_exactly_one_plan_issued(agent, policy_version):
    response = declare(agent.client, {"plan": plan_document(), "ttl": 120})

    body = response.json()
    claims = claims_of(body["token"])
    record = only_record(Kind.PLAN_ISSUED)
    assert plan_records().count() == 1
    assert_names_the_agent(record, agent)
    assert (record.plan_id, record.plan_hash) == (body["id"], body["planHash"])
    assert record.user == "alice@acme.dev"
    assert (record.policy, record.policy_version) == ("default", policy_version.number)
    assert record.details == {
        "goal": "Summarise open issues",
        "steps": 2,
        "kid": kid_of(body["token"]),
        "iat": claims["iat"],
        "exp": claims["exp"],
        "ttl": 120,
    }
    assert record.code == ""


def test_a_refresh_appends_exactly_one_token_refreshed(agent, team):
    issued = declared(agent)
    newer = policy_set(team=team, slug="default", document={**POLICY, "default": "allow"})

    response = refresh(agent, issued["id"], issued["token"])

    assert response.status_code == 200, response.content
    claims = claims_of(response.json()["token"])
    record = only_record(Kind.TOKEN_REFRESHED)
    assert plan_records().count() == 2  # and the plan_issued before it
    assert_names_the_agent(record, agent)
    assert (record.plan_id, record.policy_version) == (issued["id"], newer.number)
    assert record.details == {
        "kid": kid_of(response.json()["token"]),
        "iat": claims["iat"],
        "exp": claims["exp"],
        "policyVersion": newer.number,
    }


# --- refusals that name no agent ----------------------------------------------------------


@pytest.mark.parametrize("header", [None, "Bearer pg_unknown_key", "Token abc"])
def test_a_request_with_no_usable_key_is_counted_not_stored(db, header):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)

    for _ in range(2):
        assert_problem(declare(client, {"plan": plan_document()}), 401, Code.INVALID_API_KEY)

    assert unattributed() == {Code.INVALID_API_KEY: 2}
    assert not AuditRecord.objects.exists()  # no agent, no team: nothing to name


def test_a_revoked_key_is_counted_not_stored(agent):
    api_key_revoke(api_key=ApiKey.objects.get(agent=agent.agent))

    assert_problem(declare(agent.client, {"plan": plan_document()}), 401, Code.INVALID_API_KEY)

    assert unattributed() == {Code.INVALID_API_KEY: 1}
    assert not plan_records().exists()


@override_settings(PLANGATE_RATE_LIMIT="1/day")  # a day: no window ends during the test
def test_a_throttled_request_is_counted_not_stored(agent):
    declared(agent)

    assert_problem(declare(agent.client, {"plan": plan_document()}), 429, Code.THROTTLED)

    assert unattributed() == {Code.THROTTLED: 1}
    assert list(plan_records().values_list("kind", flat=True)) == [Kind.PLAN_ISSUED]


@override_settings(PLANGATE_AUTH_FAILURE_LIMIT="1/day")
def test_an_address_over_its_failed_authentication_limit_is_counted_as_throttled(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer pg_unknown_key")

    assert_problem(declare(client, {"plan": plan_document()}), 401, Code.INVALID_API_KEY)
    assert_problem(declare(client, {"plan": plan_document()}), 429, Code.THROTTLED)

    assert unattributed() == {Code.INVALID_API_KEY: 1, Code.THROTTLED: 1}
    assert not AuditRecord.objects.exists()


@pytest.mark.parametrize(("user", "recorded"), [(5, "5"), (None, "null"), (["a"], '["a"]')])
def test_a_user_that_is_not_a_string_is_recorded_as_its_json(agent, user, recorded):
    document = plan_document(user=user)

    assert_problem(declare(agent.client, {"plan": document}), 400, Code.INVALID_PLAN)

    assert only_record(Kind.PLAN_REFUSED).user == recorded


def test_a_very_long_user_is_cut_and_marked(agent):
    user = "a" * 300 + "@acme.dev"

    declare(agent.client, {"plan": plan_document(user=user)})

    recorded = only_record(Kind.PLAN_REFUSED).user
    assert len(recorded) == 254
    assert recorded == user[:253] + "…"
