"""Auditors filter the issued plans by who approved them."""

from __future__ import annotations

from django.urls import reverse

from plans.approvals import plan_approval_decide
from tests.admin.conftest import logged_in
from tests.notify.conftest import make_person, request_approval

PLANS = reverse("admin:plans_plan_changelist")


def test_an_auditor_filters_plans_by_approved_by(team, review_agent, approver):
    tessa = make_person("tessa", "tessa@acme.dev", group="Team admins", teams=[team])
    by_april, by_tessa, denied_by_april, waiting = (
        request_approval(review_agent) for _ in range(4)
    )
    plan_approval_decide(plan=by_april, by_user=approver, approve=True)
    plan_approval_decide(plan=by_tessa, by_user=tessa, approve=True)
    plan_approval_decide(plan=denied_by_april, by_user=approver, approve=False, reason="no")
    auditor = make_person("audrey", "audrey@acme.dev", group="Auditors", teams=[team])

    page = logged_in(auditor).get(PLANS, {"approved_by": "April@Acme.dev"}).content.decode()

    assert by_april.pk in page
    for other in (by_tessa, denied_by_april, waiting):
        assert other.pk not in page
