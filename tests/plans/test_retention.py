"""Retention: a team's guard decisions and refused attempts older than its period are removed
in batches, after the export hook has had them; the plan and the audit trail say so, and the
chain still verifies (plans.retention, audit.retention)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.models import AuditRecord
from audit.retention import RETENTION_OBJECT, retention_export
from audit.services import record_append, records_seal
from audit.verification import chain_verify
from guard.decisions import Decision
from plans.models import Plan, PlanEvent
from plans.retention import retention_apply
from teams.models import RETENTION_DAYS_DEFAULT, Team
from tests.conftest import plan_document

from .retention_export import exported, write_rows

STREAM = "0f3c9a7be2d84c51a6b0e1f2d3c4b5a6"


def at(days_ago: float) -> str:
    moment = timezone.now() - timedelta(days=days_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event(days_ago: float, tool: str = "github_list_issues") -> dict:
    return {"at": at(days_ago), "tool": tool, "decision": Decision.ALLOWED, "step": 0}


def declare_with_events(agent, *ages: float) -> str:
    response = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json")
    assert response.status_code == 201, response.content
    plan_id = response.json()["id"]
    body = {"stream": STREAM, "seq": 1, "events": [event(age) for age in ages]}
    posted = agent.client.post(f"/v1/plans/{plan_id}/events", body, format="json")
    assert posted.status_code == 202, posted.content
    return plan_id


def refusal(team: Team, days_ago: float) -> AuditRecord:
    return record_append(
        team=team,
        kind=AuditRecord.Kind.PLAN_REFUSED,
        at=timezone.now() - timedelta(days=days_ago),
        user="alice@acme.dev",
        code="policy_denied",
        details={"detail": "a step the policy denies"},
    )


@pytest.fixture
def export_file(tmp_path, monkeypatch):
    path = tmp_path / "export.jsonl"
    monkeypatch.setenv("RETENTION_EXPORT_FILE", str(path))
    retention_export.connect(write_rows, dispatch_uid="test-export")
    yield str(path)
    retention_export.disconnect(dispatch_uid="test-export")


def retention_records(team: Team) -> list[AuditRecord]:
    return list(
        AuditRecord.objects.filter(
            team=team, kind=AuditRecord.Kind.CHANGE, details__object=RETENTION_OBJECT
        ).order_by("id")
    )


def test_a_team_keeps_decisions_400_days_unless_it_says_otherwise(team):
    assert team.retention_days == RETENTION_DAYS_DEFAULT == 400
    team.retention_days = 0
    with pytest.raises(ValidationError) as refused:
        team.full_clean()
    assert "retention_days" in refused.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        Team.objects.filter(pk=team.pk).update(retention_days=3651)
    team.refresh_from_db()
    assert team.retention_days == 400


def test_old_decisions_and_refusals_are_exported_then_removed_and_the_chain_verifies(
    agent, team, export_file
):
    plan_id = declare_with_events(agent, 500, 450, 10)
    old_refusal, new_refusal = refusal(team, 401), refusal(team, 2)
    records_seal()
    old_decisions = list(
        AuditRecord.objects.filter(plan_id=plan_id, kind=AuditRecord.Kind.DECISION)
        .order_by("at")
        .values_list("pk", flat=True)[:2]
    )

    results = retention_apply(batch_size=1)

    # The plan's two old decisions are gone, the recent one stays.
    assert list(PlanEvent.objects.filter(plan_id=plan_id).values_list("tool", flat=True)) == [
        "github_list_issues"
    ]
    assert PlanEvent.objects.filter(plan_id=plan_id).get().occurred_at > timezone.now() - timedelta(
        days=11
    )
    # Their records and the old refusal are emptied, in place; the rest are whole.
    emptied = AuditRecord.objects.filter(team=team, redacted_at__isnull=False)
    assert sorted(emptied.values_list("pk", flat=True)) == sorted([*old_decisions, old_refusal.pk])
    assert all(r.user == "" and r.details == {} and r.hash for r in emptied)
    assert AuditRecord.objects.get(pk=new_refusal.pk).redacted_at is None
    # Each row was exported while still whole, before it went.
    lines = exported(export_file)
    assert sorted((line["model"], line["id"]) for line in lines) == sorted(
        [("PlanEvent", line["id"]) for line in lines if line["model"] == "PlanEvent"]
        + [("AuditRecord", pk) for pk in [*old_decisions, old_refusal.pk]]
    )
    assert len([line for line in lines if line["model"] == "PlanEvent"]) == 2
    assert all(line["whole_when_exported"] for line in lines)
    assert {line["user"] for line in lines if line["model"] == "AuditRecord"} == {"alice@acme.dev"}
    # The plan and the trail say it happened, with the cut-off.
    (result,) = [r for r in results if r.team_id == team.pk]
    plan = Plan.objects.get(pk=plan_id)
    assert plan.decisions_removed_before == result.cutoff
    (record,) = retention_records(team)
    assert record.details["cutoff"] == result.cutoff.isoformat()
    assert record.details["decisionsRemoved"] == 2
    assert record.details["recordsRedacted"] == {"decision": 2, "plan_refused": 1}
    assert record.details["redacted"] == 3
    assert record.actor == ""  # no door around the call here; the task names itself
    records_seal()
    report = chain_verify(team=team)
    assert report.intact, report.broken


def test_a_second_run_finds_nothing_and_records_nothing(agent, team, export_file):
    declare_with_events(agent, 500)
    records_seal()
    retention_apply()
    first_export = exported(export_file)

    again = retention_apply()

    assert exported(export_file) == first_export
    assert all(r.decisions_removed == 0 and not r.records_redacted for r in again)
    assert len(retention_records(team)) == 1
    records_seal()
    assert chain_verify(team=team).intact


def test_an_export_that_fails_keeps_the_batch(agent, team):
    plan_id = declare_with_events(agent, 500)
    records_seal()

    def refuse(sender, **kwargs):
        raise OSError("the archive is full")

    retention_export.connect(refuse, dispatch_uid="test-refuse")
    try:
        with pytest.raises(OSError):
            retention_apply()
    finally:
        retention_export.disconnect(dispatch_uid="test-refuse")

    assert PlanEvent.objects.filter(plan_id=plan_id).count() == 1
    assert not AuditRecord.objects.filter(redacted_at__isnull=False).exists()
    assert Plan.objects.get(pk=plan_id).decisions_removed_before is None
    assert retention_records(team) == []


def test_a_team_with_a_shorter_period_loses_more(agent, team, other_team):
    Team.objects.filter(pk=team.pk).update(retention_days=30)
    plan_id = declare_with_events(agent, 45, 5)
    other_refusal = refusal(other_team, 45)
    records_seal()

    retention_apply()

    assert PlanEvent.objects.filter(plan_id=plan_id).count() == 1
    assert AuditRecord.objects.get(pk=other_refusal.pk).redacted_at is None
    assert retention_records(other_team) == []


def test_verification_refuses_an_emptied_record_retention_does_not_remove(team):
    record_append(team=team, kind=AuditRecord.Kind.CHANGE, details={"object": "member"})
    records_seal()
    AuditRecord.objects.filter(team=team).update(redacted_at=timezone.now(), details={})

    report = chain_verify(team=team)

    assert report.broken is not None
    assert report.broken.problem == "changed"
    assert "never removes" in report.broken.explanation


def test_verification_refuses_emptied_records_no_retention_record_counts(agent, team):
    declare_with_events(agent, 500, 450)
    records_seal()
    retention_apply()
    records_seal()
    assert chain_verify(team=team).intact
    # A decision emptied by hand, not by retention: one more than the trail accounts for.
    AuditRecord.objects.filter(
        team=team, kind=AuditRecord.Kind.PLAN_ISSUED, redacted_at__isnull=True
    ).update(kind=AuditRecord.Kind.DECISION, redacted_at=timezone.now())

    report = chain_verify(team=team)

    assert report.broken is not None
    assert "no retention record accounts for" in report.broken.explanation
