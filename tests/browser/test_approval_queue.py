"""An approver approves from the admin's queue, in a real browser, while the agent waits
for the decision against a real HTTP server: its guard (which then holds a verified token
carrying the approval, ``apr``), or a plain client polling ``POST /v1/plans/{id}/token``."""

from __future__ import annotations

import threading

import jwt
import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from guard.agent import Guard
from members.services import member_upsert, team_get_or_create
from plans.keys import signing_keys_bootstrap
from plans.models import Plan
from policies.services import policy_set
from tests.conftest import make_agent, plan_document
from tests.integration.processes import wait_for
from tests.notify.conftest import DEPLOY_PLAN_STEPS, REVIEW_POLICY, ensure_groups

from .conftest import log_in

pytestmark = [pytest.mark.browser]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def waiting_world(transactional_db):
    ensure_groups()
    signing_keys_bootstrap()
    acme = team_get_or_create(slug="default", name="Acme")
    version = policy_set(team=acme, slug="reviewed", document=REVIEW_POLICY)
    member_upsert(team=acme, email="alice@acme.dev", name="Alice", role="engineer")
    agent = make_agent(acme, "deployer", version)
    approver = User.objects.create_user("april", "april@acme.dev", PASSWORD, is_staff=True)
    approver.groups.add(Group.objects.get(name="Approvers"))
    acme.staff.add(approver)
    return {"team": acme, "agent": agent}


def approve_in_the_queue(page, plan_id: str) -> None:
    """April opens the queue, the waiting plan, and approves it."""
    log_in(page, "april", PASSWORD)
    page.goto("/admin/notify/approvalrequest/")
    page.get_by_role("link", name="Deploy the fix").click()
    expect(page.locator("#review")).to_contain_text("deploys need a person")
    page.get_by_role("link", name="Approve…").click()
    page.locator("input[type=submit][value='Yes, approve']").click()
    expect(page.locator("ul.messagelist")).to_contain_text(f"Approved 1 plan(s): {plan_id}")


def test_an_approver_approves_while_an_agent_polls_for_the_token(page, live_server, waiting_world):
    """The same approval while a plain HTTP client declares and polls
    ``POST /v1/plans/{id}/token`` as an agent without the guard would."""
    import time

    import httpx

    headers = {"Authorization": f"Bearer {waiting_world['agent'].api_key}"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
        declared = client.post(
            "/v1/plans",
            json={"plan": plan_document(goal="Deploy the fix", steps=DEPLOY_PLAN_STEPS)},
        )
        assert declared.status_code == 202, declared.text
        plan_id = declared.json()["id"]
        answers: list[int] = []
        approved: dict[str, object] = {}

        def poll() -> None:
            with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as poller:
                while len(answers) < 600:
                    answer = poller.post(f"/v1/plans/{plan_id}/token")
                    answers.append(answer.status_code)
                    if answer.status_code != 409:
                        approved.update(answer.json())
                        return
                    time.sleep(0.2)

        polling = threading.Thread(target=poll, daemon=True)
        polling.start()
        assert wait_for(lambda: bool(answers), timeout=60)
        assert answers[0] == 409  # approval_pending while nobody decided

        approve_in_the_queue(page, plan_id)
        polling.join(timeout=120)

    assert answers[-1] == 200, answers
    assert approved["id"] == plan_id
    claims = jwt.decode(str(approved["token"]), options={"verify_signature": False})
    assert claims["apr"]["by"] == "april@acme.dev"
    assert claims["apr"]["ph"] == claims["ph"] == approved["planHash"]
    assert Plan.objects.get(pk=plan_id).approval_by == "april@acme.dev"


def test_an_approver_approves_from_the_queue_while_the_guard_waits(
    page, live_server, waiting_world
):
    guard = Guard(
        live_server.url,
        waiting_world["agent"].api_key,
        issuer=settings.PLANGATE_ISSUER,
        report=False,
        auto_refresh=False,
        approval_wait_seconds=240,
    )
    outcome: dict[str, object] = {}

    def declare() -> None:
        try:
            outcome["declared"] = guard.declare(
                plan_document(goal="Deploy the fix", steps=DEPLOY_PLAN_STEPS)
            )
        except Exception as exc:  # the test's assertion reports it
            outcome["error"] = exc

    waiting = threading.Thread(target=declare, daemon=True)
    waiting.start()
    try:
        assert wait_for(
            lambda: Plan.objects.filter(approval=Plan.Approval.PENDING).exists(), timeout=60
        ), outcome
        plan = Plan.objects.get(approval=Plan.Approval.PENDING)
        assert waiting.is_alive(), outcome  # the guard is still waiting for a person
        assert wait_for(lambda: guard.status().state == "awaiting_approval", timeout=30)

        approve_in_the_queue(page, plan.pk)

        waiting.join(timeout=120)
        assert not waiting.is_alive(), "the guard did not return after the approval"
    finally:
        guard.close()
        waiting.join(timeout=10)

    assert "error" not in outcome, outcome
    declared = outcome["declared"]
    assert declared.plan_id == plan.pk
    assert declared.approved_by == "april@acme.dev"
    assert Plan.objects.get(pk=plan.pk).approval_by == "april@acme.dev"


@pytest.fixture
def only_the_member_approves(transactional_db):
    """Acme's only approver is Alice, the person the plans act for; a superuser exists."""
    ensure_groups()
    signing_keys_bootstrap()
    acme = team_get_or_create(slug="default", name="Acme")
    version = policy_set(team=acme, slug="reviewed", document=REVIEW_POLICY)
    member_upsert(team=acme, email="alice@acme.dev", name="Alice", role="engineer")
    agent = make_agent(acme, "deployer", version)
    alice = User.objects.create_user("alice", "alice@acme.dev", PASSWORD, is_staff=True)
    alice.groups.add(Group.objects.get(name="Approvers"))
    acme.staff.add(alice)
    User.objects.create_superuser("root", "root@example.test", PASSWORD)
    return {"team": acme, "agent": agent}


def test_a_superuser_finds_the_waiting_plan_on_the_index_and_its_approval_on_the_plan(
    page, live_server, only_the_member_approves
):
    """Alice cannot approve her own plan, so the superuser is asked: the index counts the
    waiting plan and links the queue; once approved, the plan's page says who, when, why."""
    import httpx

    headers = {"Authorization": f"Bearer {only_the_member_approves['agent'].api_key}"}
    with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
        declared = client.post(
            "/v1/plans",
            json={"plan": plan_document(goal="Deploy the fix", steps=DEPLOY_PLAN_STEPS)},
        )
    assert declared.status_code == 202, declared.text
    assert declared.json()["warnings"] == []  # the superuser can decide it
    plan_id = declared.json()["id"]

    log_in(page, "root", PASSWORD)
    page.goto("/admin/")
    waiting = page.locator('tr[data-team="default"] td.awaiting-approval')
    expect(waiting).to_have_text("1")
    waiting.get_by_role("link").click()
    expect(page.locator("#result_list")).to_contain_text(plan_id)
    page.get_by_role("link", name="Deploy the fix").click()
    page.get_by_role("link", name="Approve…").click()
    page.locator("textarea[name=reason]").fill("checked the target")
    page.locator("input[type=submit][value='Yes, approve']").click()
    expect(page.locator("ul.messagelist")).to_contain_text(f"Approved 1 plan(s): {plan_id}")

    page.goto("/admin/")
    expect(page.locator('tr[data-team="default"] td.awaiting-approval')).to_have_text("0")
    page.goto(f"/admin/plans/plan/{plan_id}/change/")
    approval = page.locator("#approval")
    expect(approval).to_contain_text("approved by root@example.test at")
    expect(approval).to_contain_text("reason: checked the target")
    plan = Plan.objects.get(pk=plan_id)
    assert (plan.approval, plan.approval_by) == (Plan.Approval.APPROVED, "root@example.test")
