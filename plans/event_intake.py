"""The guard's decision log, received: ``POST /v1/plans/{id}/events``.

A batch is validated whole by the guard's own declaration of it (guard.events) before
anything is written, then stored in one transaction with its audit records:

* exactly once: the batch's row (PlanEventBatch) is inserted first, and the unique
  (plan, stream, seq) constraint refuses a batch received before, even when the guard's
  two attempts arrive at the same time: the second then writes nothing and is answered
  with the first one's counts and ``duplicate: true``. A number that skips ahead is
  accepted (the batches between were given up by the guard, which counts their decisions
  in ``lost``): the gap stays visible in the plan's batches;
* one ``decision`` audit record per event, with its step, rule and policy version;
* ``lost``: added to Plan.decisions_lost, with a ``decisions_lost`` record;
* ``end``: the plan becomes completed, ended or token_refused (only from active: an admin's
  revocation is never undone), with a ``plan_ended`` record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_build, records_append
from guard.decisions import PlanOutcome
from guard.errors import DocumentInvalid, FieldError
from guard.events import EventBatch, GuardEvent, PlanEnd, validate_event_batch
from kernel.problems import DomainError
from members.models import Agent

from .models import Plan, PlanDisplayUpdate, PlanEvent, PlanEventBatch, PlanToken
from .records import agent_actor
from .services import plan_get_for_agent

__all__ = ["RecordedEvents", "plan_events_record"]

# Plan.decisions_lost is a 32-bit column on every database; it saturates rather than fail.
_MAX_DECISIONS_LOST = 2**31 - 1
_STATUS_OF_OUTCOME = {
    PlanOutcome.COMPLETED: Plan.Status.COMPLETED,
    PlanOutcome.ENDED: Plan.Status.ENDED,
    PlanOutcome.TOKEN_REFUSED: Plan.Status.TOKEN_REFUSED,
}


@dataclass(frozen=True)
class RecordedEvents:
    """What a batch stored, or (`duplicate`) what the same batch stored when it first came."""

    events: int
    display_updates: int
    arguments_stored: bool
    lost: int = 0
    duplicate: bool = False
    #: the plan's status set by the batch's end, "" when it set none
    status: str = ""


def plan_events_record(*, agent: Agent, plan_id: str, batch: object) -> RecordedEvents:
    """Store a batch of guard decisions and ACP plan updates for the agent's own plan.

    Call arguments are kept only when the team asks for them; otherwise only their digest
    is. Refusals: ``plan_not_found``, ``invalid_events`` (each bad path listed).
    """
    plan = plan_get_for_agent(agent=agent, plan_id=plan_id)
    try:
        valid = validate_event_batch(batch, steps=len(plan.document["steps"]))
    except DocumentInvalid as exc:
        raise DomainError("invalid_events", "The batch is not valid.", errors=exc.errors) from exc
    slugs = _policy_versions(plan, valid.events)
    keep_arguments = plan.team.log_call_arguments
    now = timezone.now()
    received = PlanEventBatch(
        plan=plan,
        stream=valid.stream or "",
        seq=valid.seq,
        received_at=now,
        events=len(valid.events),
        display_updates=len(valid.display_updates),
        lost=valid.lost,
        end_outcome=valid.end.outcome.value if valid.end is not None else "",
        arguments_stored=keep_arguments,
    )
    with transaction.atomic():
        try:
            with transaction.atomic():  # a savepoint: the duplicate leaves the rest usable
                received.save(force_insert=True)
        except IntegrityError:
            return _duplicate(plan, valid)
        PlanEvent.objects.bulk_create(
            PlanEvent(
                plan=plan,
                batch=received,
                occurred_at=event.occurred_at,
                tool=event.tool,
                decision=event.decision.value,
                step=event.step,
                reason=event.reason,
                rule_index=event.rule.index if event.rule is not None else None,
                rule_description=event.rule.description if event.rule is not None else "",
                policy_version=event.policy_version,
                args_digest=event.args_digest,
                args=event.args if keep_arguments else None,
            )
            for event in valid.events
        )
        PlanDisplayUpdate.objects.bulk_create(
            PlanDisplayUpdate(plan=plan, occurred_at=update.occurred_at, message=update.message)
            for update in valid.display_updates
        )
        records = [_decision_record(plan, agent, event, slugs) for event in valid.events]
        if valid.lost:
            Plan.objects.filter(pk=plan.pk).update(
                decisions_lost=Least(F("decisions_lost") + valid.lost, _MAX_DECISIONS_LOST)
            )
            records.append(_lost_record(plan, agent, received))
        status = ""
        if valid.end is not None:
            status = _end(plan, valid.end, now)
            records.append(_ended_record(plan, agent, valid.end, status, now))
        records_append(records)
    return RecordedEvents(
        events=len(valid.events),
        display_updates=len(valid.display_updates),
        arguments_stored=keep_arguments,
        lost=valid.lost,
        status=status,
    )


def _duplicate(plan: Plan, batch: EventBatch) -> RecordedEvents:
    first = PlanEventBatch.objects.get(plan=plan, stream=batch.stream, seq=batch.seq)
    return RecordedEvents(
        events=first.events,
        display_updates=first.display_updates,
        arguments_stored=first.arguments_stored,
        lost=first.lost,
        duplicate=True,
    )


def _policy_versions(plan: Plan, events: Iterable[GuardEvent]) -> dict[int, str]:
    """Policy version number -> policy slug, for the versions the plan's tokens carried.
    An event naming a version that no token of the plan carried is refused."""
    slugs = {plan.policy_version.number: plan.policy_version.policy.slug}
    claimed = {event.policy_version for event in events} - {None} - slugs.keys()
    if claimed:
        slugs.update(
            PlanToken.objects.filter(plan=plan)
            .order_by("issued_at", "id")
            .values_list("policy_version__number", "policy_version__policy__slug")
        )
    errors = [
        FieldError(f"events[{index}].policyVersion", "no token of this plan carried it")
        for index, event in enumerate(events)
        if event.policy_version is not None and event.policy_version not in slugs
    ]
    if errors:
        raise DomainError("invalid_events", "The batch is not valid.", errors=errors)
    return slugs


def _common(plan: Plan, agent: Agent) -> dict[str, Any]:
    return {
        "team": plan.team_id,
        "actor": agent_actor(agent),
        "agent_id": agent.pk,
        "agent_name": agent.name,
        "user": plan.member.email,
        "plan_id": plan.id,
        "plan_hash": plan.hash,
    }


def _decision_record(
    plan: Plan, agent: Agent, event: GuardEvent, slugs: dict[int, str]
) -> AuditRecord:
    version = event.policy_version or plan.policy_version.number
    return record_build(
        **_common(plan, agent),
        kind=AuditRecord.Kind.DECISION,
        at=event.occurred_at,
        policy=slugs[version],
        policy_version=version,
        code=event.decision.value,
        rule=(
            {"index": event.rule.index, "description": event.rule.description}
            if event.rule is not None
            else None
        ),
        # `step` is the index into the plan's steps, from 0, as on the wire.
        details={
            "tool": event.tool,
            "step": event.step,
            "reason": event.reason,
            "argsDigest": event.args_digest,
        },
    )


def _lost_record(plan: Plan, agent: Agent, received: PlanEventBatch) -> AuditRecord:
    return record_build(
        **_common(plan, agent),
        kind=AuditRecord.Kind.DECISIONS_LOST,
        at=received.received_at,
        policy=plan.policy_version.policy.slug,
        policy_version=plan.policy_version.number,
        code="decisions_lost",
        details={
            "lost": received.lost,
            "detail": f"{received.lost} decision(s) were not delivered by the agent's guard",
            "stream": received.stream,
            "seq": received.seq,
        },
    )


def _end(plan: Plan, end: PlanEnd, now: datetime) -> str:
    """Set the plan's end, only from active; the status it has now."""
    status = _STATUS_OF_OUTCOME[end.outcome]
    changed = Plan.objects.filter(pk=plan.pk, status=Plan.Status.ACTIVE).update(
        status=status, ended_at=now, end_reason=end.reason
    )
    if changed:
        return str(status)
    return str(Plan.objects.filter(pk=plan.pk).values_list("status", flat=True).get())


def _ended_record(
    plan: Plan, agent: Agent, end: PlanEnd, status: str, now: datetime
) -> AuditRecord:
    return record_build(
        **_common(plan, agent),
        kind=AuditRecord.Kind.PLAN_ENDED,
        at=now,
        policy=plan.policy_version.policy.slug,
        policy_version=plan.policy_version.number,
        code=end.outcome.value,
        details={"outcome": end.outcome.value, "reason": end.reason, "status": status},
    )
