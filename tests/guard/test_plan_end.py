"""How a plan ends, as the guard reports it to the real control plane: closed after every
required step ran (completed) or before (ended), a revoked plan staying revoked, and a
token the guard refused (token_refused, with the reason)."""

from __future__ import annotations

import httpx
import pytest
from django.urls import reverse

from audit.models import AuditRecord
from guard.agent.errors import PLAN_SWAPPED, TOKEN_INVALID, GuardError
from guard.decisions import not_completed_reason, steps_not_completed
from guard.plan import plan_hash, validate_plan
from plans.models import Plan, PlanDisplayUpdate, PlanEventBatch
from tests.conftest import plan_document

from .client_helpers import Switchboard, TestSigner, reissuing

REPO = {"repo": "acme/public-app"}
PLAN = plan_document(
    steps=[
        {
            "tool": "github_list_issues",
            "args": {"repo": {"eq": "acme/public-app"}},
            "required": True,
        },
        {"tool": "github_get_issue"},
    ]
)


def ended_records(plan_id: str) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(plan_id=plan_id, kind=AuditRecord.Kind.PLAN_ENDED))


def test_closing_after_every_required_step_ran_completes_the_plan(live_any_guard):
    guard = live_any_guard(acp_sink=lambda message: None)
    declared = guard.declare(PLAN)

    guard.call("github_list_issues", REPO, lambda repo: [])
    guard.close()

    plan = Plan.objects.get(pk=declared.plan_id)
    assert plan.status == Plan.Status.COMPLETED
    assert plan.ended_at is not None and plan.end_reason == ""
    (record,) = ended_records(plan.id)
    assert (record.code, record.details["status"]) == ("completed", "completed")
    assert record.actor == f"agent:{plan.agent_id}"
    # The end arrives with (or after) the ACP plan_removed the user saw.
    last = PlanDisplayUpdate.objects.filter(plan=plan).order_by("id").last()
    assert last is not None and last.message["update"]["sessionUpdate"] == "plan_removed"
    assert PlanEventBatch.objects.filter(plan=plan).order_by("id").last().end_outcome == "completed"


def test_closing_before_a_required_step_ran_ends_the_plan(live_any_guard):
    guard = live_any_guard()
    declared = guard.declare(PLAN)

    guard.check("github_get_issue", REPO)
    guard.close()

    assert Plan.objects.get(pk=declared.plan_id).status == Plan.Status.ENDED
    assert [record.code for record in ended_records(declared.plan_id)] == ["ended"]


def failing_tool(repo: str) -> list[int]:
    raise TimeoutError("the issue tracker timed out")


@pytest.mark.parametrize("through", ["call", "tool"])
def test_a_required_step_whose_tool_raised_has_not_run_and_the_plan_ends(
    live_any_guard, admin_client, through
):
    messages: list[dict] = []
    guard = live_any_guard(acp_sink=messages.append)
    declared = guard.declare(PLAN)

    with pytest.raises(TimeoutError):
        if through == "call":
            guard.call("github_list_issues", REPO, failing_tool)
        else:
            guard.tool("github_list_issues")(failing_tool)(**REPO)
    status = guard.status()

    # Allowed and counted against the budget, but the required step has not run.
    assert (status.steps[0].used, status.steps[0].failed) == (1, 1)
    assert status.steps[0].status == "in_progress"
    assert status.required_pending == (0,)
    assert status.complete is False
    guard.close()

    plan = Plan.objects.get(pk=declared.plan_id)
    assert plan.status == Plan.Status.ENDED
    assert plan.end_reason == (
        "required step(s) did not complete: step 1 (github_list_issues): its call failed"
    )
    (record,) = ended_records(plan.id)
    assert (record.code, record.details["status"]) == ("ended", "ended")
    assert PlanEventBatch.objects.filter(plan=plan).order_by("id").last().end_outcome == "ended"
    # The user's last view of the step: cancelled (it did not run), never completed.
    (last_items,) = [
        message
        for message in messages
        if message["params"]["update"]["sessionUpdate"] == "plan_update"
    ][-1:]
    entries = last_items["params"]["update"]["plan"]["entries"]
    assert [entry["status"] for entry in entries] == ["cancelled", "pending"]
    # The plan page tells the auditor so: allowed calls alone are not a run.
    page = admin_client.get(reverse("admin:plans_plan_change", args=[plan.pk]))
    html = page.content.decode()
    assert "required · not run" in html
    assert "required · ran" not in html


def test_a_required_step_runs_once_a_call_of_it_returns_after_one_raised(live_any_guard):
    guard = live_any_guard()
    declared = guard.declare(PLAN)

    with pytest.raises(TimeoutError):
        guard.call("github_list_issues", REPO, failing_tool)
    guard.call("github_list_issues", REPO, lambda repo: [])

    assert guard.status().required_pending == ()
    guard.close()
    assert Plan.objects.get(pk=declared.plan_id).status == Plan.Status.COMPLETED


def test_a_new_declaration_ends_the_previous_plan(live_any_guard):
    guard = live_any_guard()
    first = guard.declare(PLAN)

    second = guard.declare(PLAN)  # no call yet: a plan may still be declared
    guard.close()

    assert Plan.objects.get(pk=first.plan_id).status == Plan.Status.ENDED
    assert Plan.objects.get(pk=second.plan_id).status == Plan.Status.ENDED


def test_the_end_never_undoes_a_revocation(live_any_guard):
    guard = live_any_guard()
    declared = guard.declare(PLAN)
    guard.call("github_list_issues", REPO, lambda repo: [])
    Plan.objects.filter(pk=declared.plan_id).update(status=Plan.Status.REVOKED)

    guard.close()

    plan = Plan.objects.get(pk=declared.plan_id)
    assert plan.status == Plan.Status.REVOKED
    assert plan.ended_at is None
    (record,) = ended_records(plan.id)  # what the agent did is still on the record
    assert (record.code, record.details["status"]) == ("completed", "revoked")


def swap_plan(claims, body):
    claims["plan"] = validate_plan(plan_document(steps=[{"tool": "github_delete_repo"}]))
    claims["ph"] = body["planHash"] = plan_hash(claims["plan"])


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"transport": "swapping"}, PLAN_SWAPPED),
        # Unbound: a bound guard names the control plane by its issuer in each DPoP proof,
        # so with a wrong issuer its declaration is refused before any token (tests/guard/
        # test_dpop_client.py); an unbound one gets the token and refuses it.
        ({"issuer": "https://not-the-control-plane.example", "bind_token": False}, TOKEN_INVALID),
    ],
    ids=["swapped-plan", "wrong-issuer"],
)
def test_a_token_the_guard_refuses_marks_the_plan_with_the_reason(live_any_guard, options, code):
    if options.get("transport") == "swapping":
        options = {
            "transport": Switchboard(
                httpx.HTTPTransport(), rewrite=reissuing(TestSigner(), swap_plan)
            )
        }
    guard = live_any_guard(**options)

    with pytest.raises(GuardError) as refused:
        guard.declare(PLAN)
    assert guard.flush()

    assert refused.value.code == code
    plan = Plan.objects.get()
    assert plan.status == Plan.Status.TOKEN_REFUSED
    assert plan.end_reason.startswith(f"{code}: ")
    (record,) = ended_records(plan.id)
    assert record.code == "token_refused"
    assert record.details["reason"] == plan.end_reason


def test_the_end_reason_names_the_steps_that_did_not_complete_and_reads_back():
    reason = not_completed_reason([(1, "send_email", True), (3, "github_get_issue", False)])

    assert reason == (
        "required step(s) did not complete: step 2 (send_email): its call failed;"
        " step 4 (github_get_issue): it was not called"
    )
    assert steps_not_completed(reason) == {1, 3}
    assert not_completed_reason([]) == ""
    assert steps_not_completed("plan_revoked: step 2 (send_email) was running") == frozenset()
