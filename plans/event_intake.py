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
* sent with the plan's intent token (plans.event_credentials, once the agent's API key is
  refused): the token vouches for decisions made up to its ``exp`` (plus the clock skew
  allowed); later ones are not stored but counted in ``lost`` with the rest (0054);
* ``end``: the plan becomes completed, ended or token_refused (only from active: an admin's
  revocation is never undone), with a ``plan_ended`` record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Least
from django.utils import timezone

from audit.models import AuditRecord
from audit.services import record_build, records_append
from guard.claims import IntentClaims
from guard.decisions import PlanOutcome
from guard.errors import DocumentInvalid, FieldError
from guard.events import EventBatch, GuardEvent, PlanEnd, validate_event_batch
from kernel.problems import Code, DomainError
from kernel.sql import row_insert_if_new, rows_insert
from members.models import Agent
from policies.models import PolicyVersion

from .decided_under import TokenVersion, decided_under
from .lineage import descendants_end
from .models import Plan, PlanDisplayUpdate, PlanEvent, PlanEventBatch, PlanToken
from .records import agent_actor
from .services import plan_get_for_agent
from .shadow import shadow_calls_record

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


def plan_events_record(
    *,
    agent: Agent,
    plan_id: str,
    batch: object,
    token: IntentClaims | None = None,
    holder: Callable[[Plan], object] | None = None,
) -> RecordedEvents:
    """Store a batch of guard decisions and ACP plan updates for the agent's own plan.

    Call arguments are kept only when the team asks for them; otherwise only their digest
    is. ``token``: the verified claims of the intent token the batch was sent with instead
    of an API key; it must be this plan's, and decisions (and display updates) made after
    its expiry are not stored but counted as lost. Refusals: ``plan_not_found``,
    ``plan_mismatch`` (another plan's token), ``invalid_events`` (each bad path listed).
    ``holder`` checks the request's right to the plan once it is read (plans.dpop: a bound
    plan's batches need a DPoP proof by its key), before anything is written.
    """
    plan = plan_get_for_agent(agent=agent, plan_id=plan_id)
    if holder is not None:
        holder(plan)
    try:
        valid = validate_event_batch(
            batch,
            steps=len(plan.document["steps"]),
            budgets={budget["id"] for budget in plan.document.get("budgets", ())},
        )
    except DocumentInvalid as exc:
        raise DomainError(
            Code.INVALID_EVENTS, "The batch is not valid.", errors=exc.errors
        ) from exc
    if token is not None:
        valid = _vouched_by(token, plan, valid)
    versions = _policy_versions(plan, valid.events)
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
        credential=(
            PlanEventBatch.Credential.API_KEY
            if token is None
            else PlanEventBatch.Credential.PLAN_TOKEN
        ),
    )
    with transaction.atomic():
        # One statement that inserts nothing for a batch received before (kernel.sql).
        if not row_insert_if_new(received):
            return _duplicate(plan, valid)
        decided = [versions.decided_under(event) for event in valid.events]
        _events_insert(plan, received, valid.events, decided, keep_arguments)
        if valid.display_updates:
            PlanDisplayUpdate.objects.bulk_create(
                PlanDisplayUpdate(plan=plan, occurred_at=update.occurred_at, message=update.message)
                for update in valid.display_updates
            )
        _decision_records_insert(plan, agent, valid.events, decided, versions)
        if any(event.shadow is not None for event in valid.events):
            shadow_calls_record(
                team_id=plan.team_id,
                plan_id=plan.id,
                agent_id=agent.pk,
                events=valid.events,
                decided=decided,
                versions=_shadow_versions(plan, valid.events),
            )
        records = []
        if valid.lost:
            Plan.objects.filter(pk=plan.pk).update(
                decisions_lost=Least(F("decisions_lost") + valid.lost, _MAX_DECISIONS_LOST)
            )
            records.append(_lost_record(plan, agent, received))
        status = ""
        if valid.end is not None:
            status = _end(plan, valid.end, now)
            records.append(_ended_record(plan, agent, valid.end, status, now))
            # Its child plans, and theirs, end with it (plans.lineage).
            records += descendants_end(plan, status=status, actor=agent_actor(agent), now=now)
        if records:
            records_append(records)
    return RecordedEvents(
        events=len(valid.events),
        display_updates=len(valid.display_updates),
        arguments_stored=keep_arguments,
        lost=valid.lost,
        status=status,
    )


def _vouched_by(token: IntentClaims, plan: Plan, batch: EventBatch) -> EventBatch:
    """What of ``batch`` the plan's intent token ``token`` vouches for: refused whole when it
    is another plan's (or carries another hash); decisions and display updates made after
    its expiry (beyond the clock skew allowed) are left out, those decisions counted as
    lost. The guard sends the newest token of the plan it holds, so only what it decided
    after that token expired (it could no longer refresh) is left out."""
    if token.jti != plan.id:
        raise DomainError(Code.PLAN_MISMATCH, "The token belongs to another plan.")
    if token.ph != plan.hash:
        raise DomainError(Code.PLAN_MISMATCH, "The token carries another plan hash.")
    until = datetime.fromtimestamp(token.exp + settings.PLANGATE_CLOCK_SKEW, tz=UTC)
    events = tuple(event for event in batch.events if event.occurred_at <= until)
    late = len(batch.events) - len(events)
    if not late and all(
        update.occurred_at is None or update.occurred_at <= until
        for update in batch.display_updates
    ):
        return batch
    return replace(
        batch,
        events=events,
        display_updates=tuple(
            update
            for update in batch.display_updates
            if update.occurred_at is not None and update.occurred_at <= until
        ),
        lost=min(batch.lost + late, _MAX_DECISIONS_LOST),
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


@dataclass(frozen=True)
class PlanVersions:
    """What the plan's tokens say of the policy versions its decisions were made under:
    read once per batch, in one query."""

    plan_version_id: int
    #: the plan's tokens, oldest first, as ``decided_under`` reads them
    tokens: tuple[TokenVersion, ...]
    #: PolicyVersion id -> (policy slug, version number), for every version named here
    named: dict[int, tuple[str, int]]

    def decided_under(self, event: GuardEvent) -> int:
        """The id of the version ``event`` was made under (plans.decided_under's rule)."""
        return decided_under(
            tokens=self.tokens,
            plan_version_id=self.plan_version_id,
            reported=event.policy_version,
            occurred_at=event.occurred_at,
        )


def _policy_versions(plan: Plan, events: Sequence[GuardEvent]) -> PlanVersions:
    """The plan's tokens and the versions they carried. An event naming a version number
    that neither the plan nor any token of it carried is refused."""
    issued_with = plan.policy_version
    named = {issued_with.pk: (issued_with.policy.slug, issued_with.number)}
    tokens = []
    for issued_at, pk, version_id, number, slug in (
        PlanToken.objects.filter(plan=plan)
        .order_by("issued_at", "id")
        .values_list(
            "issued_at",
            "id",
            "policy_version_id",
            "policy_version__number",
            "policy_version__policy__slug",
        )
    ):
        tokens.append(TokenVersion(issued_at, pk, version_id, number))
        named[version_id] = (slug, number)
    numbers = {number for _, number in named.values()}
    errors = [
        FieldError(f"events[{index}].policyVersion", "no token of this plan carried it")
        for index, event in enumerate(events)
        if event.policy_version is not None and event.policy_version not in numbers
    ]
    if errors:
        raise DomainError(Code.INVALID_EVENTS, "The batch is not valid.", errors=errors)
    return PlanVersions(plan_version_id=issued_with.pk, tokens=tuple(tokens), named=named)


def _shadow_versions(plan: Plan, events: Sequence[GuardEvent]) -> dict[int, PolicyVersion]:
    """The shadow versions of the plan's policy that the events' shadow answers name, by
    number (a number names one version of a policy)."""
    numbers = {event.shadow.policy_version for event in events if event.shadow is not None}
    rows = PolicyVersion.objects.filter(
        policy__versions=plan.policy_version_id, shadow=True, number__in=numbers
    )
    return {row.number: row for row in rows}


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


def _decision_fields(
    event: GuardEvent, version_id: int, versions: PlanVersions
) -> tuple[datetime, str, int, str, dict[str, Any] | None, dict[str, Any]]:
    """What a ``decision`` record says of one event made under policy version
    ``version_id``, beyond what every record of the batch shares (``_common``): the values
    of DECISION_RECORD_FIELDS, in that order."""
    slug, number = versions.named[version_id]
    return (
        event.occurred_at,
        slug,
        number,
        event.decision.value,
        (
            {"index": event.rule.index, "description": event.rule.description}
            if event.rule is not None
            else None
        ),
        # `step` is the index into the plan's steps, from 0, as on the wire; `stepIndex`
        # says so by its name, beside `stepNumber`, from 1, as every page, export and
        # guard message counts (docs/decisions/0058).
        {
            "tool": event.tool,
            "step": event.step,
            "stepIndex": event.step,
            "stepNumber": None if event.step is None else event.step + 1,
            "reason": event.reason,
            "argsDigest": event.args_digest,
            # What the version tried in shadow would have decided, where it differs.
            **({"shadow": event.shadow.to_json()} if event.shadow is not None else {}),
        },
    )


#: the fields of a decision record that differ from event to event (``_decision_fields``)
DECISION_RECORD_FIELDS = ("at", "policy", "policy_version", "code", "rule", "details")
#: the fields of a stored event that differ from event to event (``_event_fields``)
EVENT_FIELDS = (
    "occurred_at",
    "tool",
    "decision",
    "step",
    "reason",
    "rule_index",
    "rule_description",
    "policy_version",
    "decided_under",
    "args_digest",
    "args",
    "amounts",
)


def _event_fields(event: GuardEvent, version_id: int, keep_arguments: bool) -> tuple[Any, ...]:
    """The values of EVENT_FIELDS for one event made under policy version ``version_id``."""
    return (
        event.occurred_at,
        event.tool,
        event.decision.value,
        event.step,
        event.reason,
        event.rule.index if event.rule is not None else None,
        event.rule.description if event.rule is not None else "",
        event.policy_version,
        version_id,
        event.args_digest,
        event.args if keep_arguments else None,
        event.amounts,
    )


def _events_insert(
    plan: Plan,
    received: PlanEventBatch,
    events: Sequence[GuardEvent],
    decided: Sequence[int],
    keep_arguments: bool,
) -> None:
    """The events, each with the id of the policy version it was made under (``decided``,
    in the same order)."""
    template = PlanEvent(plan=plan, batch=received)  # received_at: auto_now_add
    rows_insert(
        template,
        EVENT_FIELDS,
        [
            _event_fields(event, version_id, keep_arguments)
            for event, version_id in zip(events, decided, strict=True)
        ],
    )


def _decision_records_insert(
    plan: Plan,
    agent: Agent,
    events: Sequence[GuardEvent],
    decided: Sequence[int],
    versions: PlanVersions,
) -> None:
    """One ``decision`` audit record per event: what the batch's records share is built
    once by the trail's own ``record_build``, the rest per event."""
    template = record_build(**_common(plan, agent), kind=AuditRecord.Kind.DECISION)
    rows_insert(
        template,
        DECISION_RECORD_FIELDS,
        [
            _decision_fields(event, version_id, versions)
            for event, version_id in zip(events, decided, strict=True)
        ],
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
            "credential": received.credential,
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
