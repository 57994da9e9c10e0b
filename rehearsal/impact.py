"""What publishing a policy document would do to the team's live plans, before it is published.

A live plan is one that its next refresh would renew today: active, within its lifetime,
its agent and member enabled, and its agent pointing at this policy (a refresh reads the
agent's current policy, not the one the plan was issued under). Each is checked with the
check the refresh itself runs, ``guard.policy_evaluation.evaluate_plan``, on the member's
role and groups as they are now; a plan with a refused step would be ``policy_denied`` at
its next refresh, and one with a step a review rule now sends to a person that nobody
approved (``guard.policy_review``) would be ``approval_required``. A step is refused too when
it pins an argument to values no rule admitting its tool lets through (``guard.relation``:
disjoint, as a rule narrowed from ``acme/*`` to ``acme/public-*`` is from a step pinning
``acme/app``), and when a deny rule with ``args`` refuses every call of it (the step pins
each argument the rule constrains inside its constraint, read the fail-closed way). A plan
that is not refused but some of whose calls the document would refuse
(``guard.policy_evaluation.plan_argument_warnings``: an argument left free, or pinned to
values the rules admit only in part, or of which that cannot be decided, or pinned so that a
deny rule with ``args`` refuses some calls) is counted and listed apart, with the paths of
those arguments. Nothing is written.

Plans are read in chunks by id, as plain values (the role's name, the groups' sorted
names: what ``plans.services`` reads for a token), so a team with 100,000 live plans is
never held in memory at once; only the first ``limit`` affected plans are listed, all of
them are counted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, NamedTuple

from django.utils import timezone

from guard.policy_evaluation import (
    StepDenial,
    StepWarning,
    evaluate_plan,
    plan_argument_warnings,
    step_alone,
)
from guard.policy_review import plan_reviews
from members.models import Member
from plans.models import Plan
from policies.models import Policy
from policies.selectors import policy_active_version
from policies.services import policy_document_validate

#: plans read per query while checking
CHUNK_SIZE: Final = 1000
#: step verdicts remembered while checking (the same step, for the same role and groups)
MAX_REMEMBERED_VERDICTS: Final = 10_000
#: affected plans listed by default (all are counted)
DEFAULT_LISTED: Final = 100


@dataclass(frozen=True)
class RefusedStep:
    """A step of a plan that the document refuses. ``index`` counts from 0, as the
    ``plan.steps[0]`` paths of a ``policy_denied`` answer do; ``rule`` None is the default."""

    index: int
    tool: str
    rule: int | None
    reason: str
    #: ``steps[<index>]``, or ``steps[<index>].args.<name>`` for the argument no admitting
    #: rule lets through, as the ``policy_denied`` answer names it (under ``plan.``)
    path: str = ""

    @classmethod
    def from_denial(cls, denial: StepDenial) -> RefusedStep:
        """The guard's evaluation's refusal of a step, as the control plane shows it."""
        return cls(
            index=denial.step,
            tool=denial.tool,
            rule=denial.rule,
            reason=denial.reason,
            path=denial.path,
        )

    @property
    def number(self) -> int:
        """The step as people count it, from 1."""
        return self.index + 1

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "tool": self.tool,
            "rule": self.rule,
            "reason": self.reason,
            "path": self.path,
        }


@dataclass(frozen=True)
class LivePlanShown:
    """A live plan as the preview names it: which plan, whose, under which role and groups
    (those its next refresh would read)."""

    id: str
    goal: str
    agent_id: str
    agent: str
    member_id: int
    user: str
    role: str | None
    groups: tuple[str, ...]

    @staticmethod
    def fields_of(plan: _LivePlan, role: str | None, groups: tuple[str, ...]) -> dict[str, Any]:
        return {
            "id": plan.id,
            "goal": plan.goal,
            "agent_id": plan.agent_id,
            "agent": plan.agent,
            "member_id": plan.member_id,
            "user": plan.user,
            "role": role,
            "groups": groups,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent": self.agent,
            "user": self.user,
            "role": self.role,
            "groups": list(self.groups),
        }


@dataclass(frozen=True)
class AffectedPlan(LivePlanShown):
    """A live plan whose next refresh the document would refuse, and whose it is."""

    steps: tuple[RefusedStep, ...]

    def as_json(self) -> dict[str, Any]:
        return {**super().as_json(), "steps": [step.as_json() for step in self.steps]}


@dataclass(frozen=True)
class WarnedStep:
    """An argument of a step of a live plan for which the document would refuse some
    calls: ``path`` is ``steps[<index>].args.<name>``, as the ``warnings`` of a refresh name
    it (under ``plan.``); ``rule`` is the first rule concerned."""

    index: int
    tool: str
    path: str
    code: str
    rule: int
    detail: str

    @classmethod
    def from_warning(cls, warning: StepWarning) -> WarnedStep:
        return cls(
            index=warning.step,
            tool=warning.tool,
            path=warning.path,
            code=warning.code,
            rule=warning.rule,
            detail=warning.detail,
        )

    @property
    def number(self) -> int:
        """The step as people count it, from 1."""
        return self.index + 1

    def as_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "tool": self.tool,
            "path": self.path,
            "code": self.code,
            "rule": self.rule,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class WarnedPlan(LivePlanShown):
    """A live plan the document would still renew, some of whose calls it would refuse."""

    warnings: tuple[WarnedStep, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            **super().as_json(),
            "warnings": [warning.as_json() for warning in self.warnings],
        }


@dataclass(frozen=True)
class PolicyImpact:
    """The effect of publishing ``document`` over the policy's ``current_version`` (None
    when nothing is published yet): ``plans_checked`` live plans, of which
    ``plans_affected`` would be refused; ``plans`` lists the first of those, by plan id.
    Of the others, ``plans_warned`` would see some of their calls refused; ``warned``
    lists the first of those."""

    policy: Policy
    document: dict[str, Any]
    current_version: int | None
    plans_checked: int
    plans_affected: int
    plans: tuple[AffectedPlan, ...]
    plans_warned: int = 0
    warned: tuple[WarnedPlan, ...] = ()

    @property
    def listed_all(self) -> bool:
        return len(self.plans) == self.plans_affected

    @property
    def listed_all_warned(self) -> bool:
        return len(self.warned) == self.plans_warned

    def as_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy.slug,
            "currentVersion": self.current_version,
            "plansChecked": self.plans_checked,
            "plansAffected": self.plans_affected,
            "plans": [plan.as_json() for plan in self.plans],
            "plansWarned": self.plans_warned,
            "warned": [plan.as_json() for plan in self.warned],
        }


def live_plans_of_policy(*, policy: Policy, now: datetime | None = None):
    """The plans that a refresh would renew today and that read ``policy`` when it does."""
    return Plan.objects.filter(
        team_id=policy.team_id,
        agent__policy=policy,
        agent__is_active=True,
        member__is_active=True,
        status=Plan.Status.ACTIVE,
        expires_at__gt=now or timezone.now(),
    )


class _LivePlan(NamedTuple):
    """What the check reads of a live plan: plain values, no model instances (a chunk of
    1,000 plans would otherwise build thousands of agents, members and groups)."""

    id: str
    goal: str
    document: dict[str, Any]
    agent_id: str
    agent: str
    member_id: int
    user: str
    role: str | None
    #: the steps a person approved (plans.approvals), as the plan keeps them
    review: list[dict[str, Any]]


def _chunks(policy: Policy, now: datetime) -> Iterator[list[tuple[_LivePlan, tuple[str, ...]]]]:
    """The live plans in id order, ``CHUNK_SIZE`` at a time, each with its member's sorted
    group names: two queries per chunk."""
    live = (
        live_plans_of_policy(policy=policy, now=now)
        .order_by("pk")
        .values_list(
            "id",
            "goal",
            "document",
            "agent_id",
            "agent__name",
            "member_id",
            "member__email",
            "member__role__name",
            "review",
        )
    )
    after = ""
    while True:
        chunk = [_LivePlan(*row) for row in live.filter(pk__gt=after)[:CHUNK_SIZE]]
        if not chunk:
            return
        groups: dict[int, list[str]] = defaultdict(list)
        memberships = Member.groups.through.objects.filter(
            member_id__in={plan.member_id for plan in chunk}
        ).values_list("member_id", "group__name")
        for member_id, name in memberships:
            groups[member_id].append(name)
        # Sorted, as a token carries them (Member.group_names).
        yield [(plan, tuple(sorted(groups[plan.member_id]))) for plan in chunk]
        after = chunk[-1].id


def member_role_and_groups(member: Member) -> tuple[str | None, tuple[str, ...]]:
    """The role name and sorted group names, as a token signed now would carry them."""
    return (member.role.name if member.role else None), tuple(member.group_names())


class _Verdict(NamedTuple):
    """What the document does to one step: its refusal (None: admitted), whether that
    refusal is a review's (which an approval lifts), and its warnings."""

    denial: StepDenial | None
    review: bool
    warnings: tuple[StepWarning, ...]


_ADMITTED: Final = _Verdict(None, False, ())


class _StepVerdicts:
    """``evaluate_plan``'s verdicts, remembered per step. It judges each step on its own
    (one StepDenial per refused step, whose reason does not depend on the step's place), and
    plans repeat steps far more than whole step lists: a step seen before, for the same role
    and groups, is not evaluated again. At most MAX_REMEMBERED_VERDICTS are kept. The
    warnings of an admitted step (``plan_argument_warnings``) are remembered alike."""

    def __init__(self, policy: dict[str, Any]) -> None:
        self.policy = policy
        self.known: dict[tuple[str, str | None, tuple[str, ...]], _Verdict] = {}

    def _judge(self, alone: dict[str, Any], role: str | None, groups: tuple[str, ...]) -> _Verdict:
        """The refusal of a step, given ``alone`` (with the budgets covering it: its plan's
        guard.policy_evaluation.step_alone); or, for an admitted step a review rule sends to
        a person, that review as a refusal that an approval of the step lifts; and the
        warnings of an admitted step."""
        denials = evaluate_plan(self.policy, alone, role=role, groups=groups)
        if denials:
            return _Verdict(denials[0], False, ())
        warnings = tuple(
            plan_argument_warnings(self.policy, alone, role=role, groups=groups, denials=())
        )
        reviews = plan_reviews(self.policy, alone, role=role, groups=groups, denials=())
        if not reviews:
            return _Verdict(None, False, warnings) if warnings else _ADMITTED
        review = reviews[0]
        reason = f"{review.description} asks a person to approve it (approval_required)"
        return _Verdict(StepDenial(0, review.tool, review.rule, reason), True, warnings)

    def _verdict(
        self, alone: dict[str, Any], role: str | None, groups: tuple[str, ...]
    ) -> _Verdict:
        key = (json.dumps(alone, sort_keys=True), role, groups)
        verdict = self.known.get(key)
        if verdict is None:
            verdict = self._judge(alone, role, groups)
            if len(self.known) >= MAX_REMEMBERED_VERDICTS:
                self.known.clear()  # memory stays bounded however varied the steps
            self.known[key] = verdict
        return verdict

    def judge(
        self,
        plan: dict[str, Any],
        role: str | None,
        groups: tuple[str, ...],
        approved: frozenset[int] = frozenset(),
    ) -> tuple[list[StepDenial], list[StepWarning]]:
        """The steps refused at the next refresh (denied, or under review and not among
        the ``approved`` steps: plans.approvals.approval_still_covers), and the warnings
        of the steps it admits."""
        denials: list[StepDenial] = []
        warnings: list[StepWarning] = []
        for index in range(len(plan["steps"])):
            verdict = self._verdict(step_alone(plan, index), role, groups)
            if verdict.denial is not None and not (verdict.review and index in approved):
                denials.append(replace(verdict.denial, step=index))
            else:
                warnings.extend(replace(warning, step=index) for warning in verdict.warnings)
        return denials, warnings

    def denials(
        self,
        plan: dict[str, Any],
        role: str | None,
        groups: tuple[str, ...],
        approved: frozenset[int] = frozenset(),
    ) -> list[StepDenial]:
        """The steps refused at the next refresh (see `judge`)."""
        return self.judge(plan, role, groups, approved)[0]


def policy_impact(
    *,
    policy: Policy,
    document: object,
    limit: int = DEFAULT_LISTED,
    now: datetime | None = None,
) -> PolicyImpact:
    """What publishing ``document`` as ``policy``'s next version would refuse among the
    team's live plans. DomainError ``invalid_policy`` (with paths) for a bad document,
    exactly as publishing it would answer."""
    normalized = policy_document_validate(document)
    now = now or timezone.now()
    current = policy_active_version(policy=policy)
    verdicts = _StepVerdicts(normalized)
    checked = affected = warned = 0
    listed: list[AffectedPlan] = []
    listed_warned: list[WarnedPlan] = []
    for chunk in _chunks(policy, now):
        for plan, groups in chunk:
            checked += 1
            role = plan.role
            approved = frozenset(entry["step"] for entry in plan.review)
            denials, warnings = verdicts.judge(plan.document, role, groups, approved)
            if denials:
                affected += 1
                if len(listed) < limit:
                    listed.append(_affected(plan, role, groups, denials))
            elif warnings:
                warned += 1
                if len(listed_warned) < limit:
                    listed_warned.append(_warned(plan, role, groups, warnings))
    return PolicyImpact(
        policy=policy,
        document=normalized,
        current_version=current.number if current else None,
        plans_checked=checked,
        plans_affected=affected,
        plans=tuple(listed),
        plans_warned=warned,
        warned=tuple(listed_warned),
    )


def _affected(
    plan: _LivePlan, role: str | None, groups: tuple[str, ...], denials: list[StepDenial]
) -> AffectedPlan:
    return AffectedPlan(
        **LivePlanShown.fields_of(plan, role, groups),
        steps=tuple(RefusedStep.from_denial(denial) for denial in denials),
    )


def _warned(
    plan: _LivePlan, role: str | None, groups: tuple[str, ...], warnings: list[StepWarning]
) -> WarnedPlan:
    return WarnedPlan(
        **LivePlanShown.fields_of(plan, role, groups),
        warnings=tuple(WarnedStep.from_warning(warning) for warning in warnings),
    )


def impact_json(impact: PolicyImpact) -> dict[str, Any]:
    """The preview's JSON, each step's ``index`` (from 0, as the ``steps[0]`` paths) beside
    its ``number`` (from 1, as the preview page and every surface a person reads count it,
    docs/decisions/0058), refused steps and warned ones alike."""
    answer = impact.as_json()
    answer["plans"] = [
        {
            **plan.as_json(),
            "steps": [
                {"index": step.index, "number": step.number, **step.as_json()}
                for step in plan.steps
            ],
        }
        for plan in impact.plans
    ]
    answer["warned"] = [
        {
            **plan.as_json(),
            "warnings": [
                {"index": warning.index, "number": warning.number, **warning.as_json()}
                for warning in plan.warnings
            ],
        }
        for plan in impact.warned
    ]
    return answer


def impact_report(
    *, policy: Policy | None, slug: str, document: object, limit: int = DEFAULT_LISTED
) -> dict[str, Any]:
    """The preview's JSON (``impact_json``) of publishing ``document`` as policy ``slug``;
    ``policy`` None is a policy not created yet, which no agent points at, so no plan
    reads it: the document is only validated. The one answer of ``manage.py preview_policy``
    and ``POST /v1/admin/policies/{slug}/preview``."""
    if policy is None:
        policy_document_validate(document)
        return {
            "policy": slug,
            "currentVersion": None,
            "plansChecked": 0,
            "plansAffected": 0,
            "plans": [],
            "plansWarned": 0,
            "warned": [],
        }
    return impact_json(policy_impact(policy=policy, document=document, limit=limit))
