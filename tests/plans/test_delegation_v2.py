"""Child plans of version-2 plans: closed steps, ordered steps and budgets
(docs/decisions/0070)."""

from __future__ import annotations

import pytest

from audit.models import AuditRecord
from guard.decisions import Decision
from kernel.problems import Code
from plans.models import Plan

from .helpers import assert_problem
from .test_delegation_api import AT, declare, errors, written

TO = {"to": {"eq": "bob@acme.dev"}}


def v2(steps: list, budgets: list | None = None, **extra) -> dict:
    return {
        "version": 2,
        "goal": "Pay the refunds",
        "user": "alice@acme.dev",
        "steps": steps,
        "budgets": budgets or [],
        **extra,
    }


def mail(**step) -> dict:
    return {"tool": "send_email", "args": TO, **step}


def spend(maximum: int | str, steps: list[str], budget_id: str = "spend") -> dict:
    return {"id": budget_id, "arg": "cost", "steps": steps, "max": maximum}


def delegate(persona, parent_id: str, document: dict):
    return persona.client.post(
        f"/v1/plans/{parent_id}/delegations", {"plan": document}, format="json"
    )


def test_a_closed_parent_step_needs_a_closed_child_step(agent):
    parent = declare(agent, v2([mail(additionalArgs=False)]))
    before = written()

    open_child = delegate(agent, parent["id"], v2([mail(maxCalls=1)]))

    body = assert_problem(open_child, 403, Code.DELEGATION_WIDENS)
    assert errors(body) == ["plan.steps[0].additionalArgs"]
    assert written() == before
    closed = delegate(agent, parent["id"], v2([mail(maxCalls=1, additionalArgs=False)]))
    assert closed.status_code == 201, closed.content


def test_a_closed_child_step_names_no_argument_the_parent_does_not(agent):
    parent = declare(agent, v2([mail(additionalArgs=False)]))
    step = mail(maxCalls=1, additionalArgs=False)
    step["args"] = {**TO, "cc": {"eq": "eve@acme.dev"}}

    response = delegate(agent, parent["id"], v2([step]))

    assert errors(assert_problem(response, 403, Code.DELEGATION_WIDENS)) == [
        "plan.steps[0].args.cc"
    ]


def test_a_parent_step_with_after_is_not_delegated(agent):
    parent = declare(agent, v2([mail(id="first"), mail(id="then", after=["first"])]))

    # Inside the first step: allowed. Only inside the ordered one: refused at the step.
    assert delegate(agent, parent["id"], v2([mail(maxCalls=1)])).status_code == 201
    step = {"tool": "send_email", "args": TO, "maxCalls": 20}
    first_spent = delegate(agent, parent["id"], v2([step]))
    body = assert_problem(first_spent, 409, Code.BUDGET_UNAVAILABLE)
    assert errors(body) == ["plan.steps[0].maxCalls"]


def test_only_an_ordered_step_holding_the_child_is_refused_at_the_step(agent):
    parent = declare(
        agent,
        v2([{"tool": "github_list_issues", "id": "list"}, mail(id="then", after=["list"])]),
    )

    response = delegate(agent, parent["id"], v2([mail(maxCalls=1)]))

    assert errors(assert_problem(response, 403, Code.DELEGATION_WIDENS)) == ["plan.steps[0]"]


def test_a_budgeted_parent_step_needs_a_child_budget_over_the_same_argument(agent):
    parent = declare(agent, v2([mail(id="pay")], [spend(100, ["pay"])]))
    before = written()

    unbudgeted = delegate(agent, parent["id"], v2([mail(id="pay", maxCalls=1)]))
    other_arg = delegate(
        agent,
        parent["id"],
        v2(
            [mail(id="pay", maxCalls=1)],
            [{"id": "spend", "arg": "price", "steps": ["pay"], "max": 10}],
        ),
    )

    assert errors(assert_problem(unbudgeted, 403, Code.DELEGATION_WIDENS)) == ["plan.steps[0]"]
    assert errors(assert_problem(other_arg, 403, Code.DELEGATION_WIDENS)) == ["plan.steps[0]"]
    assert written() == before


def test_budgets_are_partitioned_among_children_and_the_parents_spending(agent):
    parent = declare(agent, v2([mail(id="pay")], [spend(100, ["pay"])]))
    first = delegate(agent, parent["id"], v2([mail(id="pay", maxCalls=1)], [spend(60, ["pay"])]))
    assert first.status_code == 201, first.content
    assert first.json()["reserved"]["budgets"] == {"spend": "60"}
    paid = {
        "at": AT,
        "tool": "send_email",
        "decision": Decision.ALLOWED,
        "step": 0,
        "argsDigest": "0" * 64,
        "amounts": {"spend": 30.5},
    }
    events = agent.client.post(
        f"/v1/plans/{parent['id']}/events", {"events": [paid]}, format="json"
    )
    assert events.status_code == 202, events.content
    before = written()

    # 100 - 60 reserved - 30.5 spent = 9.5 left
    over = delegate(agent, parent["id"], v2([mail(id="pay", maxCalls=1)], [spend(10, ["pay"])]))

    assert errors(assert_problem(over, 409, Code.BUDGET_UNAVAILABLE)) == ["plan.budgets[0].max"]
    assert written() == before
    fits = delegate(agent, parent["id"], v2([mail(id="pay", maxCalls=1)], [spend(9.5, ["pay"])]))
    assert fits.status_code == 201, fits.content
    assert fits.json()["reserved"]["budgets"] == {"spend": "9.5"}


@pytest.mark.parametrize("maximum", [50, 50.25])
def test_the_delegation_record_names_the_reservation(agent, maximum):
    parent = declare(agent, v2([mail(id="pay")], [spend(100, ["pay"])]))

    child = delegate(
        agent, parent["id"], v2([mail(id="pay", maxCalls=4)], [spend(maximum, ["pay"])])
    ).json()

    record = AuditRecord.objects.get(kind=AuditRecord.Kind.PLAN_DELEGATED)
    assert record.details["reserved"] == {
        "calls": {"0": 4},
        "budgets": {"spend": str(maximum)},
        "steps": {"0": 0},
    }
    assert Plan.objects.get(pk=child["id"]).reserved == record.details["reserved"]
