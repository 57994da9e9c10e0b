"""Alerts: a team's rules (``AlertRule``), and the facts that fire them (docs/decisions/0082).

Every fact an alert watches is already written once, in one place, and all but one of them
land in the team's audit trail:

| rule kind | the fact | where it is written |
| --- | --- | --- |
| ``blocked_calls`` | ``decision`` records whose code is not ``allowed`` | plans.event_intake |
| ``disabled_member_declaration`` | ``plan_refused`` with code ``user_disabled`` | plans.api |
| ``token_refused`` | ``plan_ended`` with code ``token_refused`` | plans.event_intake |
| ``decisions_lost`` | ``decisions_lost`` records | plans.event_intake |
| ``approval_waiting`` | a plan still ``pending_approval`` past M minutes | plans.approvals |
| ``key_rotation_failed`` | the rotation task's failure (no row: a signal) | plans.tasks |

So the scan (``alerts_scan``, a beat task) reads each team's trail after a cursor: the
sealed sequence number ``seq``, which the sealer hands out in order per team. A record
committed late is sealed late, so nothing is skipped, and event intake, the hot path,
does not do one more thing. Rotation failures have no row to read: ``plans.tasks`` sends
``signing_key_rotation_failed`` and ``key_rotation_failed_raise`` fires from it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.utils import quote
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import F, Max
from django.urls import reverse
from django.utils import timezone

from audit.changes import change_append
from audit.models import AuditRecord
from guard.decisions import Decision
from guard.errors import FieldError
from kernel.problems import Code, DomainError
from members.models import Member
from plans.approvals import approval_queue_url, plans_awaiting_approval

from .models import Alert, AlertCursor, AlertRule, TeamSlack, TeamWebhook

logger = logging.getLogger(__name__)

Kind = AlertRule.Kind
Channel = AlertRule.Channel

#: how many sequence numbers of one team's trail one scan reads at most
SCAN_BATCH = 5000
#: the subject of the signing keys' alerts (keys belong to no team)
SIGNING_KEYS_SUBJECT = "signing-keys"

#: which audit records each kind reads: (kind of record, code or None for any)
_FACTS: dict[str, tuple[str, str | None]] = {
    Kind.DISABLED_MEMBER_DECLARATION: (AuditRecord.Kind.PLAN_REFUSED, "user_disabled"),
    Kind.TOKEN_REFUSED: (AuditRecord.Kind.PLAN_ENDED, "token_refused"),
    Kind.DECISIONS_LOST: (AuditRecord.Kind.DECISIONS_LOST, None),
}


def console_url(name: str, *args: Any) -> str:
    """The absolute address of an admin page (``admin:...``), as alerts link to it."""
    path = reverse(name, args=[quote(arg) for arg in args])
    return settings.PLANGATE_ISSUER.rstrip("/") + path


# --- rules --------------------------------------------------------------------------


def _rule_errors(rule: AlertRule) -> list[FieldError]:
    errors = []
    channels = rule.channels if isinstance(rule.channels, list) else None
    known = set(Channel.values)
    if not channels or any(channel not in known for channel in channels):
        errors.append(FieldError("channels", f"choose one or more of {', '.join(Channel.values)}"))
        channels = []
    if rule.kind not in Kind.values:
        errors.append(FieldError("kind", f"one of {', '.join(Kind.values)}"))
    for field in ("threshold", "window_minutes", "wait_minutes", "dedup_minutes"):
        value = getattr(rule, field)
        if not isinstance(value, int) or not 1 <= value <= 100_000:
            errors.append(FieldError(field, "a whole number from 1 to 100000"))
    if Channel.EMAIL in channels:
        recipients = rule.email_recipients()
        if not recipients:
            errors.append(FieldError("email_to", "the e-mail channel needs an address"))
        for address in recipients:
            try:
                validate_email(address)
            except ValidationError:
                errors.append(FieldError("email_to", f"{address!r} is not an e-mail address"))
    if Channel.WEBHOOK in channels and not TeamWebhook.objects.filter(team=rule.team_id).exists():
        errors.append(FieldError("channels", "the team has no webhook: add one first"))
    if Channel.SLACK in channels and not TeamSlack.objects.filter(team=rule.team_id).exists():
        errors.append(FieldError("channels", "the team has no Slack connection: add one first"))
    return errors


def alert_rule_save(*, rule: AlertRule) -> AlertRule:
    """Create or update ``rule`` after checking it (``invalid_request``, each bad field
    named; nothing written). A team's first rule starts its scan cursor at the trail's
    present end: rules alert about what happens from now on."""
    errors = _rule_errors(rule)
    if errors:
        raise DomainError(Code.INVALID_REQUEST, "The alert rule is not valid.", errors=errors)
    created = rule._state.adding
    with transaction.atomic():
        rule.updated_at = timezone.now()
        rule.save()
        _cursor_start(rule.team_id)
        change_append(
            team=rule.team,
            object_type="alert_rule",
            object_id=rule.pk,
            name=rule.kind,
            action="created" if created else "updated",
            changes={
                "kind": [None, rule.kind] if created else [rule.kind, rule.kind],
                "channels": [None, list(rule.channels)],
                "enabled": [None, rule.enabled],
            },
        )
    return rule


def _cursor_start(team_id: int) -> None:
    if AlertCursor.objects.filter(team_id=team_id).exists():
        return
    end = AuditRecord.objects.filter(team_id=team_id).aggregate(end=Max("seq"))["end"] or 0
    AlertCursor.objects.get_or_create(team_id=team_id, defaults={"last_seq": end})


# --- raising ------------------------------------------------------------------------


@dataclass(frozen=True)
class Raised:
    alert: Alert
    #: False: folded into an alert within the dedup window (its count went up)
    new: bool


def alert_raise(
    *,
    rule: AlertRule,
    subject: str,
    summary: str,
    url: str,
    details: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> Raised:
    """Fire ``rule`` for ``subject``. Within the rule's dedup window of an alert for the same
    subject, that alert counts one more and nothing is sent; otherwise a new alert is
    queued on each of the rule's channels once the transaction commits."""
    now = now or timezone.now()
    since = now - timedelta(minutes=rule.dedup_minutes)
    with transaction.atomic():
        # The rule's row serialises two scans racing on the same subject.
        AlertRule.objects.select_for_update().filter(pk=rule.pk).first()
        recent = (
            Alert.objects.filter(rule=rule, subject=subject, first_at__gte=since)
            .order_by("-first_at")
            .first()
        )
        if recent is not None:
            Alert.objects.filter(pk=recent.pk).update(count=F("count") + 1, last_at=now)
            recent.refresh_from_db()
            return Raised(alert=recent, new=False)
        alert = Alert.objects.create(
            team_id=rule.team_id,
            rule=rule,
            kind=rule.kind,
            subject=subject[:254],
            summary=summary[:500],
            url=url,
            details=details or {},
            first_at=now,
            last_at=now,
        )
        channels = list(rule.channels)
        transaction.on_commit(lambda: _queue_deliveries(alert, channels))
    return Raised(alert=alert, new=True)


def _queue_deliveries(alert: Alert, channels: Iterable[str]) -> None:
    from .tasks import deliver_alert

    for channel in channels:
        try:
            deliver_alert.apply_async(
                kwargs={
                    "alert_id": alert.pk,
                    "channel": channel,
                    "delivery_id": str(uuid.uuid4()),
                }
            )
        except Exception:
            # The broker is away: the alert stays in the console without this delivery.
            logger.exception("could not queue alert %s on %s", alert.pk, channel)


# --- the scan -----------------------------------------------------------------------


@dataclass(frozen=True)
class ScanResult:
    #: audit records read (of the kinds a rule watches)
    read: int
    #: alerts raised, new or folded into a recent one
    raised: int


def alerts_scan(*, now: datetime | None = None) -> ScanResult:
    """Read each team's audit trail since its cursor and raise what the team's enabled
    rules ask; then the waiting approvals. Safe to run twice at once: a team's cursor row
    is locked while its records are read."""
    now = now or timezone.now()
    read = raised = 0
    team_ids = set(AlertRule.objects.filter(enabled=True).values_list("team_id", flat=True))
    for team_id in sorted(team_ids):
        team_read, team_raised = _scan_team(team_id, now)
        read += team_read
        raised += team_raised
    raised += _scan_waiting_approvals(now)
    return ScanResult(read=read, raised=raised)


def _scan_team(team_id: int, now: datetime) -> tuple[int, int]:
    rules = list(AlertRule.objects.filter(team_id=team_id, enabled=True))
    by_kind: dict[str, list[AlertRule]] = {}
    for rule in rules:
        by_kind.setdefault(rule.kind, []).append(rule)
    _cursor_start(team_id)
    with transaction.atomic():
        cursor = AlertCursor.objects.select_for_update().get(team_id=team_id)
        end = (
            AuditRecord.objects.filter(team_id=team_id, seq__gt=cursor.last_seq).aggregate(
                end=Max("seq")
            )["end"]
            or cursor.last_seq
        )
        upto = min(end, cursor.last_seq + SCAN_BATCH)
        if upto == cursor.last_seq:
            return 0, 0
        window = AuditRecord.objects.filter(team_id=team_id, seq__gt=cursor.last_seq, seq__lte=upto)
        read = raised = 0
        for kind, (record_kind, code) in _FACTS.items():
            if kind not in by_kind:
                continue
            facts = window.filter(kind=record_kind)
            if code is not None:
                facts = facts.filter(code=code)
            for record in facts.order_by("seq"):
                read += 1
                for rule in by_kind[kind]:
                    alert_raise(rule=rule, now=now, **_describe(kind, record))
                    raised += 1
        if Kind.BLOCKED_CALLS in by_kind:
            plan_ids = set(
                window.filter(kind=AuditRecord.Kind.DECISION)
                .exclude(code=Decision.ALLOWED.value)
                .values_list("plan_id", flat=True)
            )
            read += len(plan_ids)
            for plan_id in sorted(plan_ids):
                for rule in by_kind[Kind.BLOCKED_CALLS]:
                    raised += _blocked_calls(rule, plan_id, now)
        AlertCursor.objects.filter(pk=cursor.pk).update(last_seq=upto, updated_at=now)
    return read, raised


def _blocked_calls(rule: AlertRule, plan_id: str, now: datetime) -> int:
    since = now - timedelta(minutes=rule.window_minutes)
    blocked = (
        AuditRecord.objects.filter(
            plan_id=plan_id, team_id=rule.team_id, kind=AuditRecord.Kind.DECISION, at__gte=since
        )
        .exclude(code=Decision.ALLOWED.value)
        .count()
    )
    if blocked <= rule.threshold:
        return 0
    alert_raise(
        rule=rule,
        now=now,
        subject=plan_id,
        summary=(
            f"Plan {plan_id}: {blocked} calls blocked in the last {rule.window_minutes}"
            f" minutes (over {rule.threshold})"
        ),
        url=console_url("admin:plans_plan_change", plan_id),
        details={"plan": plan_id, "blocked": blocked, "windowMinutes": rule.window_minutes},
    )
    return 1


def _describe(kind: str, record: AuditRecord) -> dict[str, Any]:
    """subject, summary, url and details of the alert ``record`` fires for ``kind``."""
    details: dict[str, Any] = {"record": record.pk, "seq": record.seq, "at": record.at.isoformat()}
    if kind == Kind.DISABLED_MEMBER_DECLARATION:
        member = Member.objects.filter(team_id=record.team_id, email__iexact=record.user).first()
        url = (
            console_url("admin:members_member_change", member.pk)
            if member is not None
            else console_url("admin:members_member_changelist")
        )
        return {
            "subject": record.user.casefold(),
            "summary": (
                f"Agent {record.agent_name or record.agent_id} declared a plan for the disabled"
                f" member {record.user}"
            ),
            "url": url,
            "details": {**details, "user": record.user, "agent": record.agent_id},
        }
    plan_url = console_url("admin:plans_plan_change", record.plan_id)
    if kind == Kind.TOKEN_REFUSED:
        reason = str((record.details or {}).get("reason", ""))
        return {
            "subject": record.plan_id,
            "summary": f"The guard of plan {record.plan_id} refused its token: {reason}"[:500],
            "url": plan_url,
            "details": {**details, "plan": record.plan_id, "reason": reason},
        }
    lost = (record.details or {}).get("lost", 0)
    return {
        "subject": record.plan_id,
        "summary": f"Plan {record.plan_id}: {lost} decision(s) were lost by the agent's guard",
        "url": plan_url,
        "details": {**details, "plan": record.plan_id, "lost": lost},
    }


def _scan_waiting_approvals(now: datetime) -> int:
    """Plans waiting for a person longer than a rule's M minutes: one alert per plan."""
    raised = 0
    rules = AlertRule.objects.filter(enabled=True, kind=Kind.APPROVAL_WAITING)
    for rule in rules.select_related("team"):
        waiting = (
            plans_awaiting_approval()
            .filter(
                team_id=rule.team_id, created_at__lte=now - timedelta(minutes=rule.wait_minutes)
            )
            .exclude(pk__in=Alert.objects.filter(rule=rule).values("subject"))
            .select_related("member")
        )
        for plan in waiting:
            minutes = int((now - plan.created_at).total_seconds() // 60)
            alert_raise(
                rule=rule,
                now=now,
                subject=plan.pk,
                summary=(
                    f"Plan {plan.pk} for {plan.member.email} has waited {minutes} minutes for"
                    f" approval: {plan.goal}"
                )[:500],
                url=approval_queue_url(plan),
                details={"plan": plan.pk, "waitingMinutes": minutes},
            )
            raised += 1
    return raised


def key_rotation_failed_raise(*, detail: str, now: datetime | None = None) -> int:
    """The signing-key rotation failed: every team with an enabled ``key_rotation_failed``
    rule is told (the keys are the whole deployment's). How many alerts were raised."""
    rules = AlertRule.objects.filter(enabled=True, kind=Kind.KEY_ROTATION_FAILED)
    url = console_url("admin:plans_signingkey_changelist")
    count = 0
    for rule in rules:
        alert_raise(
            rule=rule,
            now=now,
            subject=SIGNING_KEYS_SUBJECT,
            summary=f"Signing key rotation failed: {detail}"[:500],
            url=url,
            details={"error": detail[:500]},
        )
        count += 1
    return count
