"""Real-browser tests: Playwright's sync API driving Debian's Chromium against
pytest-django's live server. Never downloads a browser: without /usr/bin/chromium the tests
skip with the reason (and fail in CI, see tests/conftest.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; Django's ORM would otherwise
# refuse to run next to it.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Generous: the machine may be shared and Chromium is heavy. Not a timing assertion, only
# how long to wait before declaring an element absent.
ACTION_TIMEOUT_MS = 30_000


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


# Package scope: Playwright's synchronous API keeps an event loop running in the main
# thread while it is open, so it must be gone before the tests after this package that run
# asyncio themselves (the MCP gateway's, the async guard's).
@pytest.fixture(scope="package")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            f"Chromium not found at {CHROMIUM}: install Debian's package "
            "(apt-get install chromium) to run the browser tests"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


# Violations that are the policy doing its job: Redoc's sidebar always shows Redocly's logo
# from their CDN (it hides the image when it fails to load); the policy refuses the request.
EXPECTED_VIOLATIONS = ("'https://cdn.redoc.ly/redoc/logo-mini.svg'",)


def csp_violations(page) -> list[str]:
    """Console messages in which Chromium reports a Content-Security-Policy violation,
    collected from now on (the list grows as the page runs), the expected ones left out."""
    seen: list[str] = []

    def on_console(message) -> None:
        text = message.text
        if "Content Security Policy" in text and not any(
            expected in text for expected in EXPECTED_VIOLATIONS
        ):
            seen.append(f"{page.url}: {text}")

    page.on("console", on_console)
    return seen


def new_page(browser, base_url: str):
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    return context.new_page()


@pytest.fixture
def page(browser, live_server, request):
    """A page in a fresh browser context. Every page a browser test opens must work under
    the Content-Security-Policy: a violation Chromium reports fails the test at teardown."""
    page = new_page(browser, live_server.url)
    violations = csp_violations(page)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        (ARTIFACTS / f"{name}.html").write_text(page.content())
    page.context.close()
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)


def fill_json_editor(page, text: str, field: str = "#id_document") -> None:
    """Replace the text of a JSON document field's editor (kernel/static/plangate/
    json-editor.js), as typing it would; the hidden textarea follows."""
    page.locator(f"{field} ~ .plangate-editor-wrap .cm-content").wait_for()
    page.evaluate(
        """([field, text]) => {
            const view = document.querySelector(field).plangateEditor;
            view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}});
        }""",
        [field, text],
    )


def log_in(page, username: str, password: str) -> None:
    page.goto("/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#user-tools")
