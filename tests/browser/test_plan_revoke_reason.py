"""Revoking a plan with a reason, in a real browser: the confirmation page takes it, the
plan page shows who and why, and the agent reads why."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from plans.models import Plan

from .conftest import log_in
from .test_admin_console import PASSWORD, admin_groups, staff, world  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def test_a_team_admin_revokes_a_plan_saying_why(page, world):  # noqa: F811 (fixture)
    staff("tessa", "Team admins", [world["acme"]])
    log_in(page, "tessa", PASSWORD)
    plan_id = world["declared"]["id"]

    page.goto(f"/admin/plans/plan/{plan_id}/change/")
    page.get_by_role("link", name="Revoke plan").click()
    page.get_by_label("Reason").fill("The ticket it summarises was opened by mistake")
    page.locator("input[type=submit][value='Yes, revoke']").click()

    expect(page.locator("ul.messagelist")).to_contain_text("Revoked 1 plan")
    content = page.locator("#content-main")
    expect(content).to_contain_text("tessa")
    expect(content).to_contain_text("The ticket it summarises was opened by mistake")
    plan = Plan.objects.get(pk=plan_id)
    assert (plan.status, plan.revoked_by) == (Plan.Status.REVOKED, "tessa")
    detail = world["agent"].client.get(f"/v1/plans/{plan_id}").json()
    assert re.search("opened by mistake", detail["revokeReason"])
