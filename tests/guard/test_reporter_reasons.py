"""An allowed decision keeps the guard's reason (which step, which rule admitted it) all the
way to the trail, and a decision of the policy's default is named without a rule number."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from audit.models import AuditRecord
from guard.decisions import Decision
from plans.models import PlanEvent
from tests.conftest import plan_document

PLAN = plan_document(
    steps=[{"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}}]
)


def superuser_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.test", "pw-unused"))
    return client


def test_an_allowed_decision_stores_the_reason_of_the_rule_that_admitted_it(live_any_guard):
    guard = live_any_guard()
    declared = guard.declare(PLAN)
    decision = guard.check("github_list_issues", {"repo": "acme/public-app"})
    guard.close(timeout=60)  # a busy machine: wait for the last batch

    assert decision.code == Decision.ALLOWED
    event = PlanEvent.objects.get(plan_id=declared.plan_id, decision=Decision.ALLOWED)
    # What the guard said, as it said it: the step and the rule that admitted the call.
    assert event.reason == decision.reason
    assert "github_list_issues" in event.reason
    assert "admits this call" in event.reason
    record = AuditRecord.objects.get(plan_id=declared.plan_id, kind="decision", code="allowed")
    assert record.details["reason"] == decision.reason

    client = superuser_client()
    html = client.get(reverse("admin:plans_planevent_change", args=[event.pk])).content.decode()
    assert "admits this call" in html


def test_a_decision_of_the_policy_default_shows_no_rule_number_in_the_trail(live_any_guard):
    guard = live_any_guard()
    declared = guard.declare(plan_document(steps=[{"tool": "github_get_issue"}]))
    # rules[0] admits github_* for acme/* only: nothing admits this call, the default denies.
    decision = guard.check("github_get_issue", {"repo": "evil/app"})
    guard.close(timeout=60)  # a busy machine: wait for the last batch

    assert decision.code == Decision.POLICY_DENIED
    record = AuditRecord.objects.get(plan_id=declared.plan_id, kind="decision")
    assert record.rule == {"index": None, "description": "the policy default (deny)"}

    client = superuser_client()
    html = client.get(reverse("admin:audit_auditrecord_changelist")).content.decode()
    assert "the policy default (deny)" in html
    assert not re.search(r"#\s*None", html)
