"""The agent-side guard: declare a plan, then decide every tool call locally.

    from guard.client import Guard

    with Guard("http://localhost:8000", api_key) as guard:
        guard.declare(plan)                      # or: guard.handle_declare_plan(model_args)
        decision = guard.check("github_get_issue", {"repo": "acme/app", "number": 7})
        issue = guard.call("github_get_issue", {"repo": "acme/app", "number": 7}, get_issue)

A `Guard` is one agent session (one conversation with one model context). It is thread-safe:
any number of threads may call `check` / `call` at once. Only `declare` (and `refresh` /
`refresh_if_due` when the application calls them) touch the network on the caller's thread;
a tool call never does: refreshing, fetching keys and reporting decisions happen in
background threads.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import httpx

from guard import acp
from guard.canonical import canonical_json
from guard.constraints import compile_constraint, non_finite_argument
from guard.controlplane import (
    ControlPlaneClient,
    ControlPlaneError,
    ControlPlaneUnavailable,
    JwksCache,
)
from guard.decisions import Decision
from guard.errors import DocumentInvalid, FieldError, TokenInvalid
from guard.plan import CompiledPlan, plan_hash, validate_plan
from guard.policy import CompiledPolicy, validate_policy
from guard.reporter import DecisionReporter, ReporterStats
from guard.tokens import unverified_header, verify_token

__all__ = [
    "CallBlocked",
    "CallDecision",
    "DeclaredPlan",
    "Guard",
    "GuardError",
    "GuardStatus",
    "StepStatus",
]

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

# Codes of GuardError (exceptions of declare and refresh), next to the call decision codes
# of guard.decisions.Decision. A refusal by the control plane carries its own problem code.
DECLARE_AFTER_OUTPUT: Final = "declare_after_output"
INVALID_PLAN: Final = "invalid_plan"
TOKEN_INVALID: Final = "token_invalid"  # noqa: S105 - an error code
PLAN_SWAPPED: Final = "plan_swapped"
CONTROL_PLANE_UNAVAILABLE: Final = "control_plane_unavailable"
GUARD_CLOSED: Final = "guard_closed"

# A refresh refused with one of these problem codes ends the plan: every later call is
# blocked with the mapped decision code.
REFRESH_REFUSALS: Final = {
    "plan_revoked": Decision.PLAN_REVOKED,
    "plan_expired": Decision.PLAN_EXPIRED,
    "user_disabled": Decision.USER_DISABLED,
    "unknown_user": Decision.USER_DISABLED,  # the member left the team
    "agent_disabled": Decision.AGENT_DISABLED,
    "policy_denied": Decision.POLICY_DENIED,
}
MAX_REFRESH_MARGIN: Final = 120.0
MAX_RETRY_DELAY: Final = 60.0
# Once the token has expired (or its key was withdrawn) every call is blocked, so a failed
# refresh is retried this often, jittered so that many guards do not return in step.
EXPIRED_RETRY_DELAY: Final = (0.5, 1.0)
_REFRESHER_MAX_SLEEP: Final = 30.0
# Floor between two key-set checks of the refresher, whatever the server's max-age says.
_JWKS_CHECK_FLOOR: Final = 0.5


class GuardError(Exception):
    """Declaring or refreshing failed. `code` is stable (see the module constants, or the
    control plane's problem code); `errors` lists ``{"path", "detail"}`` when fields are at
    fault."""

    def __init__(
        self, code: str, message: str, *, errors: list[dict[str, Any]] | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.errors = errors or []
        super().__init__(f"{code}: {message}")


class CallBlocked(GuardError):
    """Raised by `Guard.call` and guarded functions when the decision is not ``allowed``."""

    def __init__(self, decision: CallDecision) -> None:
        self.decision = decision
        super().__init__(decision.code.value, decision.reason)


class CallDecision:
    """The guard's verdict on one call: a stable `code`, the `step` the call counts against
    (or, when blocked for budget or policy, the step it matched), the policy `rule` that
    decided (None for the default or when the policy was not consulted), and a `reason`
    for people and logs. Immutable; shared between calls where possible."""

    __slots__ = ("allowed", "code", "reason", "rule", "step")

    allowed: bool
    code: Decision
    reason: str
    step: int | None
    rule: int | None

    def __init__(
        self, code: Decision, reason: str, step: int | None = None, rule: int | None = None
    ) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "allowed", code is Decision.ALLOWED)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CallDecision is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CallDecision):
            return NotImplemented
        return (self.code, self.reason, self.step, self.rule) == (
            other.code,
            other.reason,
            other.step,
            other.rule,
        )

    def __hash__(self) -> int:
        return hash((self.code, self.reason, self.step, self.rule))

    def __repr__(self) -> str:
        return (
            f"CallDecision(code={self.code.value!r}, step={self.step!r}, rule={self.rule!r},"
            f" reason={self.reason!r})"
        )


@dataclass(frozen=True)
class DeclaredPlan:
    """What `declare` returns: the plan as the control plane signed it."""

    plan_id: str
    plan_hash: str
    plan: dict[str, Any]
    expires_at: float
    policy: dict[str, Any]
    report_arguments: bool


@dataclass(frozen=True)
class StepStatus:
    index: int
    tool: str
    description: str
    required: bool
    used: int
    max_calls: int
    status: str  # the ACP entry status: pending, in_progress, completed, cancelled


@dataclass(frozen=True)
class GuardStatus:
    """Where the session stands.

    `state` is ``no_plan``, ``active``, ``expired`` (the token lapsed and no refresh has
    succeeded yet), ``invalid`` (the token's signing key left the JWKS and no refresh has
    succeeded yet: calls get ``token_invalid``) or ``blocked`` (`blocked` then holds the
    decision code every call gets).
    `required_pending` lists the required steps that have not run yet; `complete` is true
    once every required step has run.
    """

    state: str
    plan_id: str | None = None
    blocked: str | None = None
    reason: str = ""
    expires_at: float | None = None
    policy_version: int | None = None
    steps: tuple[StepStatus, ...] = ()
    required_pending: tuple[int, ...] = ()
    complete: bool = False
    refresh_error: str | None = None
    reporter: ReporterStats | None = None


class _Token:
    """A verified token. `withdrawn` says why it can no longer be trusted (its signing key
    left the JWKS); `refresh_at` is then moved to -inf so that the one comparison on a
    call's path notices."""

    __slots__ = (
        "claims",
        "expires_at",
        "kid",
        "policy",
        "policy_version",
        "refresh_at",
        "token",
        "withdrawn",
    )

    def __init__(
        self,
        token: str,
        claims: dict[str, Any],
        policy: CompiledPolicy,
        expires_at: float,
        refresh_at: float,
        kid: str,
    ) -> None:
        self.token = token
        self.claims = claims
        self.policy = policy
        self.policy_version = claims.get("polv")
        self.expires_at = expires_at
        self.refresh_at = refresh_at
        self.kid = kid
        self.withdrawn: str | None = None


class _Plan:
    """One declared plan and its mutable state. Budgets and statuses change under the
    guard's lock; `token` and `blocked` are replaced whole (atomic attribute stores)."""

    __slots__ = (
        "allowed",
        "blocked",
        "compiled",
        "descriptions",
        "document",
        "ended",
        "explainers",
        "hash",
        "id",
        "next_attempt_at",
        "refresh_error",
        "refresh_lock",
        "report_arguments",
        "retry_delay",
        "statuses",
        "stopped",
        "token",
        "used",
    )

    def __init__(
        self,
        plan_id: str,
        document: dict[str, Any],
        document_hash: str,
        token: _Token,
        report_arguments: bool,
    ) -> None:
        self.id = plan_id
        self.document = document
        self.hash = document_hash
        self.compiled = CompiledPlan(document)
        steps = document["steps"]
        self.descriptions = tuple(acp.describe_step(step) for step in steps)
        self.token = token
        self.report_arguments = report_arguments
        self.used = [0] * len(steps)
        self.statuses = [acp.PENDING] * len(steps)
        self.allowed: dict[tuple[int, int | None], CallDecision] = {}
        self.explainers: dict[int, tuple[tuple[str, Callable[[Any], bool], str], ...]] = {}
        self.blocked: CallDecision | None = None
        self.ended = False
        # The decision every call gets once the plan is blocked or ended: one test on the
        # hot path for both.
        self.stopped: CallDecision | None = None
        self.refresh_lock = threading.Lock()
        self.next_attempt_at = token.refresh_at
        self.retry_delay = 0.0
        self.refresh_error: str | None = None


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")


def _field_errors(errors: list[FieldError]) -> list[dict[str, Any]]:
    return [{"path": error.path, "detail": error.detail} for error in errors]


_PENDING: Final = acp.PENDING
_IN_PROGRESS: Final = acp.IN_PROGRESS

_NO_PLAN = CallDecision(
    Decision.NO_PLAN, "no plan has been declared in this session; call declare_plan first"
)
_PLAN_ENDED = CallDecision(Decision.NO_PLAN, "the plan has ended; declare a new plan")
_ARGS_NOT_OBJECT = CallDecision(
    Decision.INVALID_ARGUMENTS, "the call's arguments must be a JSON object"
)
_TOOL_NOT_STRING = CallDecision(Decision.INVALID_ARGUMENTS, "the tool name must be a string")


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
        report: post decisions to ``POST /v1/plans/{id}/events`` from a background thread.
        report_display_updates: also attach the ACP updates sent to `acp_sink`.
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
        report: bool = True,
        report_display_updates: bool = True,
        report_interval: float = 1.0,
        report_batch_size: int = 200,
        report_queue_size: int = 10_000,
        jwks_min_refetch_interval: float = 30.0,
        clock_skew: int = 60,
    ) -> None:
        self.url = url.rstrip("/")
        self.issuer = issuer if issuer is not None else self.url
        self.session_id = session_id or f"plangate-{uuid.uuid4().hex}"
        self._clock = clock or time.time
        self._control_plane = ControlPlaneClient(
            self.url, api_key, http_client=http_client, transport=transport, timeout=timeout
        )
        self._jwks = JwksCache(
            self._control_plane.jwks,
            clock=self._clock,
            min_refetch_interval=jwks_min_refetch_interval,
        )
        self._acp_sink = acp_sink
        self._acp_plan_updates = acp_plan_updates
        self._ttl = ttl
        self._refresh_margin = refresh_margin
        self._auto_refresh = auto_refresh
        self._clock_skew = clock_skew
        self._reporter = (
            DecisionReporter(
                self._control_plane.post_events,
                max_queue=report_queue_size,
                batch_size=report_batch_size,
                interval=report_interval,
            )
            if report
            else None
        )
        # Only what was shown is reported: without a sink, nothing reached the user.
        self._report_display_updates = (
            report_display_updates and self._reporter is not None and acp_sink is not None
        )
        self._lock = threading.Lock()  # budgets, statuses, the output flag, the plan slot
        self._declare_lock = threading.Lock()
        self._emit_lock = threading.Lock()
        self._display_sequence = 0
        self._emitted_sequence = 0
        self._plan: _Plan | None = None
        self._tool_output_seen = False
        self._closed = False
        self._refresh_wake = threading.Event()
        self._refresher: threading.Thread | None = None

    # --- declaring --------------------------------------------------------------------

    def declare(self, plan: object) -> DeclaredPlan:
        """Declare `plan` (a plan document) and hold its verified intent token.

        Raises GuardError: ``invalid_plan`` (with `errors`), ``declare_after_output`` (a
        guarded tool already returned output in this session), ``token_invalid`` or
        ``plan_swapped`` (the answer does not carry the plan sent, validly signed),
        ``control_plane_unavailable``, or the control plane's refusal code
        (``policy_denied``, ``unknown_user``, ``user_disabled``...).
        """
        if self._closed:
            raise GuardError(GUARD_CLOSED, "the guard is closed")
        self._refuse_after_output()  # first: no plan, valid or not, is taken after output
        try:
            document = validate_plan(plan)
        except DocumentInvalid as error:
            raise GuardError(
                INVALID_PLAN, "the plan is invalid", errors=_field_errors(error.errors)
            ) from error
        with self._declare_lock:
            self._refuse_after_output()
            try:
                body = self._control_plane.declare(document, ttl=self._ttl)
            except ControlPlaneError as error:
                raise GuardError(error.code, error.detail, errors=error.errors) from error
            except ControlPlaneUnavailable as error:
                raise GuardError(CONTROL_PLANE_UNAVAILABLE, str(error)) from error
            document_hash = plan_hash(document)
            plan_id, token = self._accept(body, document, document_hash)
            state = _Plan(
                plan_id, document, document_hash, token, bool(body.get("reportArguments"))
            )
            with self._lock:
                # A call may have been allowed while the request was out.
                self._refuse_after_output()
                previous, self._plan = self._plan, state
            if previous is not None:
                self._end(previous)
            self._publish(state)
            if self._auto_refresh:
                self._start_refresher()
            self._refresh_wake.set()
        return DeclaredPlan(
            plan_id=plan_id,
            plan_hash=document_hash,
            plan=document,
            expires_at=token.expires_at,
            policy=body.get("policy") if isinstance(body.get("policy"), dict) else {},
            report_arguments=state.report_arguments,
        )

    def _refuse_after_output(self) -> None:
        if self._tool_output_seen:
            raise GuardError(
                DECLARE_AFTER_OUTPUT,
                "a plan must be declared before any tool output is read: a guarded tool has"
                " already run in this session, so a new plan cannot be declared here; start"
                " a new session with a fresh context instead",
            )

    def handle_declare_plan(self, arguments: object) -> dict[str, Any]:
        """Run the model's ``declare_plan`` tool call; returns the tool result to give back
        to the model (never raises for a refused plan: the result explains the refusal).

        `arguments` is the call's arguments: the plan object, or its JSON text as
        OpenAI-style APIs deliver it.
        """
        if isinstance(arguments, str | bytes):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return {
                    "ok": False,
                    "code": INVALID_PLAN,
                    "detail": "the arguments are not valid JSON",
                    "errors": [],
                }
        try:
            declared = self.declare(arguments)
        except GuardError as error:
            return {
                "ok": False,
                "code": error.code,
                "detail": error.message,
                "errors": error.errors,
            }
        descriptions = [acp.describe_step(step) for step in declared.plan["steps"]]
        return {
            "ok": True,
            "planId": declared.plan_id,
            "expiresAt": _iso(declared.expires_at),
            "steps": descriptions,
            "detail": "The plan is declared. Only calls that match one of its steps will run.",
        }

    def _accept(
        self,
        body: Mapping[str, Any],
        document: dict[str, Any],
        document_hash: str,
        expected_id: str | None = None,
    ) -> tuple[str, _Token]:
        """Verify a declare/refresh answer: a valid token for exactly the plan we sent."""
        token = body.get("token")
        plan_id = body.get("id")
        if not isinstance(token, str) or not isinstance(plan_id, str):
            raise GuardError(TOKEN_INVALID, "the answer carries no token and plan id")
        try:
            kid = unverified_header(token).get("kid")
            keys = self._jwks.keys_for(kid)
            claims = verify_token(
                token, keys, issuer=self.issuer, now=self._clock(), leeway=self._clock_skew
            )
        except TokenInvalid as error:
            raise GuardError(TOKEN_INVALID, f"the intent token is not valid: {error}") from error
        except (ControlPlaneError, ControlPlaneUnavailable) as error:
            raise GuardError(
                CONTROL_PLANE_UNAVAILABLE, f"the signing keys could not be fetched: {error}"
            ) from error
        if claims["ph"] != document_hash or body.get("planHash") != document_hash:
            raise GuardError(PLAN_SWAPPED, "the token's plan hash is not the hash of the plan sent")
        try:
            same_plan = canonical_json(claims["plan"]) == canonical_json(document)
        except Exception:
            same_plan = False
        if not same_plan:
            raise GuardError(PLAN_SWAPPED, "the token carries another plan than the one sent")
        if claims["jti"] != plan_id or (expected_id is not None and plan_id != expected_id):
            raise GuardError(PLAN_SWAPPED, "the token is for another plan")
        user = document["user"].strip().casefold()
        if claims["sub"].casefold() != user:
            raise GuardError(PLAN_SWAPPED, "the token acts for another person than the plan")
        role, groups = claims.get("role"), claims.get("groups", [])
        if not (role is None or isinstance(role, str)) or not (
            isinstance(groups, list) and all(isinstance(group, str) for group in groups)
        ):
            raise GuardError(TOKEN_INVALID, "the token's role or groups are malformed")
        try:
            policy = CompiledPolicy(validate_policy(claims.get("pol")), role=role, groups=groups)
        except DocumentInvalid as error:
            raise GuardError(
                TOKEN_INVALID, f"the token's policy snapshot is invalid: {error}"
            ) from error
        expires_at = float(claims["exp"])
        lifetime = max(0.0, expires_at - float(claims["iat"]))
        margin = (
            self._refresh_margin
            if self._refresh_margin is not None
            else min(MAX_REFRESH_MARGIN, lifetime / 5)
        )
        return plan_id, _Token(token, claims, policy, expires_at, expires_at - margin, kid)

    # --- deciding ---------------------------------------------------------------------

    def check(self, tool: str, args: Mapping[str, Any]) -> CallDecision:
        """Decide a call of `tool` with `args` (its arguments object), locally.

        An allowed decision reserves one call of the step's budget, and counts as the tool
        having run for the declare-before-output rule. Every decision is queued for the
        decision log. Never touches the network: with an expired token the call is
        ``token_expired`` at once and the background refresher does the refreshing.
        """
        plan = self._plan
        if plan is None:
            return _NO_PLAN
        now = self._clock()
        decision = self._decide(plan, tool, args, now)
        reporter = self._reporter
        if reporter is not None:
            reporter.record(
                plan.id,
                now,
                tool,
                decision.code.value,
                decision.step,
                "" if decision.allowed else decision.reason,
                dict(args) if type(args) is dict else args,
                plan.report_arguments,
            )
        return decision

    def _decide(self, plan: _Plan, tool: Any, args: Any, now: float) -> CallDecision:
        stopped = plan.stopped
        if stopped is not None:
            return stopped
        token = plan.token
        if now >= token.refresh_at:
            if token.withdrawn is not None or now >= token.expires_at:
                # Never a network wait on a call: the refresher retries (within a second
                # once the token is unusable) and the next call finds the fresh token.
                return self._unusable(plan, token, now)
            if self._auto_refresh and now >= plan.next_attempt_at:
                self._refresh_wake.set()  # the refresher thread does the network part
        if type(args) is not dict and not isinstance(args, Mapping):
            return _ARGS_NOT_OBJECT
        if type(tool) is not str:
            return _TOOL_NOT_STRING
        try:
            problem = non_finite_argument(args)
        except Exception:  # a Mapping that cannot be read cannot be decided on
            problem = "the arguments cannot be read"
        if problem is not None:
            return CallDecision(
                Decision.INVALID_ARGUMENTS,
                f"{problem}; arguments must be JSON values (no NaN or Infinity)",
            )
        compiled = plan.compiled
        matching = compiled.matching_steps(tool, args)
        if not matching:
            return self._not_in_plan(plan, tool, args)
        verdict = token.policy.decide(tool, args)
        if not verdict.allowed:
            rule = "the policy default" if verdict.rule is None else f"rules[{verdict.rule}]"
            return CallDecision(
                Decision.POLICY_DENIED,
                f"{verdict.reason} ({rule}, policy version {token.policy_version})",
                matching[0],
                verdict.rule,
            )
        used = plan.used
        with self._lock:
            step = compiled.choose_step(matching, used)
            if step is not None:
                used[step] += 1
                self._tool_output_seen = True
                started = plan.statuses[step] == _PENDING
                if started:
                    plan.statuses[step] = _IN_PROGRESS
        if step is None:
            return self._spent(plan, matching)
        if started:
            self._publish(plan)
        decision = plan.allowed.get((step, verdict.rule))
        if decision is None:
            decision = CallDecision(
                Decision.ALLOWED,
                f"step {step} ({tool}) of the plan; {verdict.reason}",
                step,
                verdict.rule,
            )
            plan.allowed[(step, verdict.rule)] = decision
        return decision

    def _not_in_plan(self, plan: _Plan, tool: str, args: Mapping[str, Any]) -> CallDecision:
        candidates = plan.compiled.step_candidates(tool)
        if not candidates:
            return CallDecision(Decision.NOT_IN_PLAN, f"no step of the plan calls {tool}")
        reasons = []
        for index in candidates:
            failures = [
                detail
                for name, matches, detail in self._explainer(plan, index)
                if name not in args or not matches(args[name])
            ]
            reasons.append(f"step {index}: {'; '.join(failures) or 'arguments do not match'}")
        return CallDecision(
            Decision.NOT_IN_PLAN,
            f"the arguments match no step for {tool} ({' / '.join(reasons)})",
        )

    @staticmethod
    def _explainer(plan: _Plan, index: int) -> tuple[tuple[str, Callable[[Any], bool], str], ...]:
        explainer = plan.explainers.get(index)
        if explainer is None:
            args = plan.document["steps"][index]["args"]
            explainer = tuple(
                (
                    name,
                    compile_constraint(constraint),
                    f"{name} must satisfy {json.dumps(constraint, ensure_ascii=False)[:120]}",
                )
                for name, constraint in args.items()
            )
            plan.explainers[index] = explainer
        return explainer

    @staticmethod
    def _spent(plan: _Plan, matching: list[int]) -> CallDecision:
        steps = ", ".join(f"{index} ({plan.used[index]} calls)" for index in matching)
        return CallDecision(
            Decision.MAX_CALLS_EXCEEDED,
            f"every matching step has used its maxCalls: step {steps}",
            matching[0],
        )

    def call(self, tool: str, args: Mapping[str, Any], fn: Callable[..., Any]) -> Any:
        """Check the call, run ``fn(**args)`` when allowed, record that it returned.

        Raises CallBlocked (with `.decision`) when the call is not allowed.
        """
        decision = self.check(tool, args)
        if not decision.allowed:
            raise CallBlocked(decision)
        result = fn(**args)
        self.completed(decision)
        return result

    def tool(self, name: str | None = None) -> Callable[[F], F]:
        """Decorator: every call of the function is checked as tool `name` (default: the
        function's name) with its arguments by parameter name, then run and recorded.
        Raises CallBlocked when the call is not allowed."""

        def decorate(fn: F) -> F:
            tool_name = name or fn.__name__
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                arguments = dict(signature.bind(*args, **kwargs).arguments) if args else kwargs
                decision = self.check(tool_name, arguments)
                if not decision.allowed:
                    raise CallBlocked(decision)
                result = fn(*args, **kwargs)
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
            changed = plan.statuses[step] == acp.IN_PROGRESS
            if changed:
                plan.statuses[step] = acp.COMPLETED
        if changed:
            self._publish(plan)

    # --- refreshing -------------------------------------------------------------------

    def _unusable(self, plan: _Plan, token: _Token, now: float) -> CallDecision:
        """The decision for a call while the token has expired or its key was withdrawn."""
        if self._auto_refresh and now >= plan.next_attempt_at:
            self._refresh_wake.set()
        if plan.blocked is not None:
            return plan.blocked
        detail = f": {plan.refresh_error}" if plan.refresh_error else ""
        if token.withdrawn is not None:
            return CallDecision(
                Decision.TOKEN_INVALID,
                f"the intent token can no longer be trusted ({token.withdrawn}) and was not"
                f" refreshed{detail}",
            )
        return CallDecision(
            Decision.TOKEN_EXPIRED,
            f"the intent token expired at {_iso(token.expires_at)} and was not refreshed{detail}",
        )

    def refresh(self) -> bool:
        """Refresh the token now (the same plan, re-signed with the current policy). True on
        success; on a refusal the plan is blocked with its code (see `status`)."""
        plan = self._plan
        if plan is None or plan.blocked is not None or plan.ended:
            return False
        return self._attempt_refresh(plan, plan.token, force=True)

    def refresh_if_due(self) -> bool:
        """Refresh when the token is within its refresh margin (or a retry is due), or at
        once when the key set, refetched at its max-age, no longer holds the token's key.
        True when a fresh token was installed. The background refresher calls this."""
        plan = self._plan
        if plan is None or plan.blocked is not None or plan.ended:
            return False
        if self._key_withdrawn(plan):
            return self._attempt_refresh(plan, plan.token, force=True)
        if self._clock() < plan.next_attempt_at:
            return False
        return self._attempt_refresh(plan, plan.token)

    def _key_withdrawn(self, plan: _Plan) -> bool:
        """Refetch the key set when its max-age has passed; True when the token in use was
        signed by a key it no longer lists (revoked, say), which has just been noticed."""
        token = plan.token
        if token.withdrawn is not None:
            return False
        keys = self._jwks.refetch_if_stale()
        if keys is None or token.kid in keys:
            return False
        token.withdrawn = f"its signing key {token.kid} is no longer published"
        token.refresh_at = -math.inf
        logger.warning(
            "plangate guard: the signing key of plan %s's token left the JWKS; refreshing",
            plan.id,
        )
        return True

    def _attempt_refresh(self, plan: _Plan, seen: _Token, *, force: bool = False) -> bool:
        with plan.refresh_lock:
            if plan.token is not seen:
                return True  # another thread refreshed meanwhile
            if plan.blocked is not None or plan.ended or self._plan is not plan:
                return False
            now = self._clock()
            if not force and now < plan.next_attempt_at:
                return False
            try:
                body = self._control_plane.refresh(plan.id, seen.token, ttl=self._ttl)
                _, token = self._accept(body, plan.document, plan.hash, expected_id=plan.id)
            except ControlPlaneError as error:
                refusal = REFRESH_REFUSALS.get(error.code)
                if refusal is not None and error.status in (403, 410):
                    self._block(
                        plan,
                        CallDecision(
                            refusal,
                            f"the control plane refused to refresh the plan: {error.detail}",
                        ),
                    )
                elif error.transient:
                    self._retry_later(plan, now, str(error), error.retry_after)
                elif seen.withdrawn is not None:
                    # Asking again cannot help, and the token may not serve out: its key
                    # was withdrawn (the control plane refuses such a token as well).
                    self._block(
                        plan,
                        CallDecision(
                            Decision.TOKEN_INVALID,
                            f"the intent token can no longer be trusted ({seen.withdrawn})"
                            f" and the control plane refused to refresh it: {error.detail}",
                        ),
                    )
                else:
                    # Asking again cannot help (a revoked API key, a mismatch): the token
                    # serves until it expires.
                    plan.refresh_error = f"refresh refused: {error}"
                    plan.next_attempt_at = math.inf
                logger.warning("plangate guard: refreshing plan %s failed: %s", plan.id, error)
                return False
            except (ControlPlaneUnavailable, GuardError) as error:
                self._retry_later(plan, now, str(error), None)
                logger.warning("plangate guard: refreshing plan %s failed: %s", plan.id, error)
                return False
            plan.token = token
            plan.refresh_error = None
            plan.retry_delay = 0.0
            # A token already within its margin (a short lifetime, a skewed clock) is not
            # refreshed again and again in a loop.
            plan.next_attempt_at = max(token.refresh_at, now + EXPIRED_RETRY_DELAY[0])
            return True

    @staticmethod
    def _retry_later(plan: _Plan, now: float, error: str, retry_after: float | None) -> None:
        token = plan.token
        honoured = min(MAX_RETRY_DELAY, retry_after or 0.0)
        if token.withdrawn is not None or now >= token.expires_at:
            # Every call is blocked until a refresh succeeds: ask again within a second,
            # so calls resume about a second after the control plane is back.
            delay = max(random.uniform(*EXPIRED_RETRY_DELAY), honoured)
        else:
            plan.retry_delay = min(MAX_RETRY_DELAY, max(1.0, plan.retry_delay * 2))
            delay = max(plan.retry_delay, honoured)
            delay = min(delay, max(1.0, token.expires_at - now))  # try again at expiry
        plan.refresh_error = error
        plan.next_attempt_at = now + delay

    def _start_refresher(self) -> None:
        with self._lock:
            if self._refresher is not None:
                return
            self._refresher = threading.Thread(
                target=self._refresh_loop, name="plangate-guard-refresher", daemon=True
            )
        self._refresher.start()

    def _refresh_loop(self) -> None:
        while not self._closed:
            plan = self._plan
            wait = _REFRESHER_MAX_SLEEP
            if plan is not None and plan.blocked is None and not plan.ended:
                now = self._clock()
                if now >= plan.next_attempt_at or now >= self._jwks.next_check_at:
                    try:
                        self.refresh_if_due()
                    except Exception:  # pragma: no cover - keep the refresher alive
                        logger.exception("plangate guard: unexpected refresh failure")
                    if plan.next_attempt_at <= self._clock():
                        # Nothing moved the next attempt forward (a clock that stands
                        # still, a plan replaced meanwhile): never spin.
                        self._refresh_wake.wait(1.0)
                        continue
                    now = self._clock()
                jwks_wait = max(self._jwks.next_check_at - now, _JWKS_CHECK_FLOOR)
                wait = min(wait, plan.next_attempt_at - now, jwks_wait)
            self._refresh_wake.wait(max(wait, 0.01))
            self._refresh_wake.clear()

    def _block(self, plan: _Plan, decision: CallDecision) -> None:
        with self._lock:
            plan.blocked = plan.stopped = decision
            plan.next_attempt_at = math.inf
            plan.refresh_error = decision.reason
            for index, status in enumerate(plan.statuses):
                if status != acp.COMPLETED:
                    plan.statuses[index] = acp.CANCELLED
        self._publish(plan)

    # --- status, display, reporting ---------------------------------------------------

    def status(self) -> GuardStatus:
        """Where the session stands: the plan, each step's calls and status, and which
        required steps have not run yet."""
        reporter = self._reporter.stats() if self._reporter is not None else None
        plan = self._plan
        if plan is None:
            return GuardStatus(state="no_plan", reason=_NO_PLAN.reason, reporter=reporter)
        with self._lock:
            used = list(plan.used)
            statuses = list(plan.statuses)
        token = plan.token
        steps = tuple(
            StepStatus(
                index=index,
                tool=step["tool"],
                description=plan.descriptions[index],
                required=step["required"],
                used=used[index],
                max_calls=step["maxCalls"],
                status=statuses[index],
            )
            for index, step in enumerate(plan.document["steps"])
        )
        pending = tuple(step.index for step in steps if step.required and step.used == 0)
        if plan.blocked is not None:
            state, reason = "blocked", plan.blocked.reason
        elif token.withdrawn is not None:
            state, reason = (
                "invalid",
                f"the intent token can no longer be trusted: {token.withdrawn}",
            )
        elif self._clock() >= token.expires_at:
            state, reason = "expired", "the intent token has expired"
        else:
            state, reason = "active", ""
        return GuardStatus(
            state=state,
            plan_id=plan.id,
            blocked=plan.blocked.code.value if plan.blocked is not None else None,
            reason=reason,
            expires_at=token.expires_at,
            policy_version=token.policy_version,
            steps=steps,
            required_pending=pending,
            complete=not pending,
            refresh_error=plan.refresh_error,
            reporter=reporter,
        )

    def report_display_update(self, message: Mapping[str, Any]) -> None:
        """Attach an ACP ``session/update`` (params) the agent showed its user to the
        decision log of the current plan."""
        plan = self._plan
        if plan is not None and self._reporter is not None:
            self._reporter.display(plan.id, self._clock(), dict(message))

    def reporter_stats(self) -> ReporterStats | None:
        return self._reporter.stats() if self._reporter is not None else None

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until the queued decisions are posted (or dropped)."""
        return self._reporter.flush(timeout) if self._reporter is not None else True

    def _publish(self, plan: _Plan, *, removed: bool = False) -> None:
        """Show the plan's current state (or its removal) to the user, newest first wins."""
        if self._acp_sink is None and not self._report_display_updates:
            return
        with self._lock:
            statuses = tuple(plan.statuses)
            self._display_sequence += 1
            sequence = self._display_sequence
        if removed:
            params = acp.plan_removed_params(session_id=self.session_id, plan_id=plan.id)
        else:
            params = acp.plan_update_params(
                session_id=self.session_id,
                plan_id=plan.id,
                goal=plan.document["goal"],
                steps=plan.document["steps"],
                statuses=statuses,
                plan_updates=self._acp_plan_updates,
            )
        with self._emit_lock:
            if sequence <= self._emitted_sequence:
                return  # a newer state has been shown already
            self._emitted_sequence = sequence
            if self._acp_sink is not None:
                try:
                    self._acp_sink(acp.notification(params))
                except Exception:
                    logger.exception("plangate guard: the ACP sink failed")
            if self._report_display_updates and self._reporter is not None:
                self._reporter.display(plan.id, self._clock(), params)

    # --- ending -----------------------------------------------------------------------

    def _end(self, plan: _Plan) -> None:
        with self._lock:
            if plan.ended:
                return
            plan.ended = True
            if plan.stopped is None:
                plan.stopped = _PLAN_ENDED
            changed = False
            for index, status in enumerate(plan.statuses):
                if status == acp.IN_PROGRESS:
                    plan.statuses[index] = acp.COMPLETED
                    changed = True
        if changed:
            self._publish(plan)
        if self._acp_plan_updates:
            self._publish(plan, removed=True)

    def end_plan(self) -> None:
        """End the current plan: steps still running show as completed, the plan is removed
        from the user's view, and later calls are ``no_plan`` until a new declaration."""
        with self._lock:
            plan, self._plan = self._plan, None
        if plan is not None:
            self._end(plan)

    def new_session(self, session_id: str | None = None) -> None:
        """End the plan and start a new session in which a plan may be declared again.

        Only for a fresh model context: the declare-before-output rule exists because tool
        output read in a context can steer the plan the model writes next.
        """
        self.end_plan()
        with self._lock:
            self._tool_output_seen = False
            self.session_id = session_id or f"plangate-{uuid.uuid4().hex}"

    def close(self, timeout: float | None = 10.0) -> None:
        """End the plan, flush the decision log and stop the background threads."""
        if self._closed:
            return
        self.end_plan()
        self._closed = True
        self._refresh_wake.set()
        if self._refresher is not None:
            self._refresher.join(timeout)
        if self._reporter is not None:
            self._reporter.close(timeout)
        self._control_plane.close()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
