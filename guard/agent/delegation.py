"""Delegating part of a plan to a sub-agent (docs/decisions/0070, "The guard").

`Guard.delegate` asks the control plane for a child plan (``POST /v1/plans/{id}/
delegations``), verifies its token as the guard verifies its own, plus the ``parent`` and
``act`` claims, and reserves in the parent's own counters what the child took. What the
sub-agent needs to start is a `Delegation`: the child's token and plan, the control plane's
URL and issuer, and the receiving agent's id; never an API key (the sub-agent presents its
own agent's key). `Guard.from_delegation` / `Guard.adopt` start the sub-agent's guard from
it; ``plangate-mcp --delegation FILE`` starts a gateway with it.

I/O-free: the dataclass, its JSON form, and the checks of a child token and a reservation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from guard.agent.errors import PLAN_SWAPPED, TOKEN_INVALID, GuardError
from guard.agent.verified import VerifiedToken
from guard.budgets import Amount
from guard.plan import CompiledPlan
from guard.utc import isoformat_z

__all__ = [
    "DELEGATED_PLAN",
    "INVALID_DELEGATION",
    "Delegation",
    "Reservation",
    "child_token_check",
    "reservation_read",
]

# GuardError codes: a Delegation that cannot be read; a declaration in a session that runs a
# delegated plan (the sub-agent's plan is the one it was given).
INVALID_DELEGATION: Final = "invalid_delegation"
DELEGATED_PLAN: Final = "delegated_plan"
_FORMAT: Final = "plangate-delegation/1"


@dataclass(frozen=True)
class Delegation:
    """A child plan, as its sub-agent needs it: `plan_id`, `token` (its intent token),
    `plan` and `plan_hash`, `expires_at` (Unix seconds), `parent_id` and
    `parent_plan_hash`, `agent` (the receiving agent's id: the sub-agent's guard presents
    that agent's API key), `url` and `issuer` of the control plane, `reserved` (what the
    child took of the parent, as the control plane answered it: ``calls`` by parent step
    index, ``budgets`` by parent budget id), `report_arguments`, and `jkt`: the thumbprint
    of the key the child's tokens are bound to (the receiving guard's, `Guard.dpop_jkt`),
    None when they are not bound."""

    plan_id: str
    token: str = field(repr=False)
    plan: dict[str, Any]
    plan_hash: str
    expires_at: float
    parent_id: str
    parent_plan_hash: str
    agent: str
    url: str
    issuer: str
    reserved: dict[str, Any]
    report_arguments: bool = False
    jkt: str | None = None

    def to_json(self) -> str:
        """The delegation as JSON text, for the sub-agent's process (a file, stdin, the
        ``PLANGATE_DELEGATION`` environment variable of ``plangate-mcp``)."""
        return json.dumps(
            {
                "format": _FORMAT,
                "planId": self.plan_id,
                "token": self.token,
                "plan": self.plan,
                "planHash": self.plan_hash,
                "expiresAt": isoformat_z(self.expires_at),
                "parent": {"id": self.parent_id, "planHash": self.parent_plan_hash},
                "agent": self.agent,
                "url": self.url,
                "issuer": self.issuer,
                "reserved": self.reserved,
                "reportArguments": self.report_arguments,
                **({"jkt": self.jkt} if self.jkt is not None else {}),
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Delegation:
        """Read `to_json`'s text. Raises GuardError ``invalid_delegation`` with the path of
        each field that is missing or of the wrong type. Nothing here is trusted: the
        sub-agent's guard verifies the token (`Guard.adopt`)."""
        try:
            data = json.loads(text)
        except ValueError as error:
            raise GuardError(INVALID_DELEGATION, f"the delegation is not JSON: {error}") from error
        if not isinstance(data, dict):
            raise GuardError(INVALID_DELEGATION, "the delegation is not a JSON object")
        errors: list[dict[str, Any]] = []

        def read(path: str, kind: type, source: Mapping[str, Any] = data) -> Any:
            value = source.get(path.rsplit(".", 1)[-1])
            if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
                errors.append({"path": path, "detail": f"must be a {kind.__name__}"})
            return value

        if data.get("format") != _FORMAT:
            errors.append({"path": "format", "detail": f"must be {_FORMAT!r}"})
        parent = data.get("parent")
        parent = parent if isinstance(parent, dict) else {}
        values = {
            "plan_id": read("planId", str),
            "token": read("token", str),
            "plan": read("plan", dict),
            "plan_hash": read("planHash", str),
            "parent_id": read("parent.id", str, parent),
            "parent_plan_hash": read("parent.planHash", str, parent),
            "agent": read("agent", str),
            "url": read("url", str),
            "issuer": read("issuer", str),
            "reserved": read("reserved", dict),
            "report_arguments": read("reportArguments", bool),
        }
        if data.get("jkt") is not None:
            values["jkt"] = read("jkt", str)
        expires = data.get("expiresAt")
        try:
            values["expires_at"] = datetime.fromisoformat(str(expires)).timestamp()
        except ValueError:
            errors.append({"path": "expiresAt", "detail": "must be an RFC 3339 instant"})
        if errors:
            raise GuardError(INVALID_DELEGATION, "the delegation cannot be read", errors=errors)
        return cls(**values)

    def answer(self) -> dict[str, Any]:
        """The delegation as the control plane's issuance answer, which the sub-agent's
        guard verifies as it verifies a declaration's."""
        return {
            "id": self.plan_id,
            "token": self.token,
            "planHash": self.plan_hash,
            "reportArguments": self.report_arguments,
        }


def child_token_check(
    token: VerifiedToken, *, parent_id: str, parent_plan_hash: str, agent: str | None
) -> None:
    """A child plan's token names its parent (``parent``: the parent's id and hash) and its
    actor chain (``act``, whose ``sub`` is the token's agent, `agent` when given). Raises
    GuardError ``plan_swapped`` (another parent or agent) or ``token_invalid``."""
    claims = token.claims
    if claims.parent is None or claims.act is None:
        raise GuardError(TOKEN_INVALID, "the token is not a child plan's (no parent or act claim)")
    if claims.parent.jti != parent_id or claims.parent.ph != parent_plan_hash:
        raise GuardError(PLAN_SWAPPED, "the child token names another parent plan")
    if claims.act.get("sub") != claims.agent or (agent is not None and claims.agent != agent):
        raise GuardError(PLAN_SWAPPED, "the child token is for another agent")


@dataclass(frozen=True)
class Reservation:
    """What a child took of its parent, read against the parent's plan: calls by parent
    step index, amounts by parent budget index."""

    calls: dict[int, int]
    budgets: dict[int, Amount]


def _amount(value: object) -> Amount | None:
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        try:
            amount = Decimal(value)
        except InvalidOperation:
            return None
        return amount if amount.is_finite() and amount >= 0 else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def reservation_read(reserved: object, parent: CompiledPlan) -> Reservation:
    """The answer's ``reserved`` (``{"calls": {"<parent step>": n}, "budgets": {"<budget
    id>": "<amount>"}}``) against the parent's plan. Raises GuardError ``token_invalid``
    when it names a step or budget the parent does not have, or is not counts and
    amounts: the guard would otherwise reserve what it cannot account for."""
    if not isinstance(reserved, dict):
        raise GuardError(TOKEN_INVALID, "the answer carries no reservation (reserved)")
    calls: dict[int, int] = {}
    steps = len(parent.tools)
    for key, count in (reserved.get("calls") or {}).items():
        index = int(key) if isinstance(key, str) and key.isdigit() else -1
        if not 0 <= index < steps or not isinstance(count, int) or count < 0:
            raise GuardError(TOKEN_INVALID, f"the reservation names no parent step: {key!r}")
        calls[index] = calls.get(index, 0) + count
    by_id = {budget.id: budget.index for budget in parent.budgets}
    budgets: dict[int, Amount] = {}
    for budget_id, value in (reserved.get("budgets") or {}).items():
        amount = _amount(value)
        if budget_id not in by_id or amount is None:
            raise GuardError(
                TOKEN_INVALID, f"the reservation names no parent budget: {budget_id!r}"
            )
        budgets[by_id[budget_id]] = amount
    return Reservation(calls, budgets)
