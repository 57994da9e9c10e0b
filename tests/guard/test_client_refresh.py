"""Tokens refresh themselves; a refused refresh blocks the plan; a failing one expires it.

The guard's clock is moved by hand (`clock`); the control plane signs with the real time,
so where a test needs a refreshed token to outlive a clock moved far ahead, it asks the
server for longer tokens through the `PLANGATE_TOKEN_TTL` setting.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from guard.decisions import Decision
from kernel.problems import Code
from members.services import api_key_revoke, member_disable
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from policies.services import policy_set
from tests.conftest import POLICY, plan_document

from .client_helpers import wait_until

REPO = {"repo": "acme/public-app"}
# The default refresh margin is a fifth of the token's lifetime, at most 120 s: a 900 s
# token is due for refresh 780 s after it was issued.
DUE = 781


def refresh_kinds(plan_id: str) -> list[str]:
    return list(
        PlanToken.objects.filter(plan_id=plan_id).order_by("id").values_list("kind", flat=True)
    )


def test_a_token_within_its_margin_is_refreshed_and_budgets_carry_over(make_any_guard, clock):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    guard.check("github_list_issues", REPO)
    guard.check("github_list_issues", REPO)

    not_yet = guard.refresh_if_due()
    clock.advance(DUE)
    refreshed = guard.refresh_if_due()

    assert not_yet is False
    assert refreshed is True
    assert refresh_kinds(declared.plan_id) == ["issue", "refresh"]
    assert guard.status().plan_id == declared.plan_id
    assert guard.check("github_list_issues", REPO).allowed
    assert guard.check("github_list_issues", REPO).code == Decision.MAX_CALLS_EXCEEDED


def test_a_refresh_brings_the_current_policy_into_call_decisions(make_any_guard, team):
    guard = make_any_guard()
    guard.declare(plan_document(steps=[{"tool": "github_get_issue"}]))
    call = {"repo": "acme/app", "number": 150}
    assert guard.check("github_get_issue", call).allowed
    policy_set(
        team=team,
        slug="default",
        document={
            **POLICY,
            "rules": [
                {"effect": "deny", "tools": ["github_*"], "args": {"number": {"gte": 100}}},
                *POLICY["rules"],
            ],
        },
    )
    assert guard.check("github_get_issue", call).allowed  # the snapshot in the token rules

    assert guard.refresh() is True

    assert guard.check("github_get_issue", call).code == Decision.POLICY_DENIED
    assert guard.status().policy_version == 2


def test_an_allowed_call_after_a_refresh_names_the_rule_of_the_new_policy(make_any_guard, team):
    guard = make_any_guard()
    guard.declare(plan_document(steps=[{"tool": "github_get_issue"}]))
    call = {"repo": "acme/app", "number": 7}
    before = guard.check("github_get_issue", call)
    # The same rule index (0) and step admit the call, under another rule.
    policy_set(
        team=team,
        slug="default",
        document={
            **POLICY,
            "rules": [
                {
                    "effect": "allow",
                    "name": "read acme",
                    "description": "Reading acme's repositories",
                    "tools": ["github_get_*"],
                },
                *POLICY["rules"][1:],
            ],
        },
    )
    assert guard.refresh() is True

    after = guard.check("github_get_issue", call)

    assert (before.rule, after.rule) == (0, 0)
    assert before.rule_description == "allow github_* (rules[0])"
    assert after.rule_description == "Reading acme's repositories (rules[0])"
    assert (
        after.reason
        == 'step 1 (github_get_issue) of the plan; allow rule "read acme" admits this call'
    )


def revoke(persona, team, plan_id):
    plan_revoke(plan=Plan.objects.get(pk=plan_id))


def disable_member(persona, team, plan_id):
    member_disable(team=team, email="alice@acme.dev")


def disable_agent(persona, team, plan_id):
    persona.agent.is_active = False
    persona.agent.save(update_fields=["is_active"])


def outlive_plan(persona, team, plan_id):
    Plan.objects.filter(pk=plan_id).update(expires_at=timezone.now() - timedelta(seconds=1))


def deny_the_step(persona, team, plan_id):
    policy_set(
        team=team,
        slug="default",
        document={**POLICY, "rules": [{"effect": "deny", "tools": ["github_list_*"]}]},
    )


@pytest.mark.parametrize(
    ("refuse", "code"),
    [
        (revoke, Decision.PLAN_REVOKED),
        (disable_member, Decision.USER_DISABLED),
        (disable_agent, Decision.AGENT_DISABLED),
        (outlive_plan, Decision.PLAN_EXPIRED),
        (deny_the_step, Decision.POLICY_DENIED),
    ],
)
def test_a_refused_refresh_blocks_every_later_call_with_its_code(
    make_any_guard, clock, switchboard, agent, team, refuse, code
):
    guard = make_any_guard()
    declared = guard.declare(plan_document())
    assert guard.check("github_list_issues", REPO).allowed
    refuse(agent, team, declared.plan_id)

    clock.advance(DUE)
    refreshed = guard.refresh_if_due()
    decisions = [
        guard.check("github_list_issues", REPO),
        guard.check("github_get_issue", REPO),
        guard.check("send_email", {"to": "alice@acme.dev"}),
    ]

    assert refreshed is False
    assert {decision.code for decision in decisions} == {code}
    assert "refused to refresh" in decisions[0].reason
    status = guard.status()
    assert status.state == "blocked"
    assert status.blocked == code.value
    # A refusal is final: the guard never asks again for this plan.
    attempts = switchboard.count("/refresh")
    clock.advance(3600)
    assert guard.check("github_list_issues", REPO).code == code
    assert guard.refresh_if_due() is False
    assert switchboard.count("/refresh") == attempts == 1


def test_a_transient_failure_keeps_the_valid_token_then_calls_are_token_expired(
    make_any_guard, clock, switchboard, settings
):
    settings.PLANGATE_TOKEN_TTL = 60
    guard = make_any_guard()
    guard.declare(plan_document())
    switchboard.down = True

    clock.advance(49)  # due (60 s token: 12 s margin), still valid
    assert guard.refresh_if_due() is False
    still_valid = guard.check("github_list_issues", REPO)
    clock.advance(12)  # past expiry
    expired = guard.check("github_list_issues", REPO)

    assert still_valid.allowed
    assert "unreachable" in (guard.status().refresh_error or "")
    assert expired.code == Decision.TOKEN_EXPIRED
    assert "unreachable" in expired.reason
    assert guard.status().state == "expired"

    # The control plane is back. A call never refreshes on its own thread (this guard has
    # no background refresher), so it stays token_expired until a refresh is made.
    settings.PLANGATE_TOKEN_TTL = 900
    switchboard.down = False
    clock.advance(5)
    requests = len(switchboard.paths)
    assert guard.check("github_list_issues", REPO).code == Decision.TOKEN_EXPIRED
    assert len(switchboard.paths) == requests
    assert guard.refresh_if_due() is True
    assert guard.check("github_list_issues", REPO).allowed
    assert guard.status().state == "active"


def test_retries_after_a_transient_failure_back_off(make_any_guard, clock, switchboard):
    guard = make_any_guard()
    guard.declare(plan_document())
    switchboard.down = True
    clock.advance(DUE)

    attempts = []
    for _ in range(6):
        guard.refresh_if_due()
        guard.refresh_if_due()  # not due again before the back-off delay
        attempts.append(switchboard.count("/refresh"))
        clock.advance(0.5)

    assert attempts[-1] < 6  # 1 s, 2 s, 4 s... between attempts
    assert attempts == sorted(attempts)


def test_a_refresh_refused_for_another_reason_is_not_retried_and_the_token_serves_out(
    make_any_guard, clock, switchboard, agent
):
    guard = make_any_guard()
    guard.declare(plan_document())
    api_key_revoke(api_key=agent.agent.api_keys.get())

    clock.advance(DUE)
    guard.refresh_if_due()
    clock.advance(60)
    guard.refresh_if_due()
    before_expiry = guard.check("github_list_issues", REPO)
    clock.advance(120)
    after_expiry = guard.check("github_list_issues", REPO)

    assert switchboard.count("/refresh") == 1
    assert Code.INVALID_API_KEY in (guard.status().refresh_error or "")
    assert before_expiry.allowed
    assert after_expiry.code == Decision.TOKEN_EXPIRED


def test_a_call_within_the_margin_does_not_wait_for_the_network(make_any_guard, clock, switchboard):
    guard = make_any_guard()  # no background refresher in this fixture
    guard.declare(plan_document())
    requests = len(switchboard.paths)
    clock.advance(DUE)

    decision = guard.check("github_list_issues", REPO)

    assert decision.allowed
    assert len(switchboard.paths) == requests


def test_the_background_refresher_renews_the_token_before_expiry(live_any_guard, clock, settings):
    guard = live_any_guard(clock=clock, report=False)
    declared = guard.declare(plan_document())
    settings.PLANGATE_TOKEN_TTL = 3600
    clock.advance(DUE)

    decision = guard.check("github_list_issues", REPO)  # wakes the refresher, never waits

    assert decision.allowed
    assert wait_until(lambda: refresh_kinds(declared.plan_id) == ["issue", "refresh"])
    assert wait_until(lambda: (guard.status().expires_at or 0) > clock() + 2000)
    assert guard.check("github_list_issues", REPO).allowed


def test_a_throttled_refresh_waits_for_retry_after(make_any_guard, clock, switchboard):
    def throttle(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/refresh"):
            problem = {"code": Code.THROTTLED, "status": 429, "detail": "Slow down."}
            return httpx.Response(429, json=problem, headers={"Retry-After": "30"})
        return response

    guard = make_any_guard()
    guard.declare(plan_document())
    switchboard.rewrite = throttle
    attempts = []

    for advance in (DUE, 20, 11):
        clock.advance(advance)
        guard.refresh_if_due()
        attempts.append(switchboard.count("/refresh"))

    assert attempts == [1, 1, 2]
    assert Code.THROTTLED in (guard.status().refresh_error or "")
    assert guard.check("github_list_issues", REPO).allowed
