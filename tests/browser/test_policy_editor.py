"""The policy document is edited in a real JSON editor, under the Content-Security-Policy:
line numbers and highlighting, invalid JSON named by its line, a document that breaks the
policy's JSON Schema named by its path (as the server names it) as it is typed, and saving
publishes what was typed."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from members.services import team_get_or_create
from policies.models import PolicyVersion
from policies.services import policy_set
from tests.conftest import POLICY

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"
PROBLEMS = ".plangate-editor-problems li"


@pytest.fixture
def acme(transactional_db):
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    team = team_get_or_create(slug="default", name="Acme")
    policy_set(team=team, slug="default", document=POLICY)
    return team


def open_editor(page) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/admin/login/?next=/admin/policies/policy/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.get_by_role("link", name="default", exact=True).click()
    expect(page.locator(".plangate-editor .cm-editor")).to_be_visible()
    assert errors == []


def type_document(page, text: str) -> None:
    """Select everything in the editor and type ``text`` over it (as one input, as a paste
    would, so the editor's auto-indentation adds nothing)."""
    page.locator(".plangate-editor .cm-content").click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def test_the_editor_shows_lines_highlighting_and_a_valid_document(page, acme):
    open_editor(page)

    # The textarea is in the form, hidden, holding the editor's text.
    expect(page.locator("#id_document")).to_be_hidden()
    text = page.locator("#id_document").input_value()
    assert json.loads(text) == POLICY
    line_count = text.count("\n") + 1
    numbers = page.locator(".plangate-editor .cm-lineNumbers .cm-gutterElement")
    expect(numbers.filter(has_text=str(line_count))).to_have_count(1)
    # Property names and strings are coloured, unlike the braces.
    colours = page.evaluate(
        """() => {
            const root = document.querySelector('.plangate-editor').shadowRoot;
            const spans = [...root.querySelectorAll('.cm-line span')];
            return [...new Set(spans.map((span) => getComputedStyle(span).color))];
        }"""
    )
    assert len(colours) >= 2, colours
    expect(page.locator(".plangate-editor-status")).to_contain_text("No problem found")


def test_invalid_json_is_named_by_its_line(page, acme):
    open_editor(page)

    type_document(page, '{\n  "version": 1,\n  "default": "deny"\n  "rules": []\n}')

    problem = page.locator(PROBLEMS)
    expect(problem).to_have_count(1)
    expect(problem).to_contain_text("line 4, column 3: Not valid JSON")
    expect(page.locator(".plangate-editor .cm-lint-marker-error")).to_have_count(1)


def test_a_document_that_breaks_the_schema_is_named_by_its_paths(page, acme):
    open_editor(page)
    document = json.loads(json.dumps(POLICY))
    document["rules"][1]["effect"] = "forbid"
    document["rules"][2]["tool"] = "send_email"
    document["rules"][0]["args"]["repo"] = {"glb": "acme/*"}
    del document["default"]

    type_document(page, json.dumps(document, indent=2))

    problems = page.locator(PROBLEMS)
    expect(problems.first).to_be_visible()
    shown = problems.all_inner_texts()
    expect(problems).to_have_count(4)
    text = json.dumps(document, indent=2).split("\n")
    effect_line = next(n for n, line in enumerate(text, 1) if '"forbid"' in line)
    assert (
        f'rules[1].effect (line {effect_line}): must be one of "allow", "deny", "review"' in shown
    )
    tool_line = next(n for n, line in enumerate(text, 1) if '"tool":' in line)
    assert any(
        item.startswith(f"rules[2].tool (line {tool_line}): unknown field (expected effect, tools")
        for item in shown
    ), shown
    # A missing field is named by its path, at the object that lacks it.
    assert "default (line 1): is required" in shown
    assert any(
        item.startswith("rules[0].args.repo (line ")
        and "exactly one operator: eq, in, glob, regex, lte, gte" in item
        for item in shown
    ), shown
    # Saving still goes to the server, which refuses it and names the same paths.
    page.click("input[name=_save]")
    expect(page.locator(".errorlist")).to_contain_text("rules[1].effect")
    assert PolicyVersion.objects.filter(policy__team=acme).count() == 1


def test_a_document_typed_in_the_editor_is_published_on_save(page, acme):
    open_editor(page)
    document = json.loads(json.dumps(POLICY))
    document["rules"].append({"effect": "deny", "tools": ["send_email"], "name": "no mail"})

    type_document(page, json.dumps(document, indent=2))
    expect(page.locator(".plangate-editor-status")).to_contain_text("No problem found")
    page.click("input[name=_save]")
    # Shown first with what it would refuse among live plans (none), then published.
    page.get_by_role("button", name="Publish version 2").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Published default version 2")

    latest = PolicyVersion.objects.filter(policy__team=acme).order_by("-number").first()
    assert latest is not None and latest.number == 2
    assert latest.document["rules"][-1] == {
        "effect": "deny",
        "tools": ["send_email"],
        "name": "no mail",
    }


def test_the_keyboard_leaves_the_editor_with_escape_then_tab(page, acme):
    open_editor(page)
    page.locator(".plangate-editor .cm-content").click()
    page.keyboard.press("Tab")  # indents
    assert page.evaluate("document.activeElement.className") == "plangate-editor"
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    # Focus went on to the next field of the form.
    assert page.evaluate("document.activeElement.className") != "plangate-editor"
    expect(page.locator(".plangate-editor-wrap .help")).to_contain_text("Esc, then Tab")
