"""The case of issue 20 in a real browser: a rule narrowed from `repo glob acme/*` to
`acme/public-*` while a live plan pins `repo eq acme/app`. The edit preview said "No live
plan would be refused"; it now lists that plan as refused at its next refresh, at the
argument's path, and a plan pinning `repo glob acme/*` as one some of whose calls will be
refused."""

from __future__ import annotations

import copy
import json

import pytest
from playwright.sync_api import expect

from policies.models import PolicyVersion
from tests.conftest import POLICY, plan_document

from .conftest import fill_json_editor, log_in
from .test_admin_console import PASSWORD, admin_groups, staff, world  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser]


def declare(scene, goal: str, constraint: dict) -> dict:
    steps = [{"tool": "github_list_issues", "args": {"repo": constraint}}]
    response = scene["agent"].client.post(
        "/v1/plans", {"plan": plan_document(goal=goal, steps=steps)}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_the_preview_of_a_narrowed_glob_names_the_plan_it_refuses(page, world):  # noqa: F811
    app = declare(world, "app", {"eq": "acme/app"})
    wide = declare(world, "wide", {"glob": "acme/*"})
    narrowed = copy.deepcopy(POLICY)
    narrowed["rules"][0]["args"] = {"repo": {"glob": "acme/public-*"}}
    staff("tessa", "Team admins", [world["acme"]])
    log_in(page, "tessa", PASSWORD)

    page.goto("/admin/policies/policy/")
    page.get_by_role("link", name="default", exact=True).click()
    fill_json_editor(page, json.dumps(narrowed, indent=2))
    page.fill("#id_comment", "public repositories only")
    page.click("input[name=_save]")

    # world's own plan pins acme/public-app: still inside the narrowed rule.
    summary = page.locator("#impact-summary")
    expect(summary).to_contain_text("1 of 3 live plans would be refused")
    expect(summary).to_contain_text("next refresh")
    refused = page.locator("#impact-plans tbody tr")
    expect(refused).to_have_count(1)
    expect(refused).to_contain_text(app["id"])
    expect(refused).to_contain_text("step 1 github_list_issues")
    expect(refused).to_contain_text("steps[0].args.repo")
    expect(refused).to_contain_text('rules[0] requires repo {"glob":"acme/public-*"}')
    warned_summary = page.locator("#impact-warned-summary")
    expect(warned_summary).to_contain_text("some calls will be refused")
    warned = page.locator("#impact-warned tbody tr")
    expect(warned).to_have_count(1)
    expect(warned).to_contain_text(wide["id"])
    expect(warned).to_contain_text("steps[0].args.repo")
    expect(warned).to_contain_text("policy_argument_overlaps")
    assert world["declared"]["id"] not in refused.inner_text() + warned.inner_text()
    # Nothing is published by the preview.
    assert PolicyVersion.objects.filter(policy__team=world["acme"]).count() == 1
    print("preview:", summary.inner_text().strip(), "|", warned_summary.inner_text().strip())
