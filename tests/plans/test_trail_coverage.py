"""verify_audit holds the tables the console's pages read (the decision log, the plans,
their tokens) to the audit trail: a row edited, deleted or inserted there without its record
is named (plans.trail_coverage), on top of the chain's own check."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from audit.services import records_seal
from audit.verification import chain_report_line, chain_verify
from plans.models import Plan, PlanEvent, PlanToken
from plans.services import plan_revoke
from tests.conftest import plan_document

CHANGED = "matches no record: it was changed or inserted"


def sql(statement: str, model, *params) -> None:
    """As a database administrator would: straight SQL on ``model``'s table, no model code."""
    with connection.cursor() as cursor:
        cursor.execute(statement.format(table=model._meta.db_table), params)


@pytest.fixture
def trail(agent):
    """A real plan: declared, refreshed, two guard decisions; sealed."""
    plan = agent.client.post("/v1/plans", {"plan": plan_document()}, format="json").json()
    refreshed = agent.client.post(
        f"/v1/plans/{plan['id']}/refresh", {"token": plan["token"]}, format="json"
    )
    assert refreshed.status_code == 200
    now = timezone.now()
    events = [
        {
            "at": (now - timedelta(seconds=2)).isoformat(),
            "tool": "github_list_issues",
            "decision": "allowed",
            "step": 0,
            "reason": "ok",
        },
        {"at": now.isoformat(), "tool": "send_email", "decision": "not_in_plan"},
    ]
    response = agent.client.post(
        f"/v1/plans/{plan['id']}/events", {"events": events}, format="json"
    )
    assert response.status_code == 202
    records_seal()
    return agent.team, Plan.objects.get(pk=plan["id"])


def problems(team) -> list[str]:
    return chain_verify(team=team).tables.problems


def test_an_untouched_trail_agrees_with_its_tables(trail):
    team, _ = trail
    report = chain_verify(team=team)
    assert report.intact, report.tables.problems
    assert report.tables.checked == {"decisions": 2, "plans": 1, "tokens": 2, "revocations": 0}
    assert "agree with the trail (2 decisions, 1 plans, 2 tokens, 0 revocations)" in (
        chain_report_line(report)
    )


def test_an_edited_decision_row_is_named(trail):
    team, plan = trail
    event = PlanEvent.objects.get(plan=plan, tool="send_email")
    sql("UPDATE {table} SET decision = 'allowed' WHERE id = %s", PlanEvent, event.pk)
    found = problems(team)
    assert f"decision row id {event.pk} of plan {plan.pk} {CHANGED}" in found
    assert any(
        p.startswith("decision record seq ") and "its row was changed or deleted" in p
        for p in found
    )
    assert not chain_verify(team=team).intact
    assert "DISAGREE" in chain_report_line(chain_verify(team=team))


def test_a_deleted_decision_row_is_named(trail):
    team, plan = trail
    event = PlanEvent.objects.get(plan=plan, tool="send_email")
    sql("DELETE FROM {table} WHERE id = %s", PlanEvent, event.pk)
    (problem,) = problems(team)
    assert problem.startswith("decision record seq ") and "matches no row" in problem


def test_an_inserted_decision_row_is_named(trail):
    team, plan = trail
    event = PlanEvent.objects.get(plan=plan, tool="send_email")
    event.pk = None
    event.reason = "never decided"
    event.save()
    assert problems(team) == [f"decision row id {event.pk} of plan {plan.pk} {CHANGED}"]


def test_an_edited_plan_is_named(trail):
    team, plan = trail
    sql("UPDATE {table} SET goal = 'something else' WHERE id = %s", Plan, plan.pk)
    found = problems(team)
    assert f"plan row {plan.pk} {CHANGED}" in found


def test_an_inserted_plan_is_named(trail):
    team, plan = trail
    copy = Plan.objects.get(pk=plan.pk)
    copy.pk = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
    copy.status_idx = None
    copy.save(force_insert=True)
    assert problems(team) == [f"plan row 01JZZZZZZZZZZZZZZZZZZZZZZZ {CHANGED}"]


def test_edited_deleted_and_inserted_tokens_are_named(trail):
    team, plan = trail
    issued, refreshed = PlanToken.objects.filter(plan=plan).order_by("issued_at", "pk")
    sql("UPDATE {table} SET kid = 'forged' WHERE id = %s", PlanToken, issued.pk)
    assert f"token row id {issued.pk} of plan {plan.pk} {CHANGED}" in problems(team)
    sql("DELETE FROM {table} WHERE id = %s", PlanToken, refreshed.pk)
    assert any(p.startswith("token_refreshed record seq ") for p in problems(team))
    extra = PlanToken.objects.get(pk=issued.pk)
    extra.pk = None
    extra.kid = "another"
    extra.save()
    assert f"token row id {extra.pk} of plan {plan.pk} {CHANGED}" in problems(team)


def test_the_command_fails_naming_the_row(trail, capsys):
    from django.core.management import CommandError, call_command

    _, plan = trail
    event = PlanEvent.objects.get(plan=plan, tool="send_email")
    sql("UPDATE {table} SET reason = 'edited' WHERE id = %s", PlanEvent, event.pk)
    with pytest.raises(CommandError):
        call_command("verify_audit")
    assert f"decision row id {event.pk}" in capsys.readouterr().err


def test_a_deleted_plan_is_named_by_its_record(trail):
    """Deleted with everything that hangs from it (its decisions and tokens go too): its
    plan_issued record is left with no row."""
    team, plan = trail
    Plan.objects.filter(pk=plan.pk).delete()
    found = problems(team)
    assert any(
        p.startswith("plan_issued record seq ") and f"of plan {plan.pk} matches no row" in p
        for p in found
    ), found


def test_a_revocation_must_agree_with_its_record(trail):
    team, plan = trail
    plan_revoke(plan=plan, by="admin", reason="leaked key")
    records_seal()
    assert chain_verify(team=team).intact
    sql("UPDATE {table} SET revoke_reason = 'routine' WHERE id = %s", Plan, plan.pk)
    found = problems(team)
    assert f"revoked plan row {plan.pk} {CHANGED}" in found
    assert any(p.startswith("plan_revoked record seq ") for p in found)


def test_a_plan_marked_revoked_without_its_record_is_named(trail):
    team, plan = trail
    sql(
        "UPDATE {table} SET status = 'revoked', revoked_by = 'nobody' WHERE id = %s",
        Plan,
        plan.pk,
    )
    assert f"revoked plan row {plan.pk} {CHANGED}" in problems(team)
