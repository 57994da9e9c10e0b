"""The guard waits well for a person's approval (issue 12): the waiting loop, Retry-After
honoured within a floor and a cap, the ACP statuses, calls blocked while the plan waits,
and the approval (``apr``) verified, against a control plane that answers over HTTP exactly
as the contract says (``202`` then ``POST /v1/plans/{id}/token``: ``409`` / ``200`` /
``403`` / ``410``). The end-to-end test against the real control plane is
test_approval_wait_live.py.

No timing: the guard's clock is moved by hand and its sleeper records the waits it asked
for (and moves the clock by as much).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from guard.agent import Guard, acp
from guard.agent.approval import DEFAULT_POLL_DELAY, MAX_POLL_DELAY, MIN_POLL_DELAY
from guard.agent.errors import ApprovalError, CallBlocked, GuardError
from guard.canonical import sha256_hex
from guard.decisions import Decision
from guard.plan import plan_hash, validate_plan
from tests.conftest import plan_document

from .client_helpers import FakeClock, TestSigner, wait_until
from .guard_kinds import build_guard
from .test_acp import assert_valid_v1, assert_valid_v2, statuses

URL = "http://control-plane.test"
PLAN_ID = "01JDAPPR0VA1WA1T0000000000"
POLICY = {"version": 1, "default": "deny", "rules": [{"effect": "allow", "tools": ["*"]}]}
REVIEW = [
    {
        "path": "steps[1]",
        "step": 1,
        "tool": "github_get_issue",
        "rule": {"index": 0, "description": "rules[0]: review github_*"},
    }
]
APPROVER = "bob@acme.dev"
Reply = tuple[int, dict[str, Any], dict[str, str]]


def pending(retry_after: float | None = 5) -> Reply:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return 409, {"code": "approval_pending", "detail": "the plan awaits approval"}, headers


def denied(reason: str) -> Reply:
    return 403, {"code": "approval_denied", "detail": reason}, {}


EXPIRED: Reply = (410, {"code": "approval_expired", "detail": "nobody decided"}, {})
APPROVED: Reply = (200, {}, {})  # the body is the signed token, made when asked


@dataclass
class FakeControlPlane:
    """The agent-facing API of a control plane whose policy sends the plan to a person:
    ``POST /v1/plans`` answers 202 with the review list and a Location, each ``POST
    /v1/plans/{id}/token`` takes the next reply of `token_replies` (the last one repeats),
    and an approved answer is a token signed as the control plane signs it, with ``apr``.
    `edit_claims` may tamper with the approved token's claims."""

    clock: FakeClock
    token_replies: list[Reply]
    signer: TestSigner = field(default_factory=TestSigner)
    edit_claims: Callable[[dict[str, Any]], None] | None = None
    requests: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    document: dict[str, Any] | None = None

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def count(self, fragment: str) -> int:
        return sum(fragment in request for request in self.requests)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append(f"{request.method} {path}")
        if path == "/v1/keys/jwks":
            return httpx.Response(
                200, json={"keys": [self.signer.jwk]}, headers={"Cache-Control": "max-age=300"}
            )
        if request.method == "POST" and path == "/v1/plans":
            self.document = validate_plan(json.loads(request.content)["plan"])
            return httpx.Response(
                202,
                json={"id": PLAN_ID, "status": "pending_approval", "review": REVIEW},
                headers={"Location": f"/v1/plans/{PLAN_ID}"},
            )
        if request.method == "POST" and path == f"/v1/plans/{PLAN_ID}/token":
            assert not request.content  # no body
            status, body, headers = (
                self.token_replies.pop(0) if len(self.token_replies) > 1 else self.token_replies[0]
            )
            if status == 200:
                return httpx.Response(200, json=self.issued())
            return httpx.Response(
                status,
                json={"type": "about:blank", "title": body["code"], "status": status, **body},
                headers={"Content-Type": "application/problem+json", **headers},
            )
        if request.method == "POST" and path == f"/v1/plans/{PLAN_ID}/events":
            self.events.append(json.loads(request.content))
            return httpx.Response(202, json={"events": 1, "displayUpdates": 0, "duplicate": False})
        return httpx.Response(404, json={"code": "plan_not_found", "detail": path})

    def issued(self) -> dict[str, Any]:
        assert self.document is not None
        digest = plan_hash(self.document)
        now = int(self.clock())
        claims: dict[str, Any] = {
            "iss": URL,
            "sub": self.document["user"],
            "jti": PLAN_ID,
            "iat": now,
            "exp": now + 900,
            "ph": digest,
            "plan": self.document,
            "agent": "01JDAGENT00000000000000000",
            "pol": POLICY,
            "polv": 3,
            "polh": sha256_hex(POLICY),
            "role": None,
            "groups": [],
            "apr": {"by": APPROVER, "at": now - 5, "ph": digest},
        }
        if self.edit_claims is not None:
            self.edit_claims(claims)
        return {
            "id": PLAN_ID,
            "token": self.signer.sign(claims),
            "planHash": digest,
            "expiresAt": "2026-12-01T00:00:00Z",
            "policy": {"id": "01JDP0L1CY0000000000000000", "version": 3, "hash": claims["polh"]},
            "reportArguments": False,
        }


class RecordingSleeper:
    """Records each wait the guard asks for and moves the guard's clock by as much."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleeper(clock) -> RecordingSleeper:
    return RecordingSleeper(clock)


@pytest.fixture
def make(clock, sleeper, guard_kind):
    """Guards over the fake control plane: a Guard, or an AsyncGuard behind the facade (every
    test using it runs for both, see conftest.guard_kind)."""
    guards: list[Any] = []

    def build(replies: list[Reply], **options: Any) -> tuple[Any, FakeControlPlane, list]:
        control_plane = FakeControlPlane(clock, replies)
        shown: list[dict[str, Any]] = []
        options = {
            "clock": clock,
            "approval_sleep": sleeper,
            "auto_refresh": False,
            "report": False,
            "acp_sink": shown.append,
            **options,
        }
        guard = build_guard(
            guard_kind, URL, "pg_test", transport=control_plane.transport(), **options
        )
        guards.append(guard)
        return guard, control_plane, shown

    yield build
    for guard in guards:
        guard.close()


# --- the waiting loop ---------------------------------------------------------------------


def test_declare_waits_until_a_person_approves_then_holds_the_approved_token(make, sleeper):
    guard, control_plane, _ = make([pending(3), pending(3), APPROVED])

    declared = guard.declare(plan_document())

    assert declared.plan_id == PLAN_ID
    assert declared.approved_by == APPROVER
    assert control_plane.count("POST /v1/plans/") == 3  # asked three times for the token
    assert sleeper.waits == [3.0, 3.0]  # as Retry-After said
    assert guard.status().state == "active"
    assert guard.check("github_list_issues", {"repo": "acme/public-app"}).allowed


def test_the_model_gets_the_approvers_name_from_the_declare_plan_tool(make):
    guard, _, _ = make([pending(1), APPROVED])

    result = guard.handle_declare_plan(json.dumps(plan_document()))

    assert result["ok"] is True
    assert result["planId"] == PLAN_ID
    assert result["approvedBy"] == APPROVER


def test_a_denied_plan_raises_approval_denied_with_the_approvers_reason(make, sleeper):
    guard, _, shown = make([pending(2), denied("too risky on a Friday")])

    with pytest.raises(ApprovalError) as raised:
        guard.declare(plan_document())

    assert raised.value.code == "approval_denied"
    assert "too risky on a Friday" in raised.value.message
    assert raised.value.plan_id == PLAN_ID
    assert raised.value.review == REVIEW
    assert sleeper.waits == [2.0]
    # The plan left the session: no token, and the user saw its steps cancelled, then gone.
    assert guard.status().state == "no_plan"
    assert guard.check("github_list_issues", {"repo": "acme/public-app"}).code is Decision.NO_PLAN
    assert statuses(shown[-2]) == [acp.CANCELLED, acp.CANCELLED]
    assert shown[-1]["params"]["update"] == {"sessionUpdate": "plan_removed", "planId": PLAN_ID}


def test_the_declare_plan_tool_tells_the_model_who_must_act_on_a_denied_plan(make):
    guard, _, _ = make([denied("not this repository")])

    result = guard.handle_declare_plan(plan_document())

    assert result["ok"] is False
    assert result["code"] == "approval_denied"
    assert "not this repository" in result["detail"]
    assert result["planId"] == PLAN_ID
    assert result["review"] == REVIEW


def test_an_expired_approval_raises_approval_expired(make):
    guard, _, _ = make([pending(1), EXPIRED])

    with pytest.raises(ApprovalError) as raised:
        guard.declare(plan_document())

    assert raised.value.code == "approval_expired"
    assert guard.status().state == "no_plan"


def test_a_plan_still_pending_at_the_bound_stays_pending_and_is_picked_up_later(
    make, sleeper, clock
):
    guard, control_plane, _ = make([pending(4)], approval_wait_seconds=10)

    with pytest.raises(ApprovalError) as raised:
        guard.declare(plan_document())

    # Asked at 0, 4 and 8 s; the next ask Retry-After allows (12 s) is past the bound.
    assert raised.value.code == "approval_pending"
    assert sleeper.waits == [4.0, 4.0]
    assert control_plane.count(f"/v1/plans/{PLAN_ID}/token") == 3
    status = guard.status()
    assert status.state == "awaiting_approval"
    assert status.plan_id == PLAN_ID
    assert status.blocked == "approval_pending"
    assert status.review == tuple(REVIEW)

    # A person approves meanwhile; declaring the same plan again picks the decision up
    # without storing a second plan.
    control_plane.token_replies[:] = [APPROVED]
    declared = guard.declare(plan_document())

    assert declared.plan_id == PLAN_ID
    assert control_plane.count("POST /v1/plans") - control_plane.count("POST /v1/plans/") == 1
    assert guard.status().state == "active"


def test_poll_approval_asks_once_without_waiting(make, sleeper):
    guard, control_plane, _ = make([pending(4)], approval_wait_seconds=0)

    with pytest.raises(ApprovalError) as raised:
        guard.declare(plan_document())
    assert raised.value.code == "approval_pending"
    assert control_plane.count("/token") == 0  # returned at once, asked nothing yet

    with pytest.raises(ApprovalError):
        guard.poll_approval()
    assert control_plane.count("/token") == 1

    control_plane.token_replies[:] = [APPROVED]
    assert guard.poll_approval().approved_by == APPROVER
    assert sleeper.waits == []
    with pytest.raises(GuardError) as nothing:
        guard.poll_approval()
    assert nothing.value.code == "no_plan"


def test_the_wait_honours_retry_after_within_a_floor_and_a_cap(make, sleeper):
    guard, _, _ = make([pending(0), pending(0.2), pending(500), pending(7), APPROVED])

    guard.declare(plan_document())

    assert sleeper.waits == [MIN_POLL_DELAY, MIN_POLL_DELAY, MAX_POLL_DELAY, 7.0]


def test_without_retry_after_the_wait_backs_off_to_the_cap(make, sleeper):
    guard, _, _ = make([pending(None)] * 6 + [APPROVED])

    guard.declare(plan_document())

    assert sleeper.waits == [DEFAULT_POLL_DELAY, 4.0, 8.0, 16.0, MAX_POLL_DELAY, MAX_POLL_DELAY]


def test_a_throttled_or_failing_control_plane_is_asked_again_within_the_bound(make, sleeper):
    throttled: Reply = (429, {"code": "throttled", "detail": "slow down"}, {"Retry-After": "9"})
    failing: Reply = (503, {"code": "database_unavailable", "detail": "down"}, {})
    guard, _, _ = make([throttled, failing, APPROVED])

    assert guard.declare(plan_document()).plan_id == PLAN_ID
    assert sleeper.waits == [9.0, 18.0]


def test_another_refusal_ends_the_wait_with_its_code(make):
    gone: Reply = (410, {"code": "plan_revoked", "detail": "revoked by an admin"}, {})
    guard, _, _ = make([pending(1), gone])

    with pytest.raises(GuardError) as raised:
        guard.declare(plan_document())

    assert raised.value.code == "plan_revoked"
    assert guard.status().state == "no_plan"


def test_closing_the_guard_cuts_a_wait_short(clock):
    control_plane = FakeControlPlane(clock, [pending(30)])
    shown: list[dict[str, Any]] = []
    guard = Guard(
        URL,
        "pg_test",
        transport=control_plane.transport(),
        clock=clock,
        auto_refresh=False,
        report=False,
        acp_sink=shown.append,
    )  # the default sleeper: a wait that close() ends
    outcome: list[BaseException] = []

    def declare() -> None:
        try:
            guard.declare(plan_document())
        except BaseException as error:
            outcome.append(error)

    waiter = threading.Thread(target=declare)
    waiter.start()
    assert wait_until(lambda: control_plane.count("/token") == 1)
    guard.close()
    waiter.join(20)

    assert not waiter.is_alive()
    assert isinstance(outcome[0], GuardError)
    assert outcome[0].code == "guard_closed"
    # The plan left the user's view once.
    updates = [message["params"]["update"]["sessionUpdate"] for message in shown]
    assert updates == ["plan_update", "plan_update", "plan_removed"]


# --- ACP -----------------------------------------------------------------------------------


def test_acp_shows_every_step_awaiting_approval_then_pending_valid_against_the_schema(make):
    guard, _, shown = make([pending(1), pending(1), APPROVED])

    guard.declare(plan_document())

    assert [statuses(message) for message in shown] == [
        [acp.AWAITING_APPROVAL, acp.AWAITING_APPROVAL],
        [acp.PENDING, acp.PENDING],
    ]
    assert {message["params"]["update"]["plan"]["planId"] for message in shown} == {PLAN_ID}
    for message in shown:
        assert_valid_v2(message["params"])


def test_acp_v1_shows_awaiting_steps_as_pending_with_a_note_valid_against_the_schema(make):
    guard, _, shown = make([pending(1), APPROVED], acp_plan_updates=False)

    guard.declare(plan_document())

    waiting, approved = shown
    for entry in waiting["params"]["update"]["entries"]:
        assert entry["status"] == acp.PENDING
        assert entry["content"].startswith("[awaiting approval] ")
        assert entry["_meta"]["plangate"]["status"] == acp.AWAITING_APPROVAL
    assert statuses(approved) == [acp.PENDING, acp.PENDING]
    for message in shown:
        assert_valid_v1(message["params"])


def test_the_status_lists_steps_awaiting_approval(make):
    guard, _, _ = make([pending(1)], approval_wait_seconds=0)

    with pytest.raises(ApprovalError):
        guard.declare(plan_document())

    assert [step.status for step in guard.status().steps] == [acp.AWAITING_APPROVAL] * 2


# --- no tool runs while the plan waits ------------------------------------------------------


def test_calls_are_blocked_as_approval_pending_and_logged_while_the_plan_waits(make, clock):
    guard, control_plane, _ = make(
        [pending(1)],
        approval_wait_seconds=0,
        report=True,
        report_interval=0.01,
        auto_refresh=True,
        watch_status=True,
    )
    with pytest.raises(ApprovalError):
        guard.declare(plan_document())

    decision = guard.check("github_list_issues", {"repo": "acme/public-app"})
    assert decision.code is Decision.APPROVAL_PENDING
    assert not decision.allowed
    ran: list[str] = []
    with pytest.raises(CallBlocked) as blocked:
        guard.call("github_get_issue", {"repo": "acme/public-app"}, lambda repo: ran.append(repo))
    assert blocked.value.code == "approval_pending"
    assert ran == []

    # Logged against the plan the control plane stored, like any blocked call.
    assert guard.flush(20)
    logged = [
        event["decision"] for batch in control_plane.events for event in batch.get("events", [])
    ]
    assert logged == ["approval_pending", "approval_pending"]
    # No refresh and no status poll before a token exists.
    assert control_plane.count("/refresh") == 0
    assert control_plane.count("/status") == 0
    # A later declaration of the same plan picks up the approval: the calls run.
    control_plane.token_replies[:] = [APPROVED]
    guard.declare(plan_document())
    assert guard.check("github_list_issues", {"repo": "acme/public-app"}).allowed


# --- the approval is verified ----------------------------------------------------------------


def test_an_approved_token_without_apr_is_refused(make):
    guard, control_plane, shown = make([APPROVED])
    control_plane.edit_claims = lambda claims: claims.pop("apr")

    with pytest.raises(GuardError) as raised:
        guard.declare(plan_document())

    assert raised.value.code == "token_invalid"
    assert "apr" in raised.value.message
    assert guard.status().state == "no_plan"
    assert statuses(shown[-2]) == [acp.CANCELLED, acp.CANCELLED]


def test_an_approval_for_another_plan_hash_is_refused(make):
    guard, control_plane, _ = make([APPROVED])
    other = plan_hash(validate_plan(plan_document(goal="Delete every repository")))
    control_plane.edit_claims = lambda claims: claims["apr"].update(ph=other)

    with pytest.raises(GuardError) as raised:
        guard.declare(plan_document())

    assert raised.value.code == "token_invalid"
    assert guard.check("github_list_issues", {"repo": "acme/public-app"}).code is Decision.NO_PLAN


def test_a_token_for_another_plan_is_refused_as_swapped(make):
    guard, control_plane, _ = make([APPROVED])
    other = validate_plan(plan_document(goal="Delete every repository"))

    def swap(claims: dict[str, Any]) -> None:
        claims["plan"] = other
        claims["ph"] = claims["apr"]["ph"] = plan_hash(other)

    control_plane.edit_claims = swap

    with pytest.raises(GuardError) as raised:
        guard.declare(plan_document())

    assert raised.value.code == "plan_swapped"


def test_declaring_another_plan_abandons_the_one_awaiting_approval(make, clock):
    guard, control_plane, shown = make([pending(1)], approval_wait_seconds=0)
    with pytest.raises(ApprovalError):
        guard.declare(plan_document())

    with pytest.raises(ApprovalError):
        guard.declare(plan_document(goal="Another goal"))

    # Two plans stored; the first one's steps were shown cancelled, then removed.
    assert control_plane.count("POST /v1/plans") - control_plane.count("POST /v1/plans/") == 2
    assert [message["params"]["update"]["sessionUpdate"] for message in shown] == [
        "plan_update",
        "plan_update",
        "plan_removed",
        "plan_update",
    ]
