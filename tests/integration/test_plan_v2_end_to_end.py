"""A version-2 plan from end to end: declared through the real API of a live control plane,
its token verified by the real guard, every call decided by the guard with no request to
the control plane (only the decision log is posted), and what the guard counted stored and
shown on the plan's page."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.conf import settings

from guard.agent import CallBlocked, Guard
from guard.decisions import Decision
from guard.plan import plan_hash, validate_plan
from plans.admin_display import budget_reports, step_reports
from plans.models import Plan, PlanEvent
from policies.services import policy_set
from tests.conftest import AgentPersona, make_agent

pytestmark = pytest.mark.django_db(transaction=True)

POLICY = {
    "version": 1,
    "default": "deny",
    "rules": [{"effect": "allow", "tools": ["orders_get", "payments_refund"]}],
}
ORDER = {"order": "A-1001"}
PLAN = {
    "version": 2,
    "goal": "Refund order A-1001 after reading it",
    "user": "alice@acme.dev",
    "steps": [
        {"id": "read", "tool": "orders_get", "args": {"order": {"eq": "A-1001"}}},
        {
            "id": "refund",
            "tool": "payments_refund",
            "args": {"order": {"eq": "A-1001"}},
            "after": ["read"],
            "maxCalls": 10,
            "additionalArgs": False,
        },
    ],
    "budgets": [{"id": "refunds", "arg": "amount", "steps": ["refund"], "max": 500}],
}


class RecordingTransport(httpx.HTTPTransport):
    """A real HTTP transport that notes each request's method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}")
        return super().handle_request(request)


@pytest.fixture
def refunder(team, member) -> AgentPersona:
    return make_agent(team, "refunder", policy_set(team=team, slug="refunds", document=POLICY))


@pytest.fixture
def make_guard(live_server, refunder) -> Iterator[Callable[..., Guard]]:
    guards: list[Guard] = []

    def make(**options: Any) -> Guard:
        guard = Guard(
            live_server.url,
            refunder.api_key,
            issuer=settings.PLANGATE_ISSUER,
            auto_refresh=False,
            watch_status=False,
            report_interval=0.05,
            **options,
        )
        guards.append(guard)
        return guard

    yield make
    for guard in guards:
        guard.close()


def codes(guard: Guard, *calls: tuple[str, dict[str, Any]]) -> list[str]:
    return [guard.check(tool, args).code.value for tool, args in calls]


def test_a_version_2_plan_is_declared_signed_and_enforced_offline(make_guard):
    transport = RecordingTransport()
    guard = make_guard(transport=transport)

    declared = guard.declare(copy.deepcopy(PLAN))

    # Signed as sent: the server stored the normalised plan, and the guard verified a token
    # carrying exactly that plan and its hash.
    plan = Plan.objects.get()
    assert declared.plan_id == plan.pk
    assert plan.document == validate_plan(copy.deepcopy(PLAN))
    assert plan.hash == plan_hash(validate_plan(copy.deepcopy(PLAN)))
    assert declared.plan == plan.document
    asked_before_the_calls = len(transport.requests)

    refund = ("payments_refund", {**ORDER, "amount": 300})
    # Before the read has completed, the refund is out of order, however many times.
    assert codes(guard, refund, refund) == ["out_of_order", "out_of_order"]
    assert guard.call("orders_get", ORDER, lambda order: {"order": order}) == {"order": "A-1001"}
    # After it: allowed, up to 500 in total (reaching 500 exactly is allowed).
    assert guard.call(*refund, lambda **args: "refunded") == "refunded"
    assert guard.call("payments_refund", {**ORDER, "amount": 200}, lambda **args: "refunded")
    with pytest.raises(CallBlocked) as blocked:
        guard.call("payments_refund", {**ORDER, "amount": 0.01}, lambda **args: "refunded")
    assert blocked.value.decision.code == Decision.BUDGET_EXCEEDED
    # An argument the step does not pin, and a negative amount, which would buy room.
    assert codes(
        guard,
        ("payments_refund", {**ORDER, "amount": 0, "note": "goodwill"}),
        ("payments_refund", {**ORDER, "amount": -100}),
    ) == ["unexpected_argument", "not_in_plan"]

    # No call asked the control plane: only the decision log was posted meanwhile.
    assert {
        request
        for request in transport.requests[asked_before_the_calls:]
        if not request.endswith("/events")
    } == set()

    guard.close()
    events = list(PlanEvent.objects.filter(plan=plan).order_by("occurred_at", "id"))
    assert [(event.decision, event.step, event.amounts) for event in events] == [
        ("out_of_order", 1, None),
        ("out_of_order", 1, None),
        ("allowed", 0, None),
        ("allowed", 1, {"refunds": 300}),
        ("allowed", 1, {"refunds": 200}),
        ("budget_exceeded", 1, None),
        ("unexpected_argument", 1, None),
        ("not_in_plan", None, None),
    ]
    (budget,) = budget_reports(plan)
    assert (budget.budget_id, budget.used, budget.max) == ("refunds", 500, 500)
    reports = step_reports(plan)
    assert [(report.step_id, report.after, report.used) for report in reports] == [
        ("read", (), 1),
        ("refund", ("read",), 2),
    ]
    assert reports[1].blocked == [
        ("budget_exceeded", 1),
        ("out_of_order", 2),
        ("unexpected_argument", 1),
    ]


def test_the_declare_plan_tool_takes_a_version_2_plan(make_guard):
    guard = make_guard()

    result = guard.handle_declare_plan(json.dumps(PLAN))

    assert result["ok"] is True, result
    assert result["steps"][1] == (
        'refund: payments_refund with order = "A-1001" (up to 10 calls, after read,'
        " no other arguments, amount counts in refunds up to 500)"
    )
    assert guard.check("payments_refund", {**ORDER, "amount": 1}).code == Decision.OUT_OF_ORDER
