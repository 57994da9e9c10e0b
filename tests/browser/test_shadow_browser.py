"""A policy tried in shadow, in a real browser: published in shadow from the edit page (the
active version stays), its differences counted on the policy page with a link to them, then
promoted through the impact preview to the next active version."""

from __future__ import annotations

import importlib
import json

import pytest
from django.contrib.auth.models import Group, Permission
from playwright.sync_api import expect

from plans.models import ShadowDifference
from policies.models import Policy
from policies.selectors import policy_active_version
from tests.conftest import plan_document
from tests.policies.impact_helpers import MAIL_PLAN_STEPS, no_mail

from .conftest import fill_json_editor, log_in
from .test_admin_console import PASSWORD, admin_groups, staff, world  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def test_publish_in_shadow_see_the_differences_and_promote(page, world):  # noqa: F811
    importlib.import_module("plans.migrations.0014_shadow_difference_view").grant(Group, Permission)
    mailing = world["agent"].client.post(
        "/v1/plans", {"plan": {**plan_document(), "steps": MAIL_PLAN_STEPS}}, format="json"
    )
    assert mailing.status_code == 201, mailing.content
    staff("tessa", "Team admins", [world["acme"]])
    log_in(page, "tessa", PASSWORD)
    policy = Policy.objects.get(team=world["acme"], slug="default")

    # Publish in shadow: no preview (nothing is enforced), version 1 stays active.
    page.goto("/admin/policies/policy/")
    page.get_by_role("link", name="default", exact=True).click()
    expect(page.locator("#shadow")).to_have_count(0)
    fill_json_editor(page, json.dumps(no_mail(), indent=2))
    page.fill("#id_comment", "no e-mail, tried first")
    page.get_by_label("Publish in shadow").check()
    page.click("input[name=_save]")
    expect(page.locator("ul.messagelist")).to_contain_text("Published default version 2 in shadow")
    policy.refresh_from_db()
    shadow = policy.shadow_version
    assert shadow is not None and shadow.number == 2
    assert policy_active_version(policy=policy).number == 1

    # The differences it recorded, as issuance and the guard record them.
    for _ in range(2):
        ShadowDifference.objects.create(
            team=world["acme"],
            shadow_version=shadow,
            active_version=policy_active_version(policy=policy),
            kind=ShadowDifference.Kind.BLOCKED,
            request=ShadowDifference.Request.CALL,
            plan_id=mailing.json()["id"],
            agent_id=world["agent"].agent.pk,
            tool="send_email",
            step=1,
            code="allowed",
            shadow_code="policy_denied",
            rule={"index": None, "description": "the default (deny)"},
        )
    page.goto(f"/admin/policies/policy/{policy.pk}/change/")
    section = page.locator("#shadow")
    expect(section.locator("#shadow-version")).to_have_text("default v2")
    expect(section).to_contain_text("by tessa")
    blocked = section.locator("td[data-kind=shadow_blocked] a")
    expect(blocked).to_have_text("2")
    expect(section.locator("td[data-kind=shadow_refused]")).to_have_text("0")
    expect(page.locator("#content-main")).to_contain_text("shadow, tried now")

    blocked.click()
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    expect(page.locator("#result_list")).to_contain_text("send_email")
    expect(page.locator("#result_list")).to_contain_text("summariser")
    page.go_back()

    # Promote: the preview says what the document would refuse, then publishes v3.
    page.locator("#shadow-promote").click()
    expect(page.locator("#impact-summary")).to_contain_text("1 of 2 live plans would be refused")
    assert policy_active_version(policy=policy).number == 1
    page.locator("input[type=submit][value='Promote']").click()
    expect(page.locator("ul.messagelist")).to_contain_text(
        "Published default version 3 from shadow version 2"
    )
    active = policy_active_version(policy=policy)
    assert (active.number, active.comment, active.hash) == (
        3,
        "promoted from shadow v2",
        shadow.hash,
    )
    policy.refresh_from_db()
    assert policy.shadow_version_id is None
    refused = world["agent"].client.post(
        f"/v1/plans/{mailing.json()['id']}/refresh",
        {"token": mailing.json()["token"]},
        format="json",
    )
    assert refused.status_code == 403 and refused.json()["code"] == "policy_denied"

    page.goto(f"/admin/policies/policy/{policy.pk}/change/")
    expect(page.locator("#shadow")).to_have_count(0)
    expect(page.locator("#content-main")).to_contain_text("shadow, promoted as v3")
