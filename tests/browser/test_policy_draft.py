"""In a real browser: the text being edited is simulated before it is published (nothing
written, the text back in the editor afterwards), and "Publish this version again" shows the
edit preview's plans, rules that never take effect and diff before it publishes."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from policies.models import PolicyVersion
from policies.services import policy_set
from tests.conftest import POLICY, plan_document
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, no_mail

from .test_admin_console import PASSWORD, admin_groups, staff, world  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def log_in_to_policies(page, username: str) -> None:
    page.goto("/admin/login/?next=/admin/policies/policy/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")


def versions(scene) -> list[int]:
    return list(
        PolicyVersion.objects.filter(policy__team=scene["acme"], policy__slug="default")
        .order_by("number")
        .values_list("number", flat=True)
    )


def type_document(page, text: str) -> None:
    """Replace the text of the policy's document field as a person editing it would: in the
    JSON editor when the page has one, else in the textarea."""
    page.locator("#id_document").wait_for(state="attached")
    if page.locator("script[src*='json-editor']").count():
        page.wait_for_function("() => document.querySelector('#id_document').plangateEditor")
    page.evaluate(
        """([text]) => {
            const area = document.querySelector("#id_document");
            const view = area.plangateEditor;
            if (view) {
                view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}});
            } else {
                area.value = text;
            }
        }""",
        [text],
    )


def document_in_editor(page) -> object:
    page.locator("#id_document").wait_for(state="attached")
    return json.loads(page.evaluate("() => document.querySelector('#id_document').value"))


def mailing_plan(scene) -> dict:
    answer = scene["agent"].client.post(
        "/v1/plans", {"plan": {**plan_document(), "steps": MAIL_PLAN_STEPS}}, format="json"
    )
    assert answer.status_code == 201, answer.content
    return answer.json()


def test_the_text_being_edited_is_simulated_before_it_is_published(page, world):  # noqa: F811
    staff("tessa", "Team admins", [world["acme"]])
    log_in_to_policies(page, "tessa")
    page.get_by_role("link", name="default", exact=True).click()

    type_document(page, json.dumps(no_mail(), indent=2))
    page.get_by_role("button", name="Simulate the text being edited (not published)").click()

    expect(page.locator("h1")).to_have_text("Simulate default v2 (draft)")
    expect(page.locator("#draft-diff-title + .plangate-diff")).to_contain_text("no mail")
    # The draft's own findings: its new deny rule leaves the allow rule on send_email idle.
    expect(page.locator("#rule-findings")).to_contain_text("rules[2]")
    page.select_option("#id_member", label="alice@acme.dev")
    page.fill("#id_plan", json.dumps({**plan_document(), "steps": MAIL_PLAN_STEPS}))
    page.fill("#id_tool", "send_email")
    page.fill("#id_args", '{"to": "team@acme.dev"}')
    page.get_by_role("button", name="Simulate", exact=True).click()

    expect(page.locator("#plan-decision")).to_have_text("policy_denied")
    expect(page.locator("#plan-denials")).to_contain_text("step 2 send_email")
    expect(page.locator("#plan-denials")).to_contain_text("rules[4]")
    expect(page.locator("#simulation-json")).to_contain_text('"draft": true')
    assert versions(world) == [1]

    # Back to the editor with the text as it was typed, still unpublished.
    page.locator("#draft-edit").click()
    expect(page.locator("#content-main")).to_contain_text("Not published")
    assert document_in_editor(page) == no_mail()
    assert versions(world) == [1]

    # The published version, simulated from its own page, still allows the same plan.
    page.get_by_role("link", name="Simulate a plan or a call under v1").click()
    page.select_option("#id_member", label="alice@acme.dev")
    page.fill("#id_plan", json.dumps({**plan_document(), "steps": MAIL_PLAN_STEPS}))
    page.get_by_role("button", name="Simulate", exact=True).click()
    expect(page.locator("#plan-decision")).to_have_text("allowed")
    assert versions(world) == [1]


def test_the_rollback_page_lists_the_plans_and_the_diff_before_publishing(page, world):  # noqa: F811
    mailing = mailing_plan(world)
    policy_set(team=world["acme"], slug="default", document=no_mail(), comment="no mail")
    policy_set(team=world["acme"], slug="default", document=POLICY, comment="mail again")
    staff("tessa", "Team admins", [world["acme"]])
    log_in_to_policies(page, "tessa")

    page.goto("/admin/policies/policyversion/")
    page.get_by_role("link", name="default v2").click()
    page.get_by_role("link", name="Publish this version again").click()

    expect(page.locator("h1")).to_have_text("Publish default version 2 again")
    expect(page.locator("#impact-summary")).to_contain_text("1 of 2 live plans would be refused")
    row = page.locator("#impact-plans tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(mailing["id"])
    expect(row).to_contain_text("summariser")
    expect(row).to_contain_text("alice@acme.dev")
    expect(row).to_contain_text("step 2 send_email")
    expect(row).to_contain_text("rules[4]")
    expect(page.locator("#impact-diff-title")).to_have_text("Changes from version 3")
    expect(page.locator(".plangate-diff .add")).to_contain_text(["no mail"])
    expect(page.locator("#rule-findings")).to_contain_text("rules[2]")
    assert versions(world) == [1, 2, 3]

    page.get_by_label("Comment").fill("mail off again")
    page.locator("input[type=submit][value='Publish again']").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Published default version 4")
    assert versions(world) == [1, 2, 3, 4]
