"""Tokens bound to their holder (DPoP, docs/decisions/0069) over real HTTP: a guard binds
the plans it declares to its own key and goes on refreshing, polling and reporting; the
same token and API key, copied to another process (plain httpx, or another guard with
another key), are refused with invalid_dpop_proof; the binding checks offline."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from guard.agent import Guard, GuardError
from guard.agent.http import ControlPlaneError
from guard.dpop import DpopInvalid, DpopKey, check_binding
from plans.models import Plan, PlanEvent
from tests.conftest import plan_document

REPO = {"repo": "acme/public-app"}


def batch() -> dict:
    digest = hashlib.sha256(b'{"repo":"acme/public-app"}').hexdigest()
    event = {
        "at": "2026-11-30T09:00:00.250Z",
        "tool": "github_list_issues",
        "decision": "allowed",
        "step": 0,
        "argsDigest": digest,
    }
    return {"events": [event]}


def refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "invalid_dpop_proof"
    assert response.headers["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"')


@pytest.fixture
def bound(live_guard) -> tuple[Guard, str]:
    guard = live_guard(auto_refresh=False, watch_status=False, status_list=False)
    declared = guard.declare(plan_document())
    return guard, declared.plan_id


def test_a_guard_binds_its_plan_and_goes_on_with_it(bound):
    guard, plan_id = bound
    jkt = guard._dpop_key.jkt

    assert Plan.objects.get(pk=plan_id).jkt == jkt
    assert guard._plan.token.claims.cnf == jkt
    assert guard.refresh() is True
    assert guard._plan.token.claims.cnf == jkt
    assert guard.poll_status() is False
    assert guard.call("github_list_issues", REPO, lambda **args: []) == []
    assert guard.flush(10.0)
    assert PlanEvent.objects.filter(plan_id=plan_id).count() == 1


def test_a_copied_token_and_api_key_are_refused_from_another_process(bound, live_server, agent):
    guard, plan_id = bound
    token = guard._plan.token.token
    plan_url = f"{live_server.url}/v1/plans/{plan_id}"
    with httpx.Client(headers={"Authorization": f"Bearer {agent.api_key}"}) as thief:
        refused(thief.post(f"{plan_url}/refresh", json={"token": token}))
        refused(thief.get(f"{plan_url}/status"))
        refused(thief.post(f"{plan_url}/events", json=batch()))
        # A proof by the thief's own key is no better.
        key = DpopKey.generate()
        dpop = key.proof(htm="POST", htu=f"{plan_url}/refresh", access_token=agent.api_key)
        refused(thief.post(f"{plan_url}/refresh", json={"token": token}, headers={"DPoP": dpop}))
    # Nor is a whole other guard: it holds another key.
    other = Guard(live_server.url, agent.api_key, report=False, auto_refresh=False)
    try:
        with pytest.raises(ControlPlaneError) as caught:
            other._control_plane.refresh(plan_id, token)
        assert caught.value.code == "invalid_dpop_proof"
    finally:
        other.close()
    # The holder is not disturbed.
    assert guard.refresh() is True


def test_a_replayed_proof_is_refused(bound, live_server, agent):
    guard, plan_id = bound
    url = f"{live_server.url}/v1/plans/{plan_id}/status"
    dpop = guard._dpop_key.proof(htm="GET", htu=url, access_token=agent.api_key)
    headers = {"Authorization": f"Bearer {agent.api_key}", "DPoP": dpop}

    assert httpx.get(url, headers=headers).status_code == 200
    refused(httpx.get(url, headers=headers))
    # A proof for another URL or method, by the right key, is refused too.
    for method, target in (("POST", url), ("GET", url.replace("/status", "/refresh"))):
        other = guard._dpop_key.proof(htm=method, htu=target, access_token=agent.api_key)
        refused(httpx.get(url, headers={**headers, "DPoP": other}))


def test_binding_is_checked_offline_by_the_token_alone(bound):
    guard, _ = bound
    claims = guard._plan.token.claims
    url = "https://tools.example/mcp"

    holder = guard._dpop_key.proof(htm="POST", htu=url, access_token=guard._plan.token.token)
    proof = check_binding(claims, holder, htm="POST", htu=url, access_token=guard._plan.token.token)
    assert proof is not None and proof.jkt == claims.cnf

    stranger = DpopKey.generate().proof(htm="POST", htu=url)
    with pytest.raises(DpopInvalid) as caught:
        check_binding(claims, stranger, htm="POST", htu=url)
    assert caught.value.problem == "jkt"
    with pytest.raises(DpopInvalid) as caught:
        check_binding(claims, None, htm="POST", htu=url)
    assert caught.value.problem == "missing"


def test_a_guard_that_binds_nothing_sends_no_proof(live_guard):
    guard = live_guard(bind_token=False, auto_refresh=False, watch_status=False, status_list=False)
    declared = guard.declare(plan_document())

    assert Plan.objects.get(pk=declared.plan_id).jkt == ""
    assert guard._plan.token.claims.cnf is None
    assert guard.refresh() is True
    assert guard.poll_status() is False


def test_a_team_that_requires_binding_refuses_a_guard_that_binds_nothing(live_guard, team):
    team.require_token_binding = True
    team.save(update_fields=["require_token_binding"])
    guard = live_guard(bind_token=False, auto_refresh=False, watch_status=False, status_list=False)

    with pytest.raises(GuardError) as caught:
        guard.declare(plan_document())

    assert caught.value.code == "invalid_dpop_proof"
    assert not Plan.objects.exists()
    binding = live_guard(auto_refresh=False, watch_status=False, status_list=False)
    assert Plan.objects.get(pk=binding.declare(plan_document()).plan_id).jkt


def test_either_guard_binds_and_refreshes_its_plan(live_any_guard):
    guard = live_any_guard(auto_refresh=False, watch_status=False, status_list=False)
    declared = guard.declare(plan_document())

    assert Plan.objects.get(pk=declared.plan_id).jkt == guard.dpop_jkt
    assert guard.refresh() is True
    assert guard.poll_status() is False


def test_one_proof_sent_many_times_at_once_is_taken_once(bound, live_server, agent):
    guard, plan_id = bound
    url = f"{live_server.url}/v1/plans/{plan_id}/status"
    dpop = guard._dpop_key.proof(htm="GET", htu=url, access_token=agent.api_key)
    headers = {"Authorization": f"Bearer {agent.api_key}", "DPoP": dpop}
    start = threading.Barrier(8)

    def send() -> int:
        start.wait()
        return httpx.get(url, headers=headers, timeout=30).status_code

    with ThreadPoolExecutor(8) as pool:
        answers = sorted(pool.map(lambda _: send(), range(8)))

    assert answers == [200] + [401] * 7


def test_a_bound_guard_with_a_wrong_issuer_is_told_which_setting_to_fix(live_guard):
    guard = live_guard(issuer="https://not-the-control-plane.example", status_list=False)

    with pytest.raises(GuardError) as refused:
        guard.declare(plan_document())

    assert refused.value.code == "invalid_dpop_proof"
    assert "'https://not-the-control-plane.example': give it the server's issuer" in str(
        refused.value
    )
    assert not Plan.objects.exists()
