"""A real guard delegates part of its plan to a sub-agent, against the real control plane
in-process (docs/decisions/0070): the child's guard decides inside the child plan, the
parent's own counters hold what the child reserved, a refusal carries its code and paths,
and revoking the parent stops the child."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import httpx
import pytest

from guard.agent import AsyncGuard, Delegation, Guard, GuardError
from guard.agent.delegation import DELEGATED_PLAN, INVALID_DELEGATION
from guard.decisions import Decision
from guard.tokens import unverified_claims, unverified_header
from members.services import agent_update
from plans.models import Plan, PlanToken
from plans.services import plan_revoke
from tests.conftest import make_agent, plan_document

from .client_helpers import json_response, wait_until

REPO = {"repo": "acme/public-app"}
LIST_STEP = {"tool": "github_list_issues", "args": {"repo": {"eq": "acme/public-app"}}}


def child_plan(max_calls: int = 2, **step) -> dict:
    return plan_document(
        goal="List the issues", steps=[{**LIST_STEP, "maxCalls": max_calls, **step}]
    )


@pytest.fixture
def worker(team, policy_version):
    """A second agent of the team that accepts delegations: the sub-agent."""
    persona = make_agent(team, "worker", policy_version)
    agent_update(agent=persona.agent, accepts_delegations=True)
    return persona


def test_a_child_decides_inside_its_plan_and_the_parent_holds_the_reservation(
    make_any_guard, worker
):
    parent = make_any_guard()
    declared = parent.declare(plan_document())

    delegation = parent.delegate(child_plan(), to=worker.agent.pk)

    assert delegation.parent_id == declared.plan_id
    assert delegation.parent_plan_hash == declared.plan_hash
    assert delegation.agent == worker.agent.pk
    assert delegation.reserved["calls"] == {"0": 2}
    assert delegation.url == parent.url and delegation.issuer == parent.issuer
    assert "pg_" not in delegation.to_json()  # never an API key
    step = parent.status().steps[0]
    assert (step.used, step.delegated, step.max_calls) == (0, 2, 3)
    assert parent.status().required_pending == ()  # a reservation is not a call that ran
    # The parent keeps one call of its three; the child took two.
    assert parent.check("github_list_issues", REPO).allowed
    spent = parent.check("github_list_issues", REPO)
    assert spent.code == Decision.MAX_CALLS_EXCEEDED
    assert "step 1 (3 calls, 2 held or reserved for child plans)" in spent.reason

    child = make_any_guard(api_key=worker.api_key)
    adopted = child.adopt(Delegation.from_json(delegation.to_json()))

    assert adopted.plan_id == delegation.plan_id
    assert child._plan.token.claims.parent.jti == declared.plan_id
    assert child.check("github_list_issues", REPO).allowed
    assert child.check("github_get_issue", REPO).code == Decision.NOT_IN_PLAN
    assert child.check("github_list_issues", {"repo": "acme/other"}).code == Decision.NOT_IN_PLAN
    assert child.check("github_list_issues", REPO).allowed
    assert child.check("github_list_issues", REPO).code == Decision.MAX_CALLS_EXCEEDED


def test_a_child_refreshes_with_its_own_agents_key(make_any_guard, worker, clock):
    parent = make_any_guard()
    parent.declare(plan_document())
    child = make_any_guard(api_key=worker.api_key)
    delegation = child.adopt(parent.delegate(child_plan(), to=worker.agent.pk))

    clock.advance(5)
    assert child.refresh() is True

    refreshed = PlanToken.objects.get(plan_id=delegation.plan_id, kind=PlanToken.Kind.REFRESH)
    assert refreshed.plan.agent_id == worker.agent.pk
    assert child._plan.token.claims.parent is not None


@pytest.mark.parametrize(
    ("plan", "to", "code", "paths"),
    [
        (
            child_plan(args={"repo": {"eq": "acme/other"}}),
            None,
            "delegation_widens",
            ["plan.steps[0].args.repo"],
        ),
        (child_plan(max_calls=5), None, "budget_unavailable", ["plan.steps[0].maxCalls"]),
        (child_plan(), "01ARZ3NDEKTSV4RRFFQ69G5FAV", "delegation_refused", ["agent"]),
    ],
    ids=["widens", "budget", "refused"],
)
def test_a_refused_delegation_raises_with_its_code_and_paths_and_holds_nothing(
    make_any_guard, plan, to, code, paths
):
    parent = make_any_guard()
    parent.declare(plan_document())

    with pytest.raises(GuardError) as raised:
        parent.delegate(plan, to=to)

    assert raised.value.code == code
    assert [error["path"] for error in raised.value.errors] == paths
    assert [step.delegated for step in parent.status().steps] == [0, 0]
    for _ in range(3):
        assert parent.check("github_list_issues", REPO).allowed


def test_another_agent_that_does_not_accept_delegations_is_refused(
    make_any_guard, team, policy_version
):
    other = make_agent(team, "closed", policy_version)
    parent = make_any_guard()
    parent.declare(plan_document())

    with pytest.raises(GuardError) as raised:
        parent.delegate(child_plan(), to=other.agent.pk)

    assert raised.value.code == "delegation_refused"


def test_delegating_without_a_plan_or_with_an_invalid_one_is_refused(make_any_guard):
    parent = make_any_guard()
    with pytest.raises(GuardError) as raised:
        parent.delegate(child_plan())
    assert raised.value.code == Decision.NO_PLAN

    parent.declare(plan_document())
    with pytest.raises(GuardError) as raised:
        parent.delegate({"version": 1})
    assert raised.value.code == "invalid_plan"
    assert raised.value.errors


def test_revoking_the_parent_stops_the_child(make_any_guard, worker):
    parent = make_any_guard()
    declared = parent.declare(plan_document())
    child = make_any_guard(api_key=worker.api_key, status_list=False)
    child.adopt(parent.delegate(child_plan(), to=worker.agent.pk))
    assert child.check("github_list_issues", REPO).allowed

    plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin", reason="stop now")

    assert child.poll_status() is True
    assert child.check("github_list_issues", REPO).code == Decision.PLAN_REVOKED
    assert child.refresh() is False


def test_a_sub_agent_session_declares_no_plan_of_its_own(make_any_guard, worker):
    parent = make_any_guard()
    parent.declare(plan_document())
    child = make_any_guard(api_key=worker.api_key)
    child.adopt(parent.delegate(child_plan(), to=worker.agent.pk))

    with pytest.raises(GuardError) as raised:
        child.declare(plan_document())
    result = child.handle_declare_plan(plan_document())

    assert raised.value.code == DELEGATED_PLAN
    assert DELEGATED_PLAN in json.dumps(result)
    assert child.check("github_list_issues", REPO).allowed  # the child plan stays


def test_a_delegation_for_another_parent_or_agent_is_refused(make_any_guard, worker, agent):
    parent = make_any_guard()
    parent.declare(plan_document())
    delegation = parent.delegate(child_plan(), to=worker.agent.pk)

    for changed in (
        dataclasses.replace(delegation, parent_id="01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        dataclasses.replace(delegation, agent=agent.agent.pk),
    ):
        child = make_any_guard(api_key=worker.api_key)
        with pytest.raises(GuardError) as raised:
            child.adopt(changed)
        assert raised.value.code == "plan_swapped"
        assert child.check("github_list_issues", REPO).code == Decision.NO_PLAN

    # The parent's own token is not a child's.
    own = dataclasses.replace(
        delegation,
        plan_id=parent._plan.id,
        token=parent._plan.token.token,
        plan=parent._plan.document,
        plan_hash=parent._plan.hash,
    )
    with pytest.raises(GuardError) as raised:
        make_any_guard().adopt(own)
    assert raised.value.code == "token_invalid"


def test_a_delegation_reads_back_from_its_json_and_says_what_is_wrong():
    delegation = Delegation(
        plan_id="01ARZ3NDEKTSV4RRFFQ69G5FAV",
        token="a.b.c",
        plan=child_plan(),
        plan_hash="h",
        expires_at=1_800_000_000.5,
        parent_id="01ARZ3NDEKTSV4RRFFQ69G5FAW",
        parent_plan_hash="p",
        agent="01ARZ3NDEKTSV4RRFFQ69G5FAX",
        url="http://localhost:8000",
        issuer="http://localhost:8000",
        reserved={"calls": {"0": 2}, "budgets": {}},
    )
    assert Delegation.from_json(delegation.to_json()) == delegation
    bound = dataclasses.replace(delegation, jkt="k" * 43)
    assert Delegation.from_json(bound.to_json()) == bound
    assert "a.b.c" not in repr(delegation)

    data = json.loads(delegation.to_json())
    del data["token"]
    data["parent"]["id"] = 7
    data["expiresAt"] = "soon"
    with pytest.raises(GuardError) as raised:
        Delegation.from_json(json.dumps(data))
    assert raised.value.code == INVALID_DELEGATION
    assert [error["path"] for error in raised.value.errors] == ["token", "parent.id", "expiresAt"]
    with pytest.raises(GuardError):
        Delegation.from_json("not json")


@pytest.mark.django_db(transaction=True)
def test_a_live_child_is_stopped_within_the_bound_once_the_parent_is_revoked(
    live_guard, worker, team
):
    team.revocation_bound_seconds = 4
    team.save(update_fields=["revocation_bound_seconds"])
    parent = live_guard()
    declared = parent.declare(plan_document())
    assert parent.check("github_list_issues", REPO).allowed
    # The parent's reported call counts on the control plane: two of three are left.
    with pytest.raises(GuardError) as raised:
        parent.delegate(child_plan(max_calls=3), to=worker.agent.pk)
    assert raised.value.code == "budget_unavailable"
    child = Guard.from_delegation(
        parent.delegate(child_plan(), to=worker.agent.pk), worker.api_key, report_interval=0.05
    )
    try:
        assert child.check("github_list_issues", REPO).allowed
        assert parent.check("github_list_issues", REPO).code == Decision.MAX_CALLS_EXCEEDED

        plan_revoke(plan=Plan.objects.get(pk=declared.plan_id), by="admin", reason="stop")
        revoked_at = time.monotonic()

        # The child's own watch stops it: no call is spent to see it.
        assert wait_until(lambda: child.status().blocked is not None, timeout=30)
        delay = time.monotonic() - revoked_at
        assert child.check("github_list_issues", REPO).code == Decision.PLAN_REVOKED
        print(f"\nchild blocked {delay:.2f} s after its parent was revoked (bound 4 s)")
        assert delay < 4
    finally:
        child.close()


def test_the_parents_own_calls_of_the_childs_tools_wait_while_it_delegates(
    make_any_guard, switchboard
):
    parent = make_any_guard()
    parent.declare(plan_document())
    seen: list[Decision] = []

    def during(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/delegations"):
            seen.append(parent.check("github_list_issues", REPO).code)
            seen.append(parent.check("github_get_issue", REPO).code)  # not the child's tool
        return response

    switchboard.rewrite = during
    parent.delegate(child_plan())

    assert seen == [Decision.MAX_CALLS_EXCEEDED, Decision.ALLOWED]
    # Held, then given back: the parent has its one call left, the child two.
    step = parent.status().steps[0]
    assert (step.used, step.delegated) == (0, 2)
    assert parent.check("github_list_issues", REPO).allowed
    assert parent.check("github_list_issues", REPO).code == Decision.MAX_CALLS_EXCEEDED


def test_an_answer_whose_reservation_names_no_parent_step_reserves_nothing(
    make_any_guard, switchboard
):
    parent = make_any_guard()
    parent.declare(plan_document())

    def tampered(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/delegations"):
            body = response.json()
            body["reserved"] = {"calls": {"7": 1}, "budgets": {}}
            return json_response(response.status_code, body)
        return response

    switchboard.rewrite = tampered
    with pytest.raises(GuardError) as raised:
        parent.delegate(child_plan())

    assert raised.value.code == "token_invalid"
    assert [step.delegated for step in parent.status().steps] == [0, 0]
    for _ in range(3):
        assert parent.check("github_list_issues", REPO).allowed


@pytest.mark.django_db(transaction=True)
def test_an_async_sub_agent_starts_from_a_delegation(live_guard, worker):
    parent = live_guard(report=False)
    parent.declare(plan_document())
    delegation = parent.delegate(child_plan(), to=worker.agent.pk)

    async def run() -> list[Decision]:
        child = await AsyncGuard.from_delegation(delegation, worker.api_key, report=False)
        try:
            return [
                child.check("github_list_issues", REPO).code,
                child.check("github_get_issue", REPO).code,
            ]
        finally:
            await child.aclose()

    assert asyncio.run(run()) == [Decision.ALLOWED, Decision.NOT_IN_PLAN]


def test_a_child_bound_to_the_sub_agents_key_refreshes_only_there(make_any_guard, worker, clock):
    parent = make_any_guard()
    parent.declare(plan_document())
    child = make_any_guard(api_key=worker.api_key)

    delegation = parent.delegate(child_plan(), to=worker.agent.pk, jkt=child.dpop_jkt)
    child.adopt(Delegation.from_json(delegation.to_json()))

    assert delegation.jkt == child.dpop_jkt
    assert child._plan.token.claims.cnf == child.dpop_jkt
    clock.advance(5)
    assert child.refresh() is True
    assert child.check("github_list_issues", REPO).allowed
    # Another guard of the same agent holds another key: it does not take the delegation.
    with pytest.raises(GuardError) as raised:
        make_any_guard(api_key=worker.api_key).adopt(delegation)
    assert raised.value.code == "token_invalid"


def test_a_team_that_binds_every_token_needs_the_sub_agents_key(make_any_guard, worker, team):
    team.require_token_binding = True
    team.save(update_fields=["require_token_binding"])
    parent = make_any_guard()
    parent.declare(plan_document())

    with pytest.raises(GuardError) as raised:
        parent.delegate(child_plan(), to=worker.agent.pk)

    assert (raised.value.code, raised.value.errors[0]["path"]) == ("invalid_request", "jkt")
    assert [step.delegated for step in parent.status().steps] == [0, 0]


def test_a_sub_agent_delegates_on_and_the_act_chain_grows(make_any_guard, worker, agent):
    parent = make_any_guard()
    parent.declare(plan_document())
    child = make_any_guard(api_key=worker.api_key)
    child.adopt(parent.delegate(child_plan(), to=worker.agent.pk))

    grandchild = child.delegate(child_plan(max_calls=1))

    claims = unverified_claims(grandchild.token)
    assert claims["act"] == {
        "sub": worker.agent.pk,
        "act": {"sub": worker.agent.pk, "act": {"sub": agent.agent.pk}},
    }
    assert grandchild.parent_id == child._plan.id
    assert [step.delegated for step in child.status().steps] == [1]
    assert child.check("github_list_issues", REPO).allowed
    assert child.check("github_list_issues", REPO).code == Decision.MAX_CALLS_EXCEEDED


def test_a_child_whose_token_is_refused_still_counts_what_it_reserved(make_any_guard, switchboard):
    parent = make_any_guard()
    parent.declare(plan_document())

    def swapped(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/delegations"):
            body = response.json()
            body["planHash"] = "x" * 43
            return json_response(response.status_code, body)
        return response

    switchboard.rewrite = swapped
    with pytest.raises(GuardError) as raised:
        parent.delegate(child_plan())

    assert raised.value.code == "plan_swapped"
    # The control plane reserved two calls for a child this guard did not take: they stay
    # spent, so the plan's three calls are never exceeded.
    assert [step.delegated for step in parent.status().steps] == [2, 0]
    assert parent.check("github_list_issues", REPO).allowed
    assert parent.check("github_list_issues", REPO).code == Decision.MAX_CALLS_EXCEEDED


def test_a_bound_parent_delegates_with_a_proof_by_its_key(make_any_guard, switchboard):
    parent = make_any_guard()
    parent.declare(plan_document())
    assert parent._plan.token.claims.cnf == parent.dpop_jkt  # the parent is bound
    proofs: list[str | None] = []

    def record(request: httpx.Request, response: httpx.Response) -> httpx.Response:
        if request.url.path.endswith("/delegations"):
            proofs.append(request.headers.get("DPoP"))
        return response

    switchboard.rewrite = record
    delegation = parent.delegate(child_plan())

    (proof,) = proofs
    assert proof is not None
    assert unverified_header(proof)["typ"] == "dpop+jwt"
    # The parent's proof binds nothing: the child is for whichever guard adopts it.
    assert unverified_claims(delegation.token).get("cnf") is None
