"""The guard waits for a person's approval against the real control plane: a policy's
review rule sends the plan to a person, the guard shows it awaiting approval and blocks
every call, a person decides through the service while the guard waits, and the guard
holds the approved token (its ``apr`` checked) or tells the model the approver's reason.

In-process (the WSGI transport, on the test's own connection) the person decides from the
guard's sleeper, between two asks; over a real HTTP server the guard waits in a thread
while the test decides, as a person in the admin would.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from guard.agent import acp
from guard.agent.errors import ApprovalError
from guard.decisions import Decision
from guard.tokens import unverified_claims
from plans.approvals import APPROVAL_POLL_SECONDS, plan_approval_decide
from plans.models import Plan, PlanEvent
from policies.services import policy_set
from tests.conftest import plan_document
from tests.plans.approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS, approver_for

from .client_helpers import wait_until
from .test_acp import assert_valid_v2, statuses

REPO = {"repo": "acme/public-app"}
MAIL = {"to": "bob@example.test"}


@pytest.fixture
def review_policy(team, policy_version):
    return policy_set(team=team, slug="default", document=REVIEW_POLICY)


@pytest.fixture
def approver(team):
    return approver_for(team)


def reviewed_plan() -> dict[str, Any]:
    return plan_document(steps=REVIEWED_PLAN_STEPS)


class DecidingSleeper:
    """Records each wait the guard asks for; at the `on`-th wait a person decides."""

    def __init__(self, decide: Any, on: int = 2) -> None:
        self.decide = decide
        self.on = on
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if len(self.waits) == self.on:
            self.decide()


def only_plan() -> Plan:
    return Plan.objects.get()


def test_a_person_approves_between_two_asks_and_the_guard_holds_the_approved_token(
    make_any_guard, switchboard, review_policy, approver
):
    answers: list[tuple[int, str]] = []

    def record(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/token"):
            answers.append((response.status_code, response.headers.get("Retry-After", "")))
            if response.status_code == 200:
                tokens.append(response.json()["token"])
        return response

    tokens: list[str] = []
    switchboard.rewrite = record
    shown: list[dict[str, Any]] = []
    blocked: list[Decision] = []
    guard_box: list[Any] = []

    def approve() -> None:
        plan = only_plan()
        assert plan.status == Plan.Status.PENDING_APPROVAL
        # While it waits, no tool runs.
        blocked.append(guard_box[0].check("github_list_issues", REPO).code)
        plan_approval_decide(plan=plan, by_user=approver, approve=True)

    sleeper = DecidingSleeper(approve)
    guard = make_any_guard(acp_sink=shown.append, approval_sleep=sleeper)
    guard_box.append(guard)

    declared = guard.declare(reviewed_plan())

    assert blocked == [Decision.APPROVAL_PENDING]
    # The control plane's Retry-After, honoured: the guard asked three times.
    assert sleeper.waits == [float(APPROVAL_POLL_SECONDS)] * 2
    assert declared.plan_id == only_plan().pk
    assert declared.approved_by == approver.email
    pending = (409, str(APPROVAL_POLL_SECONDS))
    assert answers == [pending, pending, (200, "")]
    claims = unverified_claims(tokens[0])
    assert claims["apr"]["by"] == approver.email
    assert claims["apr"]["ph"] == declared.plan_hash == claims["ph"]
    assert [statuses(message) for message in shown] == [
        [acp.AWAITING_APPROVAL] * 2,
        [acp.PENDING] * 2,
    ]
    for message in shown:
        assert_valid_v2(message["params"])
    assert guard.check("github_list_issues", REPO).allowed
    assert guard.check("send_email", MAIL).allowed


def test_a_person_denies_and_the_model_is_told_the_reason(make_any_guard, review_policy, approver):
    def deny() -> None:
        plan_approval_decide(
            plan=only_plan(), by_user=approver, approve=False, reason="no mail to outsiders"
        )

    guard = make_any_guard(approval_sleep=DecidingSleeper(deny, on=1))

    result = guard.handle_declare_plan(reviewed_plan())

    assert result["ok"] is False
    assert result["code"] == "approval_denied"
    assert "no mail to outsiders" in result["detail"]
    assert result["planId"] == only_plan().pk
    assert [item["tool"] for item in result["review"]] == ["send_email"]
    assert guard.check("send_email", MAIL).code is Decision.NO_PLAN


def test_nobody_decides_within_the_bound_then_a_later_declaration_picks_it_up(
    make_any_guard, review_policy, approver
):
    sleeper = DecidingSleeper(lambda: None, on=0)
    guard = make_any_guard(approval_sleep=sleeper, approval_wait_seconds=0)

    with pytest.raises(ApprovalError) as raised:
        guard.declare(reviewed_plan())

    assert raised.value.code == "approval_pending"
    assert guard.check("send_email", MAIL).code is Decision.APPROVAL_PENDING
    plan_approval_decide(plan=only_plan(), by_user=approver, approve=True)

    declared = guard.declare(reviewed_plan())

    assert declared.approved_by == approver.email
    assert Plan.objects.count() == 1  # the same plan, not a second request
    assert sleeper.waits == []


def test_one_declaration_may_return_at_once_while_the_guard_waits_by_default(
    make_any_guard, review_policy, approver
):
    sleeper = DecidingSleeper(lambda: None, on=0)
    guard = make_any_guard(approval_sleep=sleeper)  # the guard's own wait: 300 s

    answer = guard.handle_declare_plan(reviewed_plan(), approval_wait_seconds=0)

    # A framework that pauses its run itself asks for no wait: nothing was slept.
    assert answer["code"] == "approval_pending"
    assert f"/{only_plan().pk}/" in answer["approvalUrl"]
    assert sleeper.waits == []
    plan_approval_decide(plan=only_plan(), by_user=approver, approve=True)

    assert guard.declare(reviewed_plan(), approval_wait_seconds=0).approved_by == approver.email


def test_the_guard_waits_in_a_thread_while_a_person_approves_through_the_service(
    live_any_guard, review_policy, approver
):
    shown: list[dict[str, Any]] = []
    waits: list[float] = []
    stop = threading.Event()

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        stop.wait(0.05)  # the wait asked for is recorded; the test need not last it

    guard = live_any_guard(acp_sink=shown.append, approval_sleep=sleep, report_interval=0.02)
    outcome: list[Any] = []
    waiter = threading.Thread(target=lambda: outcome.append(guard.declare(reviewed_plan())))
    waiter.start()

    assert wait_until(lambda: len(waits) >= 2)
    plan = only_plan()
    decision = guard.check("github_list_issues", REPO)
    assert decision.code is Decision.APPROVAL_PENDING
    # The blocked call reaches the plan's decision log on the control plane.
    assert wait_until(
        lambda: PlanEvent.objects.filter(plan=plan, decision="approval_pending").exists()
    )
    plan_approval_decide(plan=plan, by_user=approver, approve=True)
    waiter.join(30)

    assert not waiter.is_alive()
    (declared,) = outcome
    assert declared.plan_id == plan.pk
    assert declared.approved_by == approver.email
    assert set(waits) == {float(APPROVAL_POLL_SECONDS)}
    assert guard.call("github_list_issues", REPO, lambda repo: repo) == "acme/public-app"
    assert statuses(shown[0]) == [acp.AWAITING_APPROVAL] * 2
    assert statuses(shown[-1])[0] in (acp.IN_PROGRESS, acp.COMPLETED)
    for message in shown:
        assert_valid_v2(message["params"])
    stop.set()


def approved_guard(make_any_guard, approver, **options: Any):
    def approve() -> None:
        plan_approval_decide(plan=only_plan(), by_user=approver, approve=True)

    guard = make_any_guard(approval_sleep=DecidingSleeper(approve, on=1), **options)
    guard.declare(reviewed_plan())
    return guard


def test_a_refresh_keeps_the_approval_while_the_policy_asks_review_of_the_same_steps(
    make_any_guard, switchboard, review_policy, approver
):
    tokens: list[str] = []

    def record(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/refresh") and response.status_code == 200:
            tokens.append(response.json()["token"])
        return response

    guard = approved_guard(make_any_guard, approver)
    switchboard.rewrite = record

    assert guard.refresh()

    assert unverified_claims(tokens[0])["apr"]["by"] == approver.email
    assert guard.check("send_email", MAIL).allowed


def test_a_refresh_after_the_policy_sends_another_step_to_a_person_blocks_the_plan(
    make_any_guard, team, review_policy, approver
):
    shown: list[dict[str, Any]] = []
    guard = approved_guard(make_any_guard, approver, acp_sink=shown.append)
    stricter = {
        **REVIEW_POLICY,
        "rules": [
            *REVIEW_POLICY["rules"],
            {"effect": "review", "tools": ["github_list_issues"], "description": "reads too"},
        ],
    }
    policy_set(team=team, slug="default", document=stricter)

    assert not guard.refresh()

    decision = guard.check("github_list_issues", REPO)
    assert decision.code is Decision.POLICY_DENIED
    assert "approve" in decision.reason
    assert statuses(shown[-1]) == [acp.CANCELLED] * 2
