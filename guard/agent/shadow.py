"""The policy version tried in shadow, as the guard decides under it (docs/decisions/0076).

A token signed while a version of the agent's policy was published in shadow carries it in
its ``shadow`` claim (`guard.claims.ShadowPolicy`). The guard enforces the active snapshot
(``pol``) alone; beside each decision in which the policy had its say (an allowed call, or
one the policy refused), it asks the shadow what it would have answered, and where the two
differ the decision's event carries the shadow's answer (`guard.events.ShadowAnswer`): the
control plane records it as ``shadow_blocked`` or ``shadow_allowed``.

The shadow's verdict is read in the reporter's thread, when the event is built, not on the
call's path: a decision pays for passing one more reference. What the plan decides (no
step, spent calls, order, budgets) is the same under both versions and is not compared; nor
is a policy rule's ``maxCalls``, which the shadow would count from the same calls.
"""

from __future__ import annotations

from typing import Any

from guard.agent.session import CallDecision
from guard.claims import ShadowPolicy
from guard.decisions import Decision
from guard.errors import DocumentInvalid
from guard.events import RuleRef, ShadowAnswer
from guard.policy import policy_hash, validate_policy
from guard.policy_evaluation import CompiledPolicy, PolicyDecision

#: the decisions in which the policy had its say: the only ones the shadow can change
_POLICY_DECIDED = frozenset({Decision.ALLOWED, Decision.POLICY_DENIED})


class ShadowPolicyInvalid(ValueError):
    """The token's shadow claim is not a valid policy, or not the policy its hash names."""


class ShadowDecider:
    """The shadow version of one token, compiled for the member the token acts for."""

    __slots__ = ("policy", "version")

    def __init__(self, claim: ShadowPolicy, *, role: str | None, groups: tuple[str, ...]):
        try:
            document = validate_policy(claim.pol)
        except DocumentInvalid as error:
            raise ShadowPolicyInvalid(f"the token's shadow policy is invalid: {error}") from error
        if policy_hash(document) != claim.polh:
            raise ShadowPolicyInvalid("the token's shadow policy does not hash to its polh")
        self.policy = CompiledPolicy(document, role=role, groups=groups)
        self.version = claim.polv

    def verdict(self, tool: str, args: Any) -> PolicyDecision:
        return self.policy.decide(tool, args)

    def answer(self, tool: object, args: Any, decision: CallDecision) -> ShadowAnswer | None:
        """What the shadow would have decided where that differs from `decision`, else None."""
        if decision.code not in _POLICY_DECIDED or type(tool) is not str:
            return None
        verdict = self.verdict(tool, args)
        if verdict.allowed == (decision.code is Decision.ALLOWED):
            return None
        return ShadowAnswer(
            decision=Decision.ALLOWED if verdict.allowed else Decision.POLICY_DENIED,
            policy_version=self.version,
            rule=RuleRef(index=verdict.rule, description=verdict.description or verdict.reason),
        )
