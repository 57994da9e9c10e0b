"""A policy edit in a real browser: saving shows which live plans and steps the new version
would refuse, Cancel publishes nothing, Publish publishes exactly one version (which the
plan's next refresh then refuses); an old version is published again from its page; the
simulator answers on the version's page."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from policies.models import PolicyVersion
from tests.conftest import plan_document
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, no_mail

from .conftest import fill_json_editor, log_in
from .test_admin_console import PASSWORD, admin_groups, staff, world  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def versions(scene) -> list[int]:
    return list(
        PolicyVersion.objects.filter(policy__team=scene["acme"], policy__slug="default")
        .order_by("number")
        .values_list("number", flat=True)
    )


def test_edit_preview_cancel_then_publish(page, world):  # noqa: F811 (fixture)
    mailing = world["agent"].client.post(
        "/v1/plans", {"plan": {**plan_document(), "steps": MAIL_PLAN_STEPS}}, format="json"
    )
    assert mailing.status_code == 201, mailing.content
    mailing = mailing.json()
    staff("tessa", "Team admins", [world["acme"]])
    log_in(page, "tessa", PASSWORD)

    def edit() -> None:
        page.goto("/admin/policies/policy/")
        page.get_by_role("link", name="default", exact=True).click()
        fill_json_editor(page, json.dumps(no_mail(), indent=2))
        page.fill("#id_comment", "no e-mail for now")
        page.click("input[name=_save]")

    edit()
    summary = page.locator("#impact-summary")
    expect(summary).to_contain_text("1 of 2 live plans would be refused")
    row = page.locator("#impact-plans tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(mailing["id"])
    expect(row).to_contain_text("summariser")
    expect(row).to_contain_text("alice@acme.dev")
    expect(row).to_contain_text("engineer")
    expect(row).to_contain_text("step 2 send_email")
    expect(row).to_contain_text("rules[4]")
    assert world["declared"]["id"] not in row.inner_text()
    assert versions(world) == [1]

    page.click("#impact-edit")
    expect(page.locator("#id_document")).to_have_value(json.dumps(no_mail(), indent=2))
    assert versions(world) == [1]
    page.click("input[name=_save]")
    expect(page.locator("#impact-summary")).to_contain_text("1 of 2 live plans")

    page.click("#impact-cancel")
    expect(page.locator(".plangate-editor .cm-content")).to_be_visible()
    assert versions(world) == [1]

    edit()
    page.get_by_role("button", name="Publish version 2").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Published default version 2")
    assert versions(world) == [1, 2]
    refused = world["agent"].client.post(
        f"/v1/plans/{mailing['id']}/refresh", {"token": mailing["token"]}, format="json"
    )
    assert refused.status_code == 403 and refused.json()["code"] == "policy_denied"

    # Rollback: version 1 published again, as version 3, with a comment.
    page.goto("/admin/policies/policyversion/")
    page.get_by_role("link", name="default v1").click()
    page.get_by_role("link", name="Publish this version again").click()
    page.get_by_label("Comment").fill("mail is fine after all")
    page.locator("input[type=submit][value='Publish again']").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Published default version 3")
    assert versions(world) == [1, 2, 3]
    expect(page.locator("#content-main")).to_contain_text(
        "Republished version 1: mail is fine after all"
    )

    # The simulator, from the version's page: the mailing plan is allowed again.
    page.get_by_role("link", name="Simulate a plan or a call under v3").click()
    page.select_option("#id_member", label="alice@acme.dev")
    page.fill("#id_plan", json.dumps({**plan_document(), "steps": MAIL_PLAN_STEPS}))
    page.fill("#id_tool", "send_email")
    page.fill("#id_args", '{"to": "team@acme.dev"}')
    page.get_by_role("button", name="Simulate").click()
    expect(page.locator("#plan-decision")).to_have_text("allowed")
    expect(page.locator("#call-decision")).to_have_text("allowed")
    assert versions(world) == [1, 2, 3]
