"""A call that races a declaration on the same session waits for it and is decided under
the new plan: models send "declare, then start" in one turn, and frameworks run the turn's
calls concurrently (guard.agent.declaring)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from guard.agent import AsyncGuard
from guard.agent.session import CallDecision
from guard.decisions import Decision
from policies.services import policy_set
from tests.conftest import plan_document
from tests.plans.approval_helpers import REVIEW_POLICY, REVIEWED_PLAN_STEPS

REPO = {"repo": "acme/public-app"}
MAIL = {"to": "bob@example.test"}

pytestmark = pytest.mark.django_db(transaction=True)


def decide_in_thread(guard, tool: str, args: dict) -> tuple[threading.Thread, list[CallDecision]]:
    decisions: list[CallDecision] = []
    thread = threading.Thread(target=lambda: decisions.append(guard.check(tool, args)))
    thread.start()
    return thread, decisions


def test_a_call_made_while_a_declaration_is_in_flight_is_decided_under_its_plan(live_guard):
    guard = live_guard()

    with guard.declaring():  # the model's declare_plan, seen before its sibling runs
        assert guard.declaration_in_flight
        caller, decisions = decide_in_thread(guard, "github_list_issues", REPO)
        caller.join(0.3)
        assert caller.is_alive() and not decisions  # waiting, not answered no_plan
        guard.declare(plan_document())
    caller.join(10)

    assert [decision.code for decision in decisions] == [Decision.ALLOWED]
    assert not guard.declaration_in_flight


def test_a_declaration_in_another_thread_holds_the_calls_sent_beside_it(live_guard):
    guard = live_guard()
    declared = threading.Event()

    def declare() -> None:
        guard.handle_declare_plan(plan_document())
        declared.set()

    with guard.declaring():
        declaring = threading.Thread(target=declare)
        declaring.start()
        callers = [decide_in_thread(guard, "github_list_issues", REPO) for _ in range(3)]
    declaring.join(10)
    for caller, _ in callers:
        caller.join(10)

    assert declared.is_set()
    assert [decisions[0].code for _, decisions in callers] == [Decision.ALLOWED] * 3


def test_the_wait_is_bounded_and_then_the_call_is_decided_as_it_stands(live_guard):
    guard = live_guard(declare_wait_seconds=0.05)

    with guard.declaring():  # a declaration that never comes
        assert guard.check("github_list_issues", REPO).code == Decision.NO_PLAN
        assert guard.wait_for_declaration() is False


def test_no_declaration_in_flight_means_no_wait(live_guard):
    guard = live_guard()

    assert guard.wait_for_declaration(timeout=0) is True
    assert guard.check("github_list_issues", REPO).code == Decision.NO_PLAN


def test_a_plan_sent_for_approval_ends_the_wait_with_approval_pending(
    live_guard, team, policy_version
):
    policy_set(team=team, slug="default", document=REVIEW_POLICY)
    guard = live_guard(approval_wait_seconds=30)
    done = threading.Event()

    def declare() -> None:
        guard.handle_declare_plan(plan_document(steps=REVIEWED_PLAN_STEPS))
        done.set()

    with guard.declaring():
        declaring = threading.Thread(target=declare, daemon=True)
        declaring.start()
        caller, decisions = decide_in_thread(guard, "send_email", MAIL)
    caller.join(20)

    # Nobody has decided yet: the call is answered while the declaration still waits.
    assert [decision.code for decision in decisions] == [Decision.APPROVAL_PENDING]
    assert not done.is_set()
    guard.close()
    declaring.join(10)


def test_async_calls_sent_in_the_same_turn_as_the_declaration_are_allowed(live_server, agent):
    from django.conf import settings

    async def turn() -> list[object]:
        async with AsyncGuard(
            live_server.url, agent.api_key, issuer=settings.PLANGATE_ISSUER
        ) as guard:
            # As a framework runs one response's calls: concurrently, declare_plan first.
            return list(
                await asyncio.gather(
                    guard.handle_declare_plan(plan_document()),
                    guard.decide("github_list_issues", REPO),
                    guard.call("github_list_issues", REPO, lambda repo: f"issues of {repo}"),
                )
            )

    declared, decision, result = asyncio.run(turn())

    assert declared["ok"] is True
    assert decision.code == Decision.ALLOWED
    assert result == "issues of acme/public-app"


def test_async_check_never_waits_on_the_event_loop(live_server, agent):
    from django.conf import settings

    async def scenario() -> CallDecision:
        async with AsyncGuard(
            live_server.url, agent.api_key, issuer=settings.PLANGATE_ISSUER
        ) as guard:
            with guard.declaring():
                return guard.check("github_list_issues", REPO)

    assert asyncio.run(scenario()).code == Decision.NO_PLAN
