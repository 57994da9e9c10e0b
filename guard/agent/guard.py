# Over 400 lines on purpose: the Guard facade, whose methods are the public API.
"""The agent-side guard: declare a plan, then decide every tool call locally.

    from guard import Guard

    with Guard("http://localhost:8000", api_key) as guard:
        guard.declare(plan)                      # or: guard.handle_declare_plan(model_args)
        decision = guard.check("github_get_issue", {"repo": "acme/app", "number": 7})
        issue = guard.call("github_get_issue", {"repo": "acme/app", "number": 7}, get_issue)

A `Guard` is one agent session (one conversation with one model context). It is thread-safe:
any number of threads may call `check` / `call` at once. Only `declare` (which may wait
for a person's approval, up to `approval_wait_seconds`), `poll_approval`, and `refresh` /
`refresh_if_due` when the application calls them touch the network on the caller's thread;
a tool call never does: refreshing, fetching keys and reporting decisions happen in
background threads.

This module is the facade and the hot path (`check`); the rest of the session lives next
to it: the plan's state and decisions (`session`), the token refresher (`refresher`), the
ACP display (`display`), the status (`status`), the decision log (`reporter`), the wait
for a person's approval (`approval`) and the control plane's HTTP client (`http`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import httpx

from guard.agent import acp
from guard.agent.answer import AnswerVerifier
from guard.agent.approval import (
    DEFAULT_APPROVAL_WAIT,
    AwaitingPlan,
    approval_url,
    review_items,
    wait_for_approval,
)
from guard.agent.decider import Decider
from guard.agent.declaring import DEFAULT_DECLARE_WAIT, DeclarationsInFlight
from guard.agent.delegation import (
    DELEGATED_PLAN,
    Delegation,
    Reservation,
    child_token_check,
    reservation_read,
)
from guard.agent.display import PlanDisplay
from guard.agent.errors import (
    APPROVAL_PENDING,
    CONTROL_PLANE_UNAVAILABLE,
    DECLARE_AFTER_OUTPUT,
    GUARD_CLOSED,
    INVALID_PLAN,
    PLAN_SWAPPED,
    TOKEN_INVALID,
    CallBlocked,
    GuardError,
)
from guard.agent.http import (
    ControlPlaneClient,
    ControlPlaneError,
    ControlPlaneUnavailable,
    JwksCache,
)
from guard.agent.refresher import Refresher
from guard.agent.reporter import DEFAULT_RETRY_MAX_DELAY, DecisionReporter, ReporterStats
from guard.agent.session import NO_PLAN, CallDecision, PlanState
from guard.agent.status import DeclaredPlan, GuardStatus, awaiting_status, session_status
from guard.agent.status_list import StatusListReader
from guard.agent.status_watch import StatusWatcher
from guard.agent.tools import declare_plan_result
from guard.agent.verified import VerifiedToken
from guard.decisions import Decision, PlanOutcome
from guard.dpop import DpopKey
from guard.errors import DocumentInvalid, FieldError
from guard.plan import plan_hash, validate_plan
from guard.tokens import GUARD_CLOCK_SKEW_SECONDS
from guard.tracing import decision_tracer, now_ns, record_decision

__all__ = ["Guard"]

F = TypeVar("F", bound=Callable[..., Any])
_PLAN_ID = re.compile(r"[0-9A-Za-z]{26}")
# The plans whose tokens the decision log may still need: the current one and a few ended.
_PLANS_KEPT = 8


def _field_errors(errors: list[FieldError]) -> list[dict[str, Any]]:
    return [{"path": error.path, "detail": error.detail} for error in errors]


class Guard:
    """Holds one session's plan and intent token and decides every tool call locally.

    Arguments:
        url: the control plane, e.g. ``http://localhost:8000``.
        api_key: the agent's API key (``pg_...``).
        issuer: the ``iss`` the tokens must carry (the server's ``PLANGATE_ISSUER``);
            defaults to `url`.
        acp_sink: called with each ACP ``session/update`` notification (a JSON-RPC dict)
            showing the plan's progress; may be called from the guard's background threads.
        session_id: the ACP session id put in those notifications (default: a random one).
        acp_plan_updates: True when the ACP client advertised plan support (v2
            ``plan_update`` / ``plan_removed``); False falls back to the stable v1 ``plan``.
        clock: seconds since the epoch (default `time.time`); tests pass a controllable one.
        http_client / transport: an ``httpx.Client`` to use, or an httpx transport for the
            guard's own client.
        ttl: token lifetime to ask for (seconds), else the server's default.
        refresh_margin: refresh this many seconds before expiry (default: a fifth of the
            token's lifetime, at most 120 s).
        auto_refresh: refresh in a background thread (else only `refresh` and
            `refresh_if_due` refresh, when the application calls them; a call never does).
        watch_status: poll the control plane's status feed in a background thread, so
            that a revoked plan, a disabled member or agent, a revoked API key or signing
            key stops the calls within the team's bound (default: as `auto_refresh`; else
            only `poll_status` polls).
        status_list: read the team's token status list instead of the per-plan feed when
            the token names one (``status``) and the control plane serves it; one copy per
            list is shared by the process's guards (guard.agent.status_list). False: the
            per-plan feed only.
        report: post decisions to ``POST /v1/plans/{id}/events`` from a background thread,
            exactly once while the queue holds (see guard.agent.reporter).
        report_display_updates: also attach the ACP updates sent to `acp_sink`.
        report_queue_size: decisions and display updates that may wait for the control
            plane (default: the ``PLANGATE_GUARD_QUEUE_SIZE`` environment variable, else
            10,000); beyond it new decisions are dropped, counted, and reported as lost.
        report_retry_max_delay: the longest back-off between two attempts to deliver a batch
            while the control plane is unreachable (seconds).
        approval_wait_seconds: how long `declare` waits for a person to decide on a plan a
            policy's ``review`` rule sent to one (default 300 s; 0 returns at once with
            ``approval_pending``). Meanwhile every call gets ``approval_pending``.
        approval_sleep: waits that many seconds between two asks for the decision
            (default: a wait that `close` cuts short); tests pass one that records.
        bind_token: hold an Ed25519 key pair for this guard and bind the plans it declares
            to it (DPoP, RFC 9449: tokens carry ``cnf.jkt``; refresh, the status feed and
            decision batches then carry a proof by the key, so a copied token and API key
            are refused elsewhere). Default True; False sends no proofs and binds nothing
            (a team with ``require_token_binding`` then refuses the declaration).
        dpop_key: the key to bind with instead of a new one (`guard.dpop.DpopKey.load`):
            a sub-agent handed a child plan bound to a key it made beforehand.
        declare_wait_seconds: how long a call waits for a declaration in flight on this
            session before it is decided (default 30 s): a call the model sent in the same
            turn as ``declare_plan`` is decided under the new plan, not blocked as
            ``no_plan`` (guard.agent.declaring). 0 decides at once.
    """

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        issuer: str | None = None,
        acp_sink: Callable[[dict[str, Any]], object] | None = None,
        session_id: str | None = None,
        acp_plan_updates: bool = True,
        clock: Callable[[], float] | None = None,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 10.0,
        ttl: int | None = None,
        refresh_margin: float | None = None,
        auto_refresh: bool = True,
        watch_status: bool | None = None,
        status_list: bool = True,
        report: bool = True,
        report_display_updates: bool = True,
        report_interval: float = 1.0,
        report_batch_size: int = 200,
        report_queue_size: int | None = None,
        report_retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY,
        jwks_min_refetch_interval: float = 30.0,
        clock_skew: int = GUARD_CLOCK_SKEW_SECONDS,
        approval_wait_seconds: float = DEFAULT_APPROVAL_WAIT,
        approval_sleep: Callable[[float], object] | None = None,
        bind_token: bool = True,
        dpop_key: DpopKey | None = None,
        declare_wait_seconds: float = DEFAULT_DECLARE_WAIT,
    ) -> None:
        self.url = url.rstrip("/")
        self.issuer = issuer if issuer is not None else self.url
        self._clock = clock or time.time
        # One key pair per guard, never written anywhere unless its owner gave one
        # (docs/decisions/0069).
        if dpop_key is not None and not bind_token:
            raise ValueError("a dpop_key binds tokens: it needs bind_token=True")
        self._dpop_key = (dpop_key or DpopKey.generate()) if bind_token else None
        self._control_plane = ControlPlaneClient(
            self.url,
            api_key,
            http_client=http_client,
            transport=transport,
            timeout=timeout,
            dpop_key=self._dpop_key,
            dpop_url=self.issuer if self.issuer.startswith(("https://", "http://")) else None,
        )
        self._jwks = JwksCache(
            self._control_plane.jwks,
            clock=self._clock,
            min_refetch_interval=jwks_min_refetch_interval,
        )
        self._ttl = ttl
        self._auto_refresh = auto_refresh
        self._accept = AnswerVerifier(
            jwks=self._jwks,
            issuer=self.issuer,
            clock=self._clock,
            clock_skew=clock_skew,
            refresh_margin=refresh_margin,
            jkt=self._dpop_key.jkt if self._dpop_key is not None else None,
        )
        # The reporter's wiring: decisions are recorded on the call's thread (`check`), the
        # display updates shown by `_display`, both posted by the reporter's thread.
        self._reporter = (
            DecisionReporter(
                self._control_plane.post_events,
                max_queue=report_queue_size,
                batch_size=report_batch_size,
                interval=report_interval,
                retry_max_delay=report_retry_max_delay,
                token_for=self._plan_token,
            )
            if report
            else None
        )
        # The plans of this session by id (the newest few), whose newest token the decision
        # log falls back on once the API key is refused (guard.agent.reporter).
        self._plans_by_id: OrderedDict[str, PlanState] = OrderedDict()
        self._lock = threading.Lock()  # budgets, statuses, the output flag, the plan slot
        self._declare_lock = threading.Lock()
        self._in_flight = DeclarationsInFlight(declare_wait_seconds)
        self._display = PlanDisplay(
            session_id=session_id or f"plangate-{uuid.uuid4().hex}",
            sink=acp_sink,
            plan_updates=acp_plan_updates,
            reporter=self._reporter,
            report_updates=report_display_updates,
            lock=self._lock,
            clock=self._clock,
        )
        wake_refresher = threading.Event()  # set by a call that finds a refresh due
        self._decider = Decider(
            lock=self._lock,
            publish=self._display.publish,
            wake_refresher=wake_refresher.set,
            auto_refresh=auto_refresh,
        )
        self._refresher = Refresher(
            control_plane=self._control_plane,
            jwks=self._jwks,
            clock=self._clock,
            ttl=ttl,
            accept=self._accept,
            current_plan=lambda: self._plan,
            block=self._decider.block,
            wake=wake_refresher,
        )
        self._watch_status = auto_refresh if watch_status is None else watch_status
        self._status_watcher = StatusWatcher(
            control_plane=self._control_plane,
            current_plan=lambda: self._plan,
            block=self._decider.block,
            withdraw_token=self._refresher.withdraw,
            status_lists=StatusListReader(
                base_url=self.url,
                issuer=self.issuer,
                http=self._control_plane._http,
                keys_for=self._jwks.keys_for,
                wall=self._clock,
            )
            if status_list
            else None,
        )
        self._decide = self._decider.decide  # bound once: `check` is the hot path
        self._plan: PlanState | None = None
        # A plan the control plane stored for a person to approve: no token, no plan yet.
        self._awaiting: AwaitingPlan | None = None
        self._approval_wait = max(0.0, approval_wait_seconds)
        self._closing = threading.Event()
        self._approval_sleep = approval_sleep or self._closing.wait
        self._closed = False
        # The session runs a plan delegated to it (`adopt`): it declares none of its own.
        self._delegated = False

    @property
    def dpop_jkt(self) -> str | None:
        """The RFC 7638 thumbprint of this guard's DPoP key (None with ``bind_token=False``):
        what a delegating agent names (`delegate(jkt=)`) to bind a child plan to this guard."""
        return self._dpop_key.jkt if self._dpop_key is not None else None

    @property
    def session_id(self) -> str:
        """The ACP session id put in the notifications."""
        return self._display.session_id

    @session_id.setter
    def session_id(self, value: str) -> None:
        self._display.session_id = value

    # --- declaring --------------------------------------------------------------------

    def declare(self, plan: object, *, approval_wait_seconds: float | None = None) -> DeclaredPlan:
        """Declare `plan` (a plan document) and hold its verified intent token.

        A plan a policy's ``review`` rule sends to a person is stored by the control plane
        without a token: the guard shows its steps as ``_awaiting_approval`` and waits for
        the decision up to `approval_wait_seconds` (this call's, else the guard's: 0 returns
        at once with ``approval_pending``, for a framework that pauses its run in its own
        way while the person decides); every call meanwhile gets
        ``approval_pending``. Declaring the same plan again while it waits picks the wait up
        again (as `poll_approval` does) rather than asking anew.

        Raises GuardError: ``invalid_plan`` (with `errors`), ``declare_after_output`` (a
        guarded tool already returned output in this session), ``token_invalid`` or
        ``plan_swapped`` (the answer does not carry the plan sent, validly signed; the token
        of an approved plan must carry its approval, ``apr``),
        ``control_plane_unavailable``, or the control plane's refusal code
        (``policy_denied``, ``unknown_user``, ``user_disabled``...); ApprovalError
        ``approval_pending``, ``approval_denied`` (with the approver's reason) or
        ``approval_expired``.
        """
        wait = self._approval_wait if approval_wait_seconds is None else approval_wait_seconds
        with self._in_flight.declaring():
            return self._declare(plan, max(0.0, wait))

    def _declare(self, plan: object, approval_wait: float) -> DeclaredPlan:
        if self._closed:
            raise GuardError(GUARD_CLOSED, "the guard is closed")
        if self._delegated:
            raise GuardError(
                DELEGATED_PLAN,
                "this session runs a plan delegated to it by another agent; it cannot declare"
                " one of its own: ask the delegating agent, or start a new session",
            )
        self._refuse_after_output()  # first: no plan, valid or not, is taken after output
        try:
            document = validate_plan(plan)
        except DocumentInvalid as error:
            raise GuardError(
                INVALID_PLAN, "the plan is invalid", errors=_field_errors(error.errors)
            ) from error
        document_hash = plan_hash(document)
        with self._declare_lock:
            self._refuse_after_output()
            awaiting = self._awaiting
            if awaiting is None or awaiting.hash != document_hash:
                try:
                    body = self._control_plane.declare(document, ttl=self._ttl)
                except ControlPlaneError as error:
                    raise GuardError(
                        error.code, self._proof_hint(error), errors=error.errors
                    ) from error
                except ControlPlaneUnavailable as error:
                    raise GuardError(CONTROL_PLANE_UNAVAILABLE, str(error)) from error
                if body.get("status") != "pending_approval":
                    return self._install(body, document, document_hash, None)
                awaiting = self._start_awaiting(body, document, document_hash)
                # Just stored: with no wait allowed, there is nothing to ask yet.
                return self._await_decision(awaiting, approval_wait, ask=approval_wait > 0)
            return self._await_decision(awaiting, approval_wait)

    def poll_approval(self, wait_seconds: float = 0.0) -> DeclaredPlan:
        """Ask again about the plan awaiting approval (waiting up to `wait_seconds`): the
        declared plan once approved; else raises as `declare` does (``approval_pending``
        while it still waits), or GuardError ``no_plan`` when no plan awaits approval."""
        with self._declare_lock:
            awaiting = self._awaiting
            if awaiting is None:
                raise GuardError(Decision.NO_PLAN.value, "no plan awaits approval")
            return self._await_decision(awaiting, wait_seconds)

    def _start_awaiting(
        self, body: Mapping[str, Any], document: dict[str, Any], document_hash: str
    ) -> AwaitingPlan:
        """The control plane stored the plan for a person to approve (202): it replaces the
        session's plan, shows every step awaiting approval, and blocks every call."""
        plan_id = body.get("id")
        # The id goes into the token's URL: only a ULID is taken from the answer.
        if not isinstance(plan_id, str) or not _PLAN_ID.fullmatch(plan_id):
            raise GuardError(TOKEN_INVALID, "the answer carries no valid plan id")
        awaiting = AwaitingPlan(
            plan_id, document, document_hash, review_items(body), approval_url(body)
        )
        with self._lock:
            self._refuse_after_output()
            previous, self._plan = self._plan, None
            abandoned, self._awaiting = self._awaiting, awaiting
        if previous is not None:
            self._end(previous)
        if abandoned is not None:
            self._drop_awaiting(abandoned)
        self._display.publish(awaiting)
        self._in_flight.notify()  # the calls waiting for it are `approval_pending` now
        return awaiting

    def _await_decision(
        self, awaiting: AwaitingPlan, wait_seconds: float, *, ask: bool = True
    ) -> DeclaredPlan:
        """Wait for the person's decision on `awaiting`; install its token once approved.
        Denied or expired: the plan leaves the session (its steps show as cancelled)."""
        try:
            body = wait_for_approval(
                awaiting,
                fetch=self._control_plane.approval_token,
                wait_seconds=wait_seconds,
                clock=self._clock,
                sleep=self._approval_sleep,
                closed=lambda: self._closed,
                ask=ask,
            )
        except GuardError as error:
            # Denied, expired, revoked, gone: the plan will not run. Still pending: it stays.
            if error.code != APPROVAL_PENDING:
                self._drop_awaiting(awaiting)
            raise
        return self._install(body, awaiting.document, awaiting.hash, awaiting)

    def _drop_awaiting(self, awaiting: AwaitingPlan) -> None:
        """The plan will not be approved here: its steps show as cancelled, then removed."""
        with self._lock:
            if self._awaiting is awaiting:
                self._awaiting = None
            if awaiting.dropped:
                return
            awaiting.dropped = True
            awaiting.statuses[:] = [acp.CANCELLED] * len(awaiting.statuses)
        self._display.publish(awaiting)
        if self._display.plan_updates:
            self._display.publish(awaiting, removed=True)

    def _install(
        self,
        body: Mapping[str, Any],
        document: dict[str, Any],
        document_hash: str,
        awaiting: AwaitingPlan | None,
        check: Callable[[VerifiedToken], None] | None = None,
    ) -> DeclaredPlan:
        """Verify the answer's token for exactly `document` (and, for a plan that awaited
        approval, its approval; for a delegated plan, `check`), then make it the session's
        plan."""
        try:
            plan_id, token = self._accept(
                body,
                document,
                document_hash,
                expected_id=awaiting.id if awaiting is not None else None,
                approved=awaiting is not None,
            )
            if check is not None:
                check(token)
        except GuardError as error:
            self._report_unaccepted(body, error)
            if awaiting is not None:
                self._drop_awaiting(awaiting)
            raise
        state = PlanState(
            plan_id, document, document_hash, token, bool(body.get("reportArguments"))
        )
        with self._lock:
            self._plans_by_id[plan_id] = state
            self._plans_by_id.move_to_end(plan_id)
            while len(self._plans_by_id) > _PLANS_KEPT:
                self._plans_by_id.popitem(last=False)
            # A call may have been allowed while the request was out.
            self._refuse_after_output()
            previous, self._plan = self._plan, state
            if awaiting is not None and self._awaiting is awaiting:
                self._awaiting = None
        if previous is not None:
            self._end(previous)
        self._display.publish(state)
        if self._auto_refresh:
            self._refresher.start()
        self._refresher.wake()
        if self._watch_status:
            self._status_watcher.start()
            self._status_watcher.wake()
        policy = body.get("policy")
        return DeclaredPlan(
            plan_id=plan_id,
            plan_hash=document_hash,
            plan=document,
            expires_at=token.expires_at,
            policy=policy if isinstance(policy, dict) else {},
            report_arguments=state.report_arguments,
            approved_by=token.claims.apr.by if token.claims.apr is not None else None,
        )

    # --- delegating (guard.agent.delegation) -------------------------------------------

    def delegate(
        self,
        plan: object,
        to: str | None = None,
        ttl: int | None = None,
        *,
        jkt: str | None = None,
    ) -> Delegation:
        """Delegate `plan` (a child plan document, every step inside a step of the current
        plan) to the agent `to` (its id; default this guard's own agent), for `ttl` seconds
        at most (never past the current plan). Returns the `Delegation` to hand to the
        sub-agent (no API key in it: the sub-agent uses its own agent's). `jkt`, the
        receiving guard's `dpop_jkt`, binds the child's tokens to that guard's key (a team
        that binds every token requires it); without it the child is not bound.

        The child's token is verified as a declaration's, and must name this plan as its
        ``parent`` and carry an ``act`` chain. What the child reserved is counted here as
        spent (`GuardStatus` steps show it as ``delegated``). While the request is out, the
        steps of the child's tools (and their budgets) take no call of this guard's own,
        and the decisions already allowed are delivered first, so that the control plane
        reserves only what this guard has not used: the plan and its children together
        never exceed it.

        Raises GuardError ``no_plan``, ``invalid_plan``, the plan's stop code (revoked,
        ended...), ``control_plane_unavailable`` (also when the decision log could not be
        delivered first), ``token_invalid`` / ``plan_swapped`` (the child was made but its
        answer is not trusted: what it reserved is still counted here, as the control
        plane keeps it), or the control plane's refusal with its paths:
        ``delegation_widens``, ``budget_unavailable``, ``delegation_refused``,
        ``policy_denied``...
        """
        if self._closed:
            raise GuardError(GUARD_CLOSED, "the guard is closed")
        try:
            document = validate_plan(plan)
        except DocumentInvalid as error:
            raise GuardError(
                INVALID_PLAN, "the child plan is invalid", errors=_field_errors(error.errors)
            ) from error
        document_hash = plan_hash(document)
        parent = self._plan
        if parent is None:
            raise GuardError(Decision.NO_PLAN.value, "no plan to delegate from: declare one")
        stopped = parent.stopped
        if stopped is not None:
            raise GuardError(stopped.code.value, stopped.reason)
        with self._declare_lock:
            with self._lock:
                held = parent.hold({step["tool"] for step in document["steps"]})
            # What the control plane took once it answered 201, counted even when the
            # answer is then refused here: the reservation is never given back there.
            taken: Reservation | None = None
            try:
                if self._reporter is not None and not self._reporter.flush(10.0):
                    raise GuardError(
                        CONTROL_PLANE_UNAVAILABLE,
                        "the calls already allowed could not be reported before delegating",
                    )
                try:
                    body = self._control_plane.delegate(
                        parent.id, document, agent=to, ttl=ttl, jkt=jkt
                    )
                except ControlPlaneError as error:
                    raise GuardError(error.code, error.detail, errors=error.errors) from error
                except ControlPlaneUnavailable as error:
                    raise GuardError(CONTROL_PLANE_UNAVAILABLE, str(error)) from error
                taken = reservation_read(body.get("reserved"), parent.compiled)
                plan_id, token = self._accept(body, document, document_hash, bound_to=jkt)
                child_token_check(
                    token,
                    parent_id=parent.id,
                    parent_plan_hash=parent.hash,
                    agent=to if to is not None else parent.token.claims.agent,
                )
                chain = parent.token.claims.act or {"sub": parent.token.claims.agent}
                if token.claims.act is None or token.claims.act.get("act") != chain:
                    raise GuardError(PLAN_SWAPPED, "the child token's act chain is not this plan's")
            finally:
                with self._lock:
                    parent.release(held)
                    if taken is not None:
                        parent.reserve(taken.calls, taken.budgets)
        self._display.publish(parent)
        return Delegation(
            plan_id=plan_id,
            token=token.token,
            plan=document,
            plan_hash=document_hash,
            expires_at=token.expires_at,
            parent_id=parent.id,
            parent_plan_hash=parent.hash,
            agent=token.claims.agent,
            url=self.url,
            issuer=self.issuer,
            reserved=dict(body["reserved"]),
            report_arguments=bool(body.get("reportArguments")),
            jkt=jkt,
        )

    def _proof_hint(self, error: ControlPlaneError) -> str:
        """A declaration's refusal, with what to configure when its DPoP proof named the
        control plane by another URL than the server's: proofs name it by the issuer."""
        if error.code != "invalid_dpop_proof" or "the proof is for" not in error.detail:
            return error.detail
        return (
            f"{error.detail}; the guard names the control plane by its issuer"
            f" {self.issuer!r}: give it the server's issuer (plangate-mcp: --issuer; the"
            " examples: PLANGATE_ISSUER), or bind_token=False"
        )

    def adopt(self, delegation: Delegation) -> DeclaredPlan:
        """Run the child plan `delegation` in this session (a sub-agent's guard, holding
        the receiving agent's API key): its token is verified as a declaration's, and must
        name the delegation's parent and agent; then calls are decided offline, the token
        refreshed (``POST /v1/plans/{child}/refresh``, refused once the parent stopped),
        the status watched and decisions reported like any plan's. From then on the session
        declares no plan of its own (``delegated_plan``) until `new_session`.

        Raises GuardError as `declare` does (``invalid_plan``, ``declare_after_output``,
        ``token_invalid``, ``plan_swapped``, ``control_plane_unavailable``).
        """
        if self._closed:
            raise GuardError(GUARD_CLOSED, "the guard is closed")
        if delegation.jkt is not None and delegation.jkt != self.dpop_jkt:
            raise GuardError(
                TOKEN_INVALID,
                "the delegation is bound to another guard's key (jkt): delegate with this"
                " guard's dpop_jkt",
            )
        self._refuse_after_output()
        try:
            document = validate_plan(delegation.plan)
        except DocumentInvalid as error:
            raise GuardError(
                INVALID_PLAN, "the delegated plan is invalid", errors=_field_errors(error.errors)
            ) from error
        document_hash = plan_hash(document)
        check = functools.partial(
            child_token_check,
            parent_id=delegation.parent_id,
            parent_plan_hash=delegation.parent_plan_hash,
            agent=delegation.agent,
        )
        with self._declare_lock:
            declared = self._install(delegation.answer(), document, document_hash, None, check)
            self._delegated = True
        return declared

    @classmethod
    def from_delegation(cls, delegation: Delegation, api_key: str, **options: Any) -> Guard:
        """A sub-agent's guard running `delegation`: the control plane and issuer it names,
        `api_key` of the receiving agent, `options` as `Guard`'s (see `adopt`)."""
        options.setdefault("issuer", delegation.issuer)
        guard = cls(delegation.url, api_key, **options)
        try:
            guard.adopt(delegation)
        except BaseException:
            guard.close()
            raise
        return guard

    def _plan_token(self, plan_id: str) -> str | None:
        """The newest intent token held for plan `plan_id` (refreshes replace it), or None."""
        state = self._plans_by_id.get(plan_id)
        return state.token.token if state is not None else None

    def _report_unaccepted(self, body: Mapping[str, Any], error: GuardError) -> None:
        """Tell the control plane that the plan it issued will not run here: the token was
        refused (``token_refused``), or its keys could not be fetched to check it."""
        plan_id = body.get("id")
        # Only a plan id (a ULID) goes into the events URL: the answer was not trusted.
        if (
            self._reporter is None
            or not isinstance(plan_id, str)
            or not _PLAN_ID.fullmatch(plan_id)
        ):
            return
        refused = error.code in (TOKEN_INVALID, PLAN_SWAPPED)
        self._reporter.end(
            plan_id,
            PlanOutcome.TOKEN_REFUSED if refused else PlanOutcome.ENDED,
            f"{error.code}: {error.message}",
        )

    def _refuse_after_output(self) -> None:
        if self._decider.tool_output_seen:
            raise GuardError(
                DECLARE_AFTER_OUTPUT,
                "a plan must be declared before any tool output is read: a guarded tool has"
                " already run in this session, so a new plan cannot be declared here; start"
                " a new session with a fresh context instead",
            )

    def declaring(self) -> AbstractContextManager[None]:
        """Mark a declaration in flight on this session for the duration of a ``with``
        block: calls meanwhile wait for it (up to ``declare_wait_seconds``) before they are
        decided. `declare` marks its own; an adapter marks one as soon as it sees the
        model's ``declare_plan`` call, before the calls of the same turn start."""
        return self._in_flight.declaring()

    @property
    def declaration_in_flight(self) -> bool:
        """Whether a declaration is in flight on this session."""
        return self._in_flight.busy

    def wait_for_declaration(self, timeout: float | None = None) -> bool:
        """Block while a declaration is in flight on this session, at most `timeout`
        seconds (default ``declare_wait_seconds``). True when none is in flight any more,
        or its plan now awaits a person's approval; False on the bound."""
        return self._in_flight.wait(self._awaiting_approval, timeout)

    def _awaiting_approval(self) -> bool:
        return self._awaiting is not None

    def handle_declare_plan(
        self, arguments: object, *, approval_wait_seconds: float | None = None
    ) -> dict[str, Any]:
        """Run the model's ``declare_plan`` tool call; returns the tool result to give back
        to the model (never raises for a refused plan: the result explains the refusal).

        `arguments` is the call's arguments: the plan object, or its JSON text as
        OpenAI-style APIs deliver it. `approval_wait_seconds` as for `declare`.
        """
        return declare_plan_result(
            functools.partial(self.declare, approval_wait_seconds=approval_wait_seconds),
            arguments,
        )

    # --- deciding ---------------------------------------------------------------------

    def check(self, tool: str, args: Mapping[str, Any], *, wait: bool = True) -> CallDecision:
        """Decide a call of `tool` with `args` (its arguments object), locally.

        An allowed decision reserves one call of the step's budget, and counts as the tool
        having run for the declare-before-output rule. Every decision is queued for the
        decision log. Never touches the network: with an expired token the call is
        ``token_expired`` at once and the background refresher does the refreshing.

        A call made while a declaration is in flight on this session (another thread is in
        `declare`, or `declaring` marks one) waits for it first, up to
        ``declare_wait_seconds``: the model's sibling of a ``declare_plan`` call is decided
        under the plan it declared. ``wait=False`` decides at once (an event loop, which
        waits with `wait_for_declaration` in a worker thread instead).
        """
        if wait and self._in_flight.count:
            self.wait_for_declaration()
        plan = self._plan
        if plan is None:
            return self._no_token(tool, args)
        now = self._clock()
        tracer = decision_tracer()  # None unless an OpenTelemetry SDK is installed
        if tracer is None:
            decision = self._decide(plan, tool, args, now)
        else:
            started = now_ns()
            decision = self._decide(plan, tool, args, now)
            record_decision(
                tracer,
                start_ns=started,
                tool=tool,
                decision=decision,
                plan_id=plan.id,
                policy_version=plan.token.policy_version,
            )
        reporter = self._reporter
        if reporter is not None:
            token = plan.token
            reporter.record(
                plan.id,
                now,
                tool,
                decision,
                dict(args) if type(args) is dict else args,
                plan.report_arguments,
                token.policy_version,
                token.shadow,
            )
        return decision

    def _no_token(self, tool: str, args: Mapping[str, Any]) -> CallDecision:
        """A call with no plan in force: ``approval_pending`` while a plan awaits a person's
        approval (recorded in its decision log: the control plane stored the plan), else
        ``no_plan``."""
        awaiting = self._awaiting
        if awaiting is None:
            return NO_PLAN
        decision = awaiting.blocked
        if self._reporter is not None:
            self._reporter.record(
                awaiting.id,
                self._clock(),
                tool,
                decision,
                dict(args) if type(args) is dict else args,
                False,  # the control plane says whether to keep arguments with the token
            )
        return decision

    def call(self, tool: str, args: Mapping[str, Any], fn: Callable[..., Any]) -> Any:
        """Check the call, run ``fn(**args)`` when allowed, record that it returned.

        Raises CallBlocked (with `.decision`) when the call is not allowed, and TypeError
        for a coroutine function, before deciding: its step would show completed before
        the coroutine ran (``await AsyncGuard.call(...)`` awaits it first). When `fn`
        raises, the exception propagates and the call is recorded as failed (`failed`): it
        does not count as its step having run.
        """
        if inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"Guard.call cannot run the coroutine function {fn.__name__!r}: use"
                " `await AsyncGuard.call(...)`, or decorate it with @guard.tool"
            )
        decision = self.check(tool, args)
        if not decision.allowed:
            raise CallBlocked(decision)
        try:
            result = fn(**args)
        except BaseException:
            self.failed(decision)
            raise
        if inspect.isawaitable(result):
            # A plain callable that handed back a coroutine: it has not run, so its step
            # is not completed (and a coroutine is closed, never to run).
            self.failed(decision)
            if inspect.iscoroutine(result):
                result.close()
            raise TypeError(
                f"the tool {tool!r} returned an awaitable: run it with"
                " `await AsyncGuard.call(...)` so that its step completes once it returned"
            )
        self.completed(decision)
        return result

    def tool(self, name: str | None = None) -> Callable[[F], F]:
        """Decorator: every call of the function is checked as tool `name` (default: the
        function's name) with its arguments by parameter name, then run and recorded.
        Raises CallBlocked when the call is not allowed.

        On an ``async def`` the decorated function is a coroutine function too: the call is
        checked when awaited, and its step completed only once the coroutine returned; when
        it raised, the call is recorded as failed (`failed`). An async generator is refused
        (TypeError): it has no single point at which it returned.
        """

        def decorate(fn: F) -> F:
            if inspect.isasyncgenfunction(fn):
                raise TypeError(
                    f"@guard.tool cannot guard the async generator {fn.__name__!r}: a step"
                    " is completed when its tool returns; guard the calls it makes instead"
                )
            tool_name = name or fn.__name__
            signature = inspect.signature(fn)

            def admit(
                args: tuple[Any, ...], kwargs: dict[str, Any], *, wait: bool = True
            ) -> CallDecision:
                arguments = dict(signature.bind(*args, **kwargs).arguments) if args else kwargs
                decision = self.check(tool_name, arguments, wait=wait)
                if not decision.allowed:
                    raise CallBlocked(decision)
                return decision

            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def guarded_coroutine(*args: Any, **kwargs: Any) -> Any:
                    if self._in_flight.busy:  # wait for it off the event loop
                        await asyncio.to_thread(self.wait_for_declaration)
                    decision = admit(args, kwargs, wait=False)
                    try:
                        result = await fn(*args, **kwargs)
                    except BaseException:
                        self.failed(decision)
                        raise
                    self.completed(decision)
                    return result

                return guarded_coroutine  # type: ignore[return-value]

            @functools.wraps(fn)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                decision = admit(args, kwargs)
                try:
                    result = fn(*args, **kwargs)
                except BaseException:
                    self.failed(decision)
                    raise
                self.completed(decision)
                return result

            return guarded  # type: ignore[return-value]

        return decorate

    def completed(self, decision: CallDecision) -> None:
        """Record that an allowed call has returned (`call` and `tool` do it for you): its
        step shows as completed to the user."""
        plan = self._plan
        step = decision.step
        if plan is None or not decision.allowed or step is None or step >= len(plan.statuses):
            return
        with self._lock:
            changed = plan.complete_step(step)
        if changed:
            self._display.publish(plan)

    def failed(self, decision: CallDecision) -> None:
        """Record that an allowed call did not return: its tool raised, or answered with an
        error (`call` and `tool` do it for you; the MCP gateway for a result with
        ``isError``). The call does not count as its step having run: a required step whose
        every call failed stays in `GuardStatus.required_pending`, and the plan ends
        ``ended``, not ``completed``. The step stays in progress while the plan lasts
        (another call may complete it)."""
        plan = self._plan
        step = decision.step
        if plan is None or not decision.allowed or step is None or step >= len(plan.statuses):
            return
        with self._lock:
            plan.fail_step(step)

    # --- refreshing (the work is the refresher's) ------------------------------------------

    def refresh(self) -> bool:
        """Refresh the token now (the same plan, re-signed with the current policy). True on
        success; on a refusal the plan is blocked with its code (see `status`)."""
        return self._refresher.refresh()

    def refresh_if_due(self) -> bool:
        """Refresh when the token is within its refresh margin (or a retry is due), or at
        once when the key set, refetched at its max-age, no longer holds the token's key.
        True when a fresh token was installed. The background refresher calls this."""
        return self._refresher.refresh_if_due()

    def poll_status(self) -> bool:
        """Ask the control plane's status feed about the plan now (the background watch
        does it every half of the team's bound). True when the answer stopped the plan:
        revoked, its member or agent disabled, its API key or signing key revoked."""
        return self._status_watcher.poll()

    # --- status and reporting -----------------------------------------------------------

    def status(self) -> GuardStatus:
        """Where the session stands: the plan, each step's calls and status, and which
        required steps have not run yet."""
        reporter = self._reporter.stats() if self._reporter is not None else None
        plan, awaiting = self._plan, self._awaiting
        if plan is None and awaiting is not None:
            return awaiting_status(awaiting, lock=self._lock, reporter=reporter)
        return session_status(plan, lock=self._lock, clock=self._clock, reporter=reporter)

    def report_display_update(self, message: Mapping[str, Any]) -> None:
        """Attach an ACP ``session/update`` (params) the agent showed its user to the
        decision log of the current plan."""
        plan = self._plan or self._awaiting
        if plan is not None and self._reporter is not None:
            self._reporter.display(plan.id, self._clock(), dict(message))

    def reporter_stats(self) -> ReporterStats | None:
        return self._reporter.stats() if self._reporter is not None else None

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until the queued decisions are posted (or dropped)."""
        return self._reporter.flush(timeout) if self._reporter is not None else True

    # --- ending -----------------------------------------------------------------------

    def end_plan(self) -> None:
        """End the current plan: steps still running show as completed, the plan is removed
        from the user's view, and later calls are ``no_plan`` until a new declaration."""
        with self._lock:
            plan, self._plan = self._plan, None
            awaiting = self._awaiting
        if plan is not None:
            self._end(plan)
        if awaiting is not None:
            self._drop_awaiting(awaiting)

    def _end(self, plan: PlanState) -> None:
        """End `plan` for the user and report how it ended: ``completed`` when every
        required step ran, else ``ended``, with the required steps that did not."""
        if not self._decider.end(plan, remove=self._display.plan_updates):
            return
        if self._reporter is not None:
            with self._lock:
                outcome, reason = plan.outcome(), plan.end_reason()
                stop = plan.blocked
            if stop is not None:
                # Stopped (revoked, disabled, a key refused): not completed, whatever ran.
                outcome, reason = PlanOutcome.ENDED, f"{stop.code.value}: {stop.reason}"
            self._reporter.end(plan.id, outcome, reason)

    def new_session(self, session_id: str | None = None) -> None:
        """End the plan and start a new session in which a plan may be declared again.

        Only for a fresh model context: the declare-before-output rule exists because tool
        output read in a context can steer the plan the model writes next.
        """
        self.end_plan()
        with self._lock:
            self._delegated = False
            self._decider.tool_output_seen = False
            self.session_id = session_id or f"plangate-{uuid.uuid4().hex}"

    def close(self, timeout: float | None = 10.0) -> None:
        """End the plan, flush the decision log and stop the background threads. Waits
        about `timeout` seconds at most for the control plane to take the last batches
        (what it could not take is counted as dropped in `reporter_stats`)."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()  # cuts a wait for approval short
        self.end_plan()
        self._status_watcher.stop(timeout)
        self._refresher.stop(timeout)
        if self._reporter is not None:
            self._reporter.close(timeout)
        self._control_plane.close()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
