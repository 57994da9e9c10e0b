"""One plan's timeline for an auditor: everything that happened to it, in time order, to
the second: issued, each token signed, each call the guard allowed or blocked, refused
refreshes, every ACP plan update the user saw, revocation, the end.

A plan can hold tens of thousands of decisions, so the page is bounded: when there are
more than ``HEAD + TAIL`` entries, it shows the first ``HEAD`` and the last ``TAIL`` and
links the decisions in between to the decisions list, filtered to the plan and that time
span. Each source costs one query when it holds fewer than ``HEAD + TAIL`` rows (its
first rows are all of it) and three otherwise (first rows, count, last rows), whatever
its size.

Everything an agent sent is data, not markup: every value goes through ``format_html``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.admin.utils import quote
from django.db.models import Model, QuerySet
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from audit.models import AuditRecord
from guard.decisions import Decision
from kernel.admin_base import change_url
from kernel.json_format import compact_json

from .admin_approval_records import APPROVAL_RECORD_LABELS, approval_record_summary
from .admin_display import (
    acp_message_html,
    acp_summary,
    plan_display_status,
    reservation_text,
    step_label,
)
from .models import Plan, PlanDisplayUpdate, PlanEvent, PlanToken
from .selectors import decisions_with_policy_version

HEAD = 50
TAIL = 50

# Order of entries stamped with the same instant: the plan exists before its first token,
# a token before the calls it allows, the end last.
_RANK = {
    "issued": 0,
    AuditRecord.Kind.APPROVAL_REQUESTED: 0,
    AuditRecord.Kind.APPROVAL_NOTIFIED: 0,
    AuditRecord.Kind.APPROVAL_DECIDED: 0,
    AuditRecord.Kind.APPROVAL_EXPIRED: 0,
    "token": 1,
    "refresh_refused": 2,
    "decision": 3,
    "display": 4,
    "decisions_lost": 5,
    AuditRecord.Kind.PLAN_DELEGATED: 5,
    "revoked": 6,
    "expired": 7,
    "ended": 7,
}


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    kind: str
    label: str
    badge: str
    html: SafeString
    row_id: int = 0
    #: when it goes in the order, if not ``at`` (see ``_token_entry``)
    ordered_at: datetime | None = None

    @property
    def sort_key(self) -> tuple[datetime, int, int]:
        return (self.ordered_at or self.at, _RANK[self.kind], self.row_id)

    @property
    def local_at(self) -> datetime:
        return timezone.localtime(self.at)

    @property
    def iso(self) -> str:
        """What the template's ``date:'c'`` wrote, without its per-call format lookups."""
        return self.local_at.isoformat()

    @property
    def seconds(self) -> str:
        """``2026-12-01 09:13:05``, as the template's ``date:"Y-m-d H:i:s"`` wrote it."""
        return self.local_at.strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class Timeline:
    head: list[TimelineEntry]
    tail: list[TimelineEntry]
    total: int
    decisions_total: int
    decisions_url: str
    #: the decisions list for the entries not shown, or "" when every entry is shown
    hidden_decisions_url: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def hidden(self) -> int:
        return self.total - len(self.head) - len(self.tail)


def decisions_list_url(plan: Plan, **filters: str) -> str:
    """The guard decisions list searched for this plan's id (and any other filters)."""
    query = urlencode({"q": plan.pk, **filters})
    return f"{reverse('admin:plans_planevent_changelist')}?{query}"


def _version_anchor(version_id: int, rule_index: int | None = None) -> str:
    url = change_url("policies", "policyversion", version_id)
    return url if rule_index is None else f"{url}#rules-{rule_index}"


def _seconds(value: datetime) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")


# --- the entries --------------------------------------------------------------------------


def _token_entry(token: PlanToken, plan: Plan) -> TimelineEntry:
    """A token's time is its ``iat``, in whole seconds, so it may read a little before the
    instant it was signed: a token is never ordered before its plan (the first one is
    signed in the plan's own transaction), nor after the calls made with it in that
    second."""
    version = token.policy_version
    issued = token.kind == PlanToken.Kind.ISSUE
    return TimelineEntry(
        at=token.issued_at,
        ordered_at=max(token.issued_at, plan.created_at),
        kind="token",
        label="token signed" if issued else "token refreshed",
        badge="ok",
        row_id=token.pk,
        html=format_html(
            'kid <code title="{}">{}…</code> · policy <a href="{}">{} v{}</a> · expires (exp) {}',
            token.kid,
            token.kid[:12],
            _version_anchor(version.pk),
            version.policy.slug,
            version.number,
            _seconds(token.expires_at),
        ),
    )


def decision_rule(event: PlanEvent) -> tuple[int | None, str]:
    """The policy rule that decided: its index in the version's ``rules`` (from 0, as the
    document's JSON path counts) and how the guard described it. (None, description) when
    the policy's default decided; (None, "") when the policy was not consulted."""
    return (event.rule_index, event.rule_description)


def decision_rule_html(
    event: PlanEvent, version_id: int | None, *, shorten: bool = False
) -> SafeString:
    """The rule as the guard described it (``allow github_* (rules[0])``), linked to that
    rule of the version the decision was made under; the default's description unlinked;
    "—" when the policy was not consulted (the plan or its budget decided)."""
    rule_index, description = decision_rule(event)
    full = description or ("—" if rule_index is None else f"rules[{rule_index}]")
    # A list column keeps the end of the description, where the guard puts "(rules[n])".
    shown = f"…{full[-40:]}" if shorten and len(full) > 41 else full
    if rule_index is None or version_id is None:
        return format_html('<span title="{}">{}</span>', full, shown)
    return format_html(
        '<a href="{}" title="{}">{}</a>', _version_anchor(version_id, rule_index), full, shown
    )


def _decision_entry(event: Any) -> TimelineEntry:
    allowed = event.decision == Decision.ALLOWED
    url = change_url("plans", "planevent", event.pk)
    return TimelineEntry(
        at=event.occurred_at,
        kind="decision",
        label=event.decision,
        badge="ok" if allowed else "bad",
        row_id=event.pk,
        html=format_html(
            '<code>{}</code> · {} · rule {} · policy <a href="{}">{} v{}</a>{} · '
            '<a href="{}">decision</a>',
            event.tool,
            step_label(event.step),
            decision_rule_html(event, event.decided_under_version_id),
            _version_anchor(event.decided_under_version_id),
            event.decided_under_policy_slug,
            event.decided_under_version_number,
            format_html(" · {}", event.reason) if event.reason else "",
            url,
        ),
    )


def _record_entry(record: AuditRecord) -> TimelineEntry:
    details = (
        format_html(
            '<details><summary>details</summary><pre class="plangate-pre">{}</pre></details>',
            compact_json(record.details),
        )
        if record.details
        else ""
    )
    version = (
        format_html(" · policy {} v{}", record.policy, record.policy_version)
        if record.policy_version is not None
        else ""
    )
    if record.kind in APPROVAL_RECORD_LABELS:
        return _approval_entry(record, details)
    if record.kind == AuditRecord.Kind.PLAN_DELEGATED:
        return _delegated_entry(record, details)
    refused = record.kind == AuditRecord.Kind.REFRESH_REFUSED
    return TimelineEntry(
        at=record.at,
        kind=record.kind,
        label="refresh refused" if refused else "decisions not delivered",
        badge="bad",
        row_id=record.pk,
        html=format_html("<code>{}</code>{}{}", record.code or "—", version, details),
    )


def _delegated_entry(record: AuditRecord, details: SafeString | str) -> TimelineEntry:
    """A child plan delegated from this one: to which agent, reserving what."""
    child = str(record.details.get("child", ""))
    return TimelineEntry(
        at=record.at,
        kind=record.kind,
        label="delegated",
        badge="ok",
        row_id=record.pk,
        html=format_html(
            'child plan <a href="{}"><code>{}</code></a> for agent {} · reserved {}{}',
            change_url("plans", "plan", child),
            child,
            record.details.get("toName") or record.details.get("to", ""),
            reservation_text(record.details.get("reserved")),
            details,
        ),
    )


def _approval_entry(record: AuditRecord, details: SafeString | str) -> TimelineEntry:
    label, badge, summary = approval_record_summary(record)
    return TimelineEntry(
        at=record.at,
        kind=record.kind,
        label=label,
        badge=badge,
        row_id=record.pk,
        html=format_html("{}{}", summary, details),
    )


def _display_entry(update: Any) -> TimelineEntry:
    return TimelineEntry(
        at=update.at,
        kind="display",
        label="ACP update",
        badge="muted",
        row_id=update.pk,
        html=format_html(
            "{}<details><summary>what the user saw</summary>{}</details>",
            acp_summary(update.message),
            acp_message_html(update.message),
        ),
    )


_ENDINGS: dict[str, str] = {
    Plan.Status.COMPLETED: "the agent ended the plan after every required step ran",
    Plan.Status.ENDED: "the agent ended the plan before every required step ran",
}


def _plan_entries(plan: Plan, now: datetime) -> list[TimelineEntry]:
    """What the plan row itself says happened: issued, revoked, ended, expired."""
    version = plan.policy_version
    entries = [
        TimelineEntry(
            at=plan.created_at,
            kind="issued",
            # A plan sent for approval is declared here; its token comes once approved.
            label="plan declared" if plan.approval else "plan issued",
            badge="ok",
            html=format_html(
                'for {} · agent {} · checked against policy <a href="{}">{} v{}</a>{}',
                plan.member.email,
                plan.agent.name,
                _version_anchor(version.pk),
                version.policy.slug,
                version.number,
                format_html(
                    ' · delegated from plan <a href="{}"><code>{}</code></a>',
                    change_url("plans", "plan", plan.parent_id),
                    plan.parent_id,
                )
                if plan.parent_id
                else "",
            ),
        )
    ]
    if plan.revoked_at is not None:
        entries.append(
            TimelineEntry(
                at=plan.revoked_at,
                kind="revoked",
                label="revoked",
                badge="revoked",
                html=format_html(
                    "by {}{}",
                    plan.revoked_by or "an unrecorded person",
                    format_html(" · reason: {}", plan.revoke_reason) if plan.revoke_reason else "",
                ),
            )
        )
    if plan.ended_at is not None:
        entries.append(
            TimelineEntry(
                at=plan.ended_at,
                kind="ended",
                label=str(plan.get_status_display()).lower(),
                badge=plan.status,
                html=format_html("{}", plan.end_reason or _ENDINGS.get(plan.status, "")),
            )
        )
    elif plan_display_status(plan, now) == Plan.Status.EXPIRED:
        entries.append(
            TimelineEntry(
                at=plan.expires_at,
                kind="expired",
                label="expired",
                badge="expired",
                html=format_html("{}", "the plan reached its absolute end"),
            )
        )
    return entries


# --- merging bounded sources --------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    queryset: QuerySet
    time: str
    entry: Callable[[Any], TimelineEntry]
    #: the same rows for counting, without the annotations' joins
    counted: QuerySet | None = None

    def first_rows(self, count: int) -> list[Any]:
        return list(self.queryset.order_by(self.time, "pk")[:count])

    def last_rows(self, count: int) -> list[Any]:
        return list(self.queryset.order_by(f"-{self.time}", "-pk")[:count])[::-1]

    def count(self) -> int:
        return (self.queryset if self.counted is None else self.counted).order_by().count()


def _sources(plan: Plan) -> dict[str, _Source]:
    plan_decisions = PlanEvent.objects.filter(plan=plan)
    records = AuditRecord.objects.filter(
        team_id=plan.team_id,
        plan_id=plan.pk,
        kind__in=[
            AuditRecord.Kind.REFRESH_REFUSED,
            AuditRecord.Kind.DECISIONS_LOST,
            AuditRecord.Kind.PLAN_DELEGATED,
            *APPROVAL_RECORD_LABELS,
        ],
    )
    updates = PlanDisplayUpdate.objects.filter(plan=plan).annotate(
        at=Coalesce("occurred_at", "received_at")
    )
    return {
        "tokens": _Source(
            plan.tokens.select_related("policy_version__policy"),
            "issued_at",
            lambda token: _token_entry(token, plan),
        ),
        "decisions": _Source(
            decisions_with_policy_version(plan_decisions),
            "occurred_at",
            _decision_entry,
            counted=plan_decisions,
        ),
        "records": _Source(records, "at", _record_entry),
        "display": _Source(updates, "at", _display_entry),
    }


def _ordered(entries: Iterable[TimelineEntry]) -> list[TimelineEntry]:
    return sorted(entries, key=lambda entry: entry.sort_key)


@dataclass
class _Read:
    """What was read of one source: its first rows and, when those are not all of it, its
    count and last rows."""

    source: _Source
    first: list[Any]
    count: int
    last: list[Any]


def _read(source: _Source, head: int, tail: int) -> _Read:
    first = source.first_rows(head + tail)
    if len(first) < head + tail:
        return _Read(source, first, len(first), first)
    return _Read(source, first[:head], source.count(), source.last_rows(tail))


def plan_timeline(plan: Plan, *, head: int = HEAD, tail: int = TAIL) -> Timeline:
    """The plan's timeline, bounded to ``head`` + ``tail`` entries."""
    now = timezone.now()
    fixed = _plan_entries(plan, now)
    read = {name: _read(source, head, tail) for name, source in _sources(plan).items()}
    counts = {name: part.count for name, part in read.items()}
    total = len(fixed) + sum(counts.values())
    everything = decisions_list_url(plan)
    if total <= head + tail:
        # Then every source was shorter than head + tail: its first rows are all of it.
        entries = _ordered(
            [*fixed, *(part.source.entry(row) for part in read.values() for row in part.first)]
        )
        return Timeline(
            head=entries,
            tail=[],
            total=total,
            decisions_total=counts["decisions"],
            decisions_url=everything,
            counts=counts,
        )
    first = _ordered(
        [*fixed, *(part.source.entry(row) for part in read.values() for row in part.first[:head])]
    )[:head]
    last = _ordered(
        [*fixed, *(part.source.entry(row) for part in read.values() for row in part.last[-tail:])]
    )[-tail:]
    # The decisions between the two parts, as a filtered list: from the last shown at the
    # top to the first shown at the bottom.
    hidden = decisions_list_url(
        plan,
        occurred_at__gte=first[-1].at.isoformat(),
        occurred_at__lt=last[0].at.isoformat(),
    )
    return Timeline(
        head=first,
        tail=last,
        total=total,
        decisions_total=counts["decisions"],
        decisions_url=everything,
        hidden_decisions_url=hidden,
        counts=counts,
    )


def timeline_url(plan: Model) -> str:
    return reverse("admin:plans_plan_timeline", args=[quote(plan.pk)])


__all__ = [
    "HEAD",
    "TAIL",
    "Timeline",
    "TimelineEntry",
    "decision_rule_html",
    "decisions_list_url",
    "plan_timeline",
    "timeline_url",
]
