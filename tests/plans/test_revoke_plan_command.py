"""manage.py revoke_plan: the operator's door to plan_revoke, recorded as the command."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from plans.models import Plan
from plans.services import plan_issue
from tests.conftest import plan_document


@pytest.fixture
def plan(agent) -> Plan:
    return plan_issue(agent=agent.agent, document=plan_document()).plan


def test_the_command_revokes_with_its_name_and_the_reason(plan):
    out = StringIO()

    call_command("revoke_plan", plan.pk.lower(), "--reason", "incident 42", stdout=out)

    plan.refresh_from_db()
    assert plan.status == Plan.Status.REVOKED
    assert (plan.revoked_by, plan.revoke_reason) == ("manage.py revoke_plan", "incident 42")
    assert f"revoked {plan.pk}" in out.getvalue()
    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_REVOKED)
    assert (record.actor, record.details) == ("manage.py revoke_plan", {"reason": "incident 42"})


def test_the_actor_option_names_the_person(plan):
    call_command("revoke_plan", plan.pk, "--actor", "ops@acme.dev", stdout=StringIO())

    plan.refresh_from_db()
    assert plan.revoked_by == "ops@acme.dev"


def test_an_unknown_or_revoked_plan_is_an_error(plan):
    with pytest.raises(CommandError, match="no plan"):
        call_command("revoke_plan", "01ARZ3NDEKTSV4RRFFQ69G5FAV", stdout=StringIO())
    call_command("revoke_plan", plan.pk, stdout=StringIO())
    with pytest.raises(CommandError, match="already revoked"):
        call_command("revoke_plan", plan.pk, stdout=StringIO())
    assert AuditRecord.objects.filter(kind=AuditRecord.Kind.PLAN_REVOKED).count() == 1
