"""Where the policy version tried in shadow would have answered otherwise (decision 0076).

Issuance and refresh decide a plan under the agent's active policy version, which alone is
enforced, and under the version its policy tries in shadow (``Policy.shadow_version``,
read with the signing context): where the two answers differ, a ``ShadowDifference`` is
written with the issuance or refresh, or with the refusal's own record. The guard does the
same for each call (guard.agent.shadow) and reports the shadow's answer in the decision's
event; ``shadow_calls_record`` stores those at intake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from guard.decisions import Decision
from guard.events import GuardEvent
from guard.policy_evaluation import StepDenial, evaluate_plan, rule_description
from policies.models import PolicyVersion

from .models import ShadowDifference


@dataclass(frozen=True)
class ShadowOutcome:
    """What the shadow version answered a declaration or refresh, where it differs."""

    version: PolicyVersion
    kind: ShadowDifference.Kind
    tool: str
    step: int | None
    code: str
    shadow_code: str
    rule: dict[str, Any] | None

    def details(self) -> dict[str, Any]:
        """The shadow's answer as a record's details say it."""
        return {"version": self.version.number, "code": self.shadow_code, "rule": self.rule}


def _rule(document: dict[str, Any], index: int | None) -> dict[str, Any]:
    if index is None:
        return {"index": None, "description": f"the policy default ({document['default']})"}
    return {"index": index, "description": rule_description(document["rules"][index], index)}


def shadow_plan_outcome(
    *,
    shadow: PolicyVersion | None,
    plan: dict[str, Any],
    role: str | None,
    groups: Sequence[str],
    active_denials: Sequence[StepDenial],
) -> ShadowOutcome | None:
    """The shadow's answer to a plan the active version admitted (``active_denials``
    empty) or refused, where it differs; None without a shadow or when both agree."""
    if shadow is None:
        return None
    denials = evaluate_plan(shadow.document, plan, role=role, groups=groups)
    if bool(denials) == bool(active_denials):
        return None
    if denials:  # the active version admitted it; the shadow would refuse
        first = denials[0]
        return ShadowOutcome(
            version=shadow,
            kind=ShadowDifference.Kind.REFUSED,
            tool=first.tool,
            step=first.step,
            code="ok",
            shadow_code="policy_denied",
            rule=_rule(shadow.document, first.rule),
        )
    first = active_denials[0]
    return ShadowOutcome(
        version=shadow,
        kind=ShadowDifference.Kind.ADMITTED,
        tool=first.tool,
        step=first.step,
        code="policy_denied",
        shadow_code="ok",
        rule=None,
    )


def shadow_difference_record(
    outcome: ShadowOutcome,
    *,
    team_id: int,
    request: ShadowDifference.Request,
    active: PolicyVersion | None,
    plan_id: str = "",
    agent_id: str = "",
    at: datetime | None = None,
) -> ShadowDifference:
    """Write the difference (in the caller's transaction)."""
    return ShadowDifference.objects.create(
        team_id=team_id,
        shadow_version=outcome.version,
        active_version=active,
        kind=outcome.kind,
        request=request,
        at=at or timezone.now(),
        plan_id=plan_id,
        agent_id=agent_id,
        tool=outcome.tool[:64],
        step=outcome.step,
        code=outcome.code,
        shadow_code=outcome.shadow_code,
        rule=outcome.rule,
    )


def shadow_calls_record(
    *,
    team_id: int,
    plan_id: str,
    agent_id: str,
    events: Sequence[GuardEvent],
    decided: Sequence[int],
    versions: dict[int, PolicyVersion],
) -> int:
    """One ShadowDifference per event that carries the shadow's answer (``GuardEvent.shadow``):
    ``shadow_blocked`` for an allowed call, ``shadow_allowed`` for one the policy refused.
    ``versions`` maps the shadow version numbers the plan's tokens carried to their rows;
    ``decided`` is each event's active version id. Answers naming another version are not
    the plan's and are skipped (the batch itself was valid)."""
    rows = []
    for event, active_id in zip(events, decided, strict=True):
        answer = event.shadow
        if answer is None:
            continue
        version = versions.get(answer.policy_version)
        if version is None:
            continue
        allowed = event.decision is Decision.ALLOWED
        rows.append(
            ShadowDifference(
                team_id=team_id,
                shadow_version=version,
                active_version_id=active_id,
                kind=ShadowDifference.Kind.BLOCKED if allowed else ShadowDifference.Kind.ALLOWED,
                request=ShadowDifference.Request.CALL,
                at=event.occurred_at,
                plan_id=plan_id,
                agent_id=agent_id,
                tool=event.tool,
                step=event.step,
                code=event.decision.value,
                shadow_code=answer.decision.value,
                rule=(
                    None
                    if answer.rule is None
                    else {"index": answer.rule.index, "description": answer.rule.description}
                ),
            )
        )
    ShadowDifference.objects.bulk_create(rows)
    return len(rows)
