"""The claims of an intent token, typed once: `IntentClaims` (what the control plane signs and
what both sides read back from a verified payload), and the type checks of single claims.

Every check raises TokenInvalid naming the claim, so a token with a missing or mistyped
claim is refused the same way wherever it is read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard.errors import TokenInvalid

__all__ = [
    "MAX_ACT_DEPTH",
    "Approval",
    "IntentClaims",
    "ParentReference",
    "ShadowPolicy",
    "StatusReference",
    "act_claim",
    "approval_claim",
    "cnf_claim",
    "integer_claim",
    "numeric_claim",
    "parent_claim",
    "shadow_claim",
    "status_claim",
]


def _claim(payload: Mapping[str, Any], name: str) -> Any:
    if name not in payload:
        raise TokenInvalid(f"claim {name} is missing")
    return payload[name]


def _string_claim(payload: Mapping[str, Any], name: str) -> str:
    value = _claim(payload, name)
    if not isinstance(value, str):
        raise TokenInvalid(f"claim {name} is not a string")
    return value


def integer_claim(payload: Mapping[str, Any], name: str) -> int:
    value = _claim(payload, name)
    # The control plane writes whole seconds and version numbers; a bool is an int to Python,
    # and json.loads turns 1e400 into a float (inf).
    if isinstance(value, bool) or not isinstance(value, int):
        raise TokenInvalid(f"claim {name} is not an integer")
    return value


def _object_claim(payload: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = _claim(payload, name)
    if not isinstance(value, dict):
        raise TokenInvalid(f"claim {name} is not an object")
    return value


def _role_claim(payload: Mapping[str, Any]) -> str | None:
    value = _claim(payload, "role")
    if value is not None and not isinstance(value, str):
        raise TokenInvalid("claim role is not a string or null")
    return value


def _groups_claim(payload: Mapping[str, Any]) -> tuple[str, ...]:
    value = _claim(payload, "groups")
    if not isinstance(value, list) or not all(isinstance(group, str) for group in value):
        raise TokenInvalid("claim groups is not a list of strings")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class Approval:
    """The optional ``apr`` claim: a person approved the plan whose hash is ``ph``.

    ``{"by": "<the approver's e-mail>", "at": <unix seconds>, "ph": "<plan hash>"}``. The
    control plane signs it into every token of a plan that a policy's review rule sent to
    a person; ``ph`` binds the approval to the exact plan (see `approval_claim`).
    """

    by: str
    at: int
    ph: str

    def to_payload(self) -> dict[str, Any]:
        return {"by": self.by, "at": self.at, "ph": self.ph}


_APPROVAL_FIELDS = frozenset({"by", "at", "ph"})


def approval_claim(payload: Mapping[str, Any]) -> Approval | None:
    """The ``apr`` claim of a payload, None when there is none.

    TokenInvalid when it is not ``{"by": str, "at": int, "ph": str}`` or when its ``ph`` is
    not the token's own ``ph``: an approval covers exactly one plan, and a token carrying
    another plan's approval must not pass for an approved one.
    """
    if "apr" not in payload:
        return None
    value = payload["apr"]
    if not isinstance(value, dict) or set(value) != _APPROVAL_FIELDS:
        raise TokenInvalid("claim apr is not an object with by, at and ph")
    if not isinstance(value["by"], str) or not isinstance(value["ph"], str):
        raise TokenInvalid("claim apr is not an object with by, at and ph")
    approval = Approval(by=value["by"], at=integer_claim(value, "at"), ph=value["ph"])
    if approval.ph != _string_claim(payload, "ph"):
        raise TokenInvalid("claim apr covers another plan hash than the token's ph")
    return approval


@dataclass(frozen=True, slots=True)
class StatusReference:
    """The optional ``status`` claim (draft-ietf-oauth-status-list): the token's index in
    its team's status list and the list's URI,
    ``{"status_list": {"idx": N, "uri": "<issuer>/v1/status-lists/<team>"}}``."""

    idx: int
    uri: str

    def to_payload(self) -> dict[str, Any]:
        return {"status_list": {"idx": self.idx, "uri": self.uri}}


def status_claim(payload: Mapping[str, Any]) -> StatusReference | None:
    """The ``status`` claim, None when there is none; TokenInvalid when it is not
    ``{"status_list": {"idx": non-negative int, "uri": str}}``."""
    if "status" not in payload:
        return None
    value = payload["status"]
    reference = value.get("status_list") if isinstance(value, dict) else None
    if not isinstance(reference, dict) or not isinstance(reference.get("uri"), str):
        raise TokenInvalid("claim status is not an object with status_list {idx, uri}")
    idx = integer_claim(reference, "idx")
    if idx < 0:
        raise TokenInvalid("claim status.status_list.idx is negative")
    return StatusReference(idx=idx, uri=reference["uri"])


def cnf_claim(payload: Mapping[str, Any]) -> str | None:
    """The ``cnf.jkt`` of a token bound to its holder's key (RFC 9449 section 6), None for
    an unbound token; TokenInvalid when ``cnf`` is there but holds no string ``jkt``."""
    if "cnf" not in payload:
        return None
    value = payload["cnf"]
    if not isinstance(value, dict) or not isinstance(value.get("jkt"), str) or not value["jkt"]:
        raise TokenInvalid("claim cnf is not an object with a jkt")
    jkt: str = value["jkt"]
    return jkt


@dataclass(frozen=True, slots=True)
class ParentReference:
    """The optional ``parent`` claim of a child plan's token: the plan it was delegated
    from, by id and hash, ``{"jti": "<plan id>", "ph": "<plan hash>"}``."""

    jti: str
    ph: str

    def to_payload(self) -> dict[str, Any]:
        return {"jti": self.jti, "ph": self.ph}


def parent_claim(payload: Mapping[str, Any]) -> ParentReference | None:
    """The ``parent`` claim, None for a plan its agent declared itself."""
    if "parent" not in payload:
        return None
    value = payload["parent"]
    if not isinstance(value, dict) or set(value) != {"jti", "ph"}:
        raise TokenInvalid("claim parent is not an object with jti and ph")
    if not isinstance(value["jti"], str) or not isinstance(value["ph"], str):
        raise TokenInvalid("claim parent is not an object with jti and ph")
    return ParentReference(jti=value["jti"], ph=value["ph"])


@dataclass(frozen=True, slots=True)
class ShadowPolicy:
    """The optional ``shadow`` claim: the policy version published in shadow beside the
    active one when the token was signed, ``{"pol": {...}, "polv": 5, "polh": "..."}``, as
    ``pol``, ``polv`` and ``polh`` give the active one. Decided under, never enforced: the
    guard reports where it would have answered differently (docs/decisions/0076)."""

    pol: dict[str, Any]
    polv: int
    polh: str

    def to_payload(self) -> dict[str, Any]:
        return {"pol": self.pol, "polv": self.polv, "polh": self.polh}


def shadow_claim(payload: Mapping[str, Any]) -> ShadowPolicy | None:
    """The ``shadow`` claim, None when no version was in shadow at signing."""
    if "shadow" not in payload:
        return None
    value = payload["shadow"]
    if not isinstance(value, dict) or set(value) != {"pol", "polv", "polh"}:
        raise TokenInvalid("claim shadow is not an object with pol, polv and polh")
    return ShadowPolicy(
        pol=_object_claim(value, "pol"),
        polv=integer_claim(value, "polv"),
        polh=_string_claim(value, "polh"),
    )


# A chain of delegations longer than this is refused where it is made (plans.delegation) and
# where it is read: it bounds the recursion over a token's ``act``.
MAX_ACT_DEPTH = 8


def act_claim(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The RFC 8693 ``act`` claim of a child plan's token (who delegated to whom: ``sub``
    is the acting agent, a nested ``act`` the one before it), None when there is none.
    TokenInvalid when a level is not an object with a string ``sub`` or the chain is
    deeper than MAX_ACT_DEPTH."""
    if "act" not in payload:
        return None
    value: dict[str, Any] = payload["act"]
    level: Any = value
    for _ in range(MAX_ACT_DEPTH):
        if not isinstance(level, dict) or not isinstance(level.get("sub"), str):
            raise TokenInvalid("claim act is not an object with a sub")
        if "act" not in level:
            return value
        level = level["act"]
    raise TokenInvalid(f"claim act is deeper than {MAX_ACT_DEPTH} delegations")


@dataclass(frozen=True, slots=True)
class IntentClaims:
    """The claims of an intent token (DESIGN.md, "The intent token").

    The control plane signs `to_payload()`; both sides read a verified payload back with
    `from_payload`, which checks that every claim is present and of its type. What the
    values mean (a valid plan whose hash is `ph`, a valid policy) is checked where plans and
    policies are defined: `guard.plan`, `guard.policy`.
    """

    iss: str  # the control plane's issuer URL
    sub: str  # the member's email
    jti: str  # the plan id, the same across refreshes
    iat: int
    exp: int
    ph: str  # the plan hash
    plan: dict[str, Any]  # the plan, defaults filled in
    agent: str  # the id of the agent whose API key asked
    pol: dict[str, Any]  # the agent's active policy document at signing time
    polv: int  # its version number
    polh: str  # its hash
    role: str | None  # the member's role at signing time
    groups: tuple[str, ...]  # the member's group names at signing time, sorted
    apr: Approval | None = None  # who approved the plan, when a review rule asked a person
    status: StatusReference | None = None  # where the token's revocation status is published
    cnf: str | None = None  # the jkt of the key the token is bound to (DPoP)
    parent: ParentReference | None = None  # the plan a child plan was delegated from
    act: dict[str, Any] | None = None  # a child plan's delegation chain (RFC 8693)
    shadow: ShadowPolicy | None = None  # the policy version tried in shadow at signing

    def to_payload(self) -> dict[str, Any]:
        """The JSON object the control plane signs (each optional claim only when set)."""
        payload: dict[str, Any] = {
            "iss": self.iss,
            "sub": self.sub,
            "jti": self.jti,
            "iat": self.iat,
            "exp": self.exp,
            "ph": self.ph,
            "plan": self.plan,
            "agent": self.agent,
            "pol": self.pol,
            "polv": self.polv,
            "polh": self.polh,
            "role": self.role,
            "groups": list(self.groups),
        }
        if self.apr is not None:
            payload["apr"] = self.apr.to_payload()
        if self.status is not None:
            payload["status"] = self.status.to_payload()
        if self.cnf is not None:
            payload["cnf"] = {"jkt": self.cnf}
        if self.parent is not None:
            payload["parent"] = self.parent.to_payload()
        if self.act is not None:
            payload["act"] = self.act
        if self.shadow is not None:
            payload["shadow"] = self.shadow.to_payload()
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> IntentClaims:
        """The claims of a payload; TokenInvalid names the first missing or mistyped claim.

        Other members (a registered `nbf`, say) are ignored; an ``apr`` must cover the
        token's own ``ph`` (`approval_claim`); ``status``, ``cnf``, ``parent``, ``act``
        and ``shadow`` are optional and typed when present. Checks types, not signatures:
        give it only a payload whose signature verified.
        """
        return cls(
            iss=_string_claim(payload, "iss"),
            sub=_string_claim(payload, "sub"),
            jti=_string_claim(payload, "jti"),
            iat=integer_claim(payload, "iat"),
            exp=integer_claim(payload, "exp"),
            ph=_string_claim(payload, "ph"),
            plan=_object_claim(payload, "plan"),
            agent=_string_claim(payload, "agent"),
            pol=_object_claim(payload, "pol"),
            polv=integer_claim(payload, "polv"),
            polh=_string_claim(payload, "polh"),
            role=_role_claim(payload),
            groups=_groups_claim(payload),
            apr=approval_claim(payload),
            status=status_claim(payload),
            cnf=cnf_claim(payload),
            parent=parent_claim(payload),
            act=act_claim(payload),
            shadow=shadow_claim(payload),
        )


def numeric_claim(claims: Mapping[str, Any], name: str) -> float:
    value = _claim(claims, name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenInvalid(f"claim {name} is not a number")
    # json.loads turns 1e400 into inf; math.isfinite would overflow on a huge int, which
    # compares fine as it is.
    if isinstance(value, float) and not math.isfinite(value):
        raise TokenInvalid(f"claim {name} is not a finite number")
    return value
